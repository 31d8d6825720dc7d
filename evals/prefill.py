"""A case made from a run (or from one of its steps): its task, its customer, optionally the
conversation before that step, and expectations prefilled from what the run did from there on,
for a person to edit. Sensitive arguments are never copied: a condition on one only asks that
it is present."""
import json
import re

from runs.lifecycle.experiment_runs import conversation_before
from runs.models import Run, ToolCall
from toolsapp.models import Tool

# Conditions are made on top-level arguments whose values are short scalars (ids, names, amounts).
MAX_VALUE_CHARS = 200
MAX_CONDITIONS = 10
ANSWER_CHARS = 80
PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def case_from_run(run: Run, *, step: int | None = None, with_conversation: bool = False) -> dict:
    """The fields of a new case (evals.datasets.case_add takes them) made from `run` at `step`."""
    step = step if step and step > 1 else None
    calls = ToolCall.objects.filter(run=run).select_related("step").order_by("step__index", "index")
    if step is not None:
        calls = calls.filter(step__index__gte=step)
    calls = list(calls)
    tools = {t.name: t for t in Tool.objects.filter(name__in={c.tool_name for c in calls})}
    expectations = []
    seen = set()
    for call in calls:
        tool = tools.get(call.tool_name)
        conditions = _conditions(call.arguments, tool.sensitive_fields if tool else [])
        key = (call.tool_name, json.dumps(conditions, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        expectations.append({"kind": "tool_called", "tool": call.tool_name, "conditions": conditions})
    destructive = [c for c in calls if c.tool_name in tools and tools[c.tool_name].destructive]
    expectations.append({"kind": "destructive_ids_seen"} if destructive else {"kind": "no_destructive_call"})
    if run.stop_reason:
        expectations.append({"kind": "stop_reason", "in": [run.stop_reason]})
    if run.iterations:
        expectations.append({"kind": "at_most", "measure": "iterations", "value": run.iterations})
    first_line = next((line.strip() for line in (run.answer or "").splitlines() if line.strip()), "")
    if first_line and run.stop_reason == Run.StopReason.FINAL_ANSWER:
        expectations.append({"kind": "answer_contains", "text": first_line[:ANSWER_CHARS]})
    name = f"Run {run.pk}" + (f" from step {step}" if step else "") + f": {' '.join(run.task.split())}"
    return {
        "name": name[:200],
        "task": run.task,
        "customer": run.customer,
        "messages": conversation_before(run, step) if with_conversation and step else [],
        "expectations": expectations,
        "source_run": run,
        "source_step": step,
    }


def _conditions(arguments: str, sensitive_fields) -> list[dict]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return []
    if not isinstance(parsed, dict):
        return []
    sensitive = {name.lower() for name in sensitive_fields or ()}
    conditions = []
    for key, value in list(parsed.items())[:MAX_CONDITIONS]:
        if not PLAIN_KEY.fullmatch(key):
            continue  # a key the JSON path would need quoting for: left to the person
        if key.lower() in sensitive:
            conditions.append({"path": f"$.{key}", "op": "present", "value": None})
        elif isinstance(value, (str, int, float, bool)) and len(str(value)) <= MAX_VALUE_CHARS:
            conditions.append({"path": f"$.{key}", "op": "eq", "value": value})
    return conditions
