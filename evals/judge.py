"""The judge: a model the admin configures (EVAL_JUDGE_MODEL, at EVAL_JUDGE_BASE_URL or the
models' endpoint) reads a rubric, the case's task, the calls the run requested and its answer,
and gives a verdict with its reason. Asked through the same model client as the runs. Its
verdict is a model's opinion, and is labelled so wherever it shows."""
import json
import re

from django.conf import settings

from evals.expectations import Judgement
from runs.engine.llm import clients as llm_clients
from runs.engine.llm import completions as llm
from toolsapp.sensitive import masked

INSTRUCTIONS = (
    "You judge whether an AI agent's run meets a rubric. Read the rubric, the task, the tool calls the agent "
    "requested and its final answer. Reply with only a JSON object: "
    '{"verdict": "pass" or "fail", "reason": "one or two sentences"}.'
)
JUDGE_TIMEOUT_SECONDS = 60.0
MAX_ANSWER_CHARS = 20_000
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def judge(*, rubric: str, task: str, answer: str, calls: list[tuple[str, object, list[str]]]) -> Judgement:
    """The judge's verdict; an error (no judge configured, the model failed, no verdict) fails the check."""
    model = settings.EVAL_JUDGE_MODEL
    if not model:
        return Judgement(False, "", error="no judge model is configured (set EVAL_JUDGE_MODEL)")
    shown_calls = [{"tool": name, "arguments": masked(arguments, sensitive)} for name, arguments, sensitive in calls]
    request = (f"Rubric:\n{rubric}\n\nTask:\n{task}\n\nTool calls requested:\n{json.dumps(shown_calls, ensure_ascii=False)}"
               f"\n\nFinal answer:\n{answer[:MAX_ANSWER_CHARS]}")
    try:
        endpoint = llm_clients.resolve_endpoint(base_url=settings.EVAL_JUDGE_BASE_URL, models=[model], trusted=True)
        reply = llm.complete(
            endpoint=endpoint, messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": request}],
            tools=[], tool_choice="none", parallel_tool_calls=False, timeout=JUDGE_TIMEOUT_SECONDS,
            max_output_tokens=settings.LLM_MAX_OUTPUT_TOKENS,
        )
    except llm.ModelError as exc:
        return Judgement(False, "", model=model, error=f"the judge model failed: {str(exc)[:300]}")
    return verdict_read(reply.content or "", model=reply.model or model,
                        extra={"tokens": reply.tokens_in + reply.tokens_out, "cost_usd": reply.cost_usd})


def verdict_read(text: str, *, model: str, extra: dict | None = None) -> Judgement:
    """A judge's answer as a verdict: a JSON object with "verdict" pass or fail (in a code block too)."""
    found = _OBJECT.search(text)
    try:
        data = json.loads(found.group(0)) if found else None
    except ValueError:
        data = None
    verdict = str(data.get("verdict", "")).strip().lower() if isinstance(data, dict) else ""
    if verdict not in ("pass", "fail"):
        return Judgement(False, "", model=model, error=f"the judge gave no verdict: {text[:200]!r}", extra=extra or {})
    reason = str(data.get("reason", "")).strip()[:1000] or "(no reason given)"
    return Judgement(verdict == "pass", reason, model=model, extra=extra or {})
