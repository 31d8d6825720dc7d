"""Replay one step's request: the conversation as that step's request carried it, sent again to up
to five models at once, answers only (no tool is run, nothing is recorded in the run). For
comparing models on a real request before changing an agent.

The request is rebuilt from the run's rows (the loop records no request bodies): the same
messages, tools and settings, unless the run's tools changed since. In a run that summarised
results to fit its context budget, the summaries are made again for this one request, so they may
differ from those the step sent (the loop's keep from request to request).
"""
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings

from runs.engine import context, llm, llm_clients
from runs.engine.conversation import build_messages
from runs.engine.run_tools import RunTools
from runs.lifecycle.archive import masked_arguments
from runs.models import Run, Step
from toolsapp.sensitive import sensitive_values_in_messages

MAX_MODELS = 5
REPLAY_TIMEOUT_SECONDS = 60.0  # each model's answer (a person waits for the page)


class ReplayRefused(ValueError):
    pass


@dataclass
class ReplayAnswer:
    model: str
    ok: bool
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments"}: asked for, never run
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    error: str = ""


def step_request(*, run: Run, index: int) -> tuple[list[dict], RunTools, str]:
    """(messages, the run's tools, tool choice) of step `index`'s request, fitted to the run's budget."""
    step = Step.objects.filter(run=run, index=index, kind=Step.Kind.TURN).values("tool_choice").first()
    if step is None:
        raise ReplayRefused(f"run {run.pk} has no step {index} that asked its model with tools")
    config = run.config
    toolbox = RunTools(config.get("tools", []), read_back=config.get("read_back", False))
    history = build_messages(run, before_step=index)
    window = context.Window(config.get("context_budget", 0), read_back=config.get("read_back", False))
    try:
        try:
            fitted = window.fit(history, [], context.definitions_tokens(toolbox.definitions))
        except context.ContextFull:
            fitted = window.fit(history, [], context.definitions_tokens(toolbox.definitions), context.HARDER)
    except context.ContextFull as exc:
        raise ReplayRefused(f"step {index}'s request no longer fits the run's context budget: {exc}") from None
    if fitted.compacted:
        toolbox.offer_read_back()
    # The choice the step's request was sent with ("auto" when a server refused "required").
    return fitted.messages, toolbox, step["tool_choice"] or "auto"


def models_chosen(text: str) -> list[str]:
    """The model names typed (comma or line separated), in order, without repeats."""
    names = [name.strip() for part in text.splitlines() for name in part.split(",")]
    chosen = list(dict.fromkeys(name for name in names if name))
    if not chosen:
        raise ReplayRefused("name at least one model")
    if len(chosen) > MAX_MODELS:
        raise ReplayRefused(f"at most {MAX_MODELS} models at once")
    if any(len(name) > 200 for name in chosen):
        raise ReplayRefused("a model name is longer than 200 characters")
    return chosen


def step_replay(*, run: Run, index: int, models: list[str]) -> list[ReplayAnswer]:
    """Each model's answer to step `index`'s request, in the order of `models`."""
    messages, toolbox, tool_choice = step_request(run=run, index=index)
    config = run.config
    # Arguments a model writes for a tool's sensitive fields are masked, as on the run page.
    sensitive = {name: list(tool.sensitive_fields) for name, tool in toolbox.tools.items() if tool.sensitive_fields}
    endpoint_settings = llm_clients.endpoint_settings(config)

    def ask(model: str) -> ReplayAnswer:
        started = time.perf_counter()
        try:
            endpoint = llm_clients.resolve_endpoint(**{**endpoint_settings, "models": [model]})
            reply = llm.complete(
                endpoint=endpoint, messages=messages, tools=toolbox.definitions, tool_choice=tool_choice,
                parallel_tool_calls=config.get("parallel_tool_calls", True),
                provider_options=config.get("provider_options") or {},
                max_output_tokens=config.get("max_output_tokens") or settings.LLM_MAX_OUTPUT_TOKENS,
                timeout=REPLAY_TIMEOUT_SECONDS,
                # A provider's error may echo the request: sensitive arguments never reach the page.
                redacted=lambda: sensitive_values_in_messages(messages, toolbox.tools),
            )
        except llm.ModelError as exc:
            return ReplayAnswer(model, False, error=str(exc)[:1000],
                                latency_ms=(time.perf_counter() - started) * 1000)
        return ReplayAnswer(
            model, True, content=reply.content,
            tool_calls=[{"name": c["function"]["name"], "arguments": masked_arguments(
                c["function"]["arguments"], sensitive.get(c["function"]["name"], ()))} for c in reply.tool_calls],
            tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost_usd=reply.cost_usd, latency_ms=reply.latency_ms,
        )

    with ThreadPoolExecutor(max_workers=len(models), thread_name_prefix="replay") as pool:
        return list(pool.map(ask, models))
