"""What each call of a run was asked to do, as the run page shows it: the model's arguments as
pretty-printed JSON with the tool's sensitive fields masked (the queue's masking), and after an
edit-then-approve, what ran instead, field by field, with who changed it and why.

Read from the rows when a page asks, never from stored events: a field an administrator marks
sensitive today is masked in yesterday's runs too, and the events stay as small as they were.
"""
import json
from collections.abc import Iterable

from django.db.models.fields.json import KT

from runs.models import Step, ToolCall
from toolsapp.models import Tool
from toolsapp.sensitive import MASK, masked
from toolsapp.text import loads as bounded_loads

# A page asks for the arguments of this many calls at once (the next ones with ?after=).
CALLS_PER_READ = 200
# Longer arguments are cut on the page (the API's call endpoint has them whole).
SHOWN_MAX_CHARS = 20_000
HIDDEN_UNPARSABLE = "(not valid JSON; hidden because this tool has sensitive fields)"


def _parsed(text: str):
    """(True, value) for JSON text, (False, None) for anything else."""
    try:
        return True, bounded_loads(text or "{}")
    except ValueError:
        return False, None


def _cut(text: str) -> str:
    if len(text) <= SHOWN_MAX_CHARS:
        return text
    return text[:SHOWN_MAX_CHARS] + f"\n… (cut at {SHOWN_MAX_CHARS} of {len(text)} characters)"


def shown_arguments(text: str, sensitive_fields: Iterable[str]) -> str:
    """`text` (a call's arguments as sent) pretty-printed, sensitive values as MASK."""
    sensitive = list(sensitive_fields or ())
    ok, value = _parsed(text)
    if not ok:
        return HIDDEN_UNPARSABLE if sensitive else _cut(text)
    return _cut(json.dumps(masked(value, sensitive), indent=2, ensure_ascii=False))


def _leaves(value, path: str = "") -> dict[str, object]:
    """Every scalar (and empty container) of `value` by its path: `city`, `items[0].sku`."""
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for n, item in enumerate(value):
            out.update(_leaves(item, f"{path}[{n}]"))
        return out
    return {path or "(the arguments)": value}


def field_changes(asked: str, ran: str, sensitive_fields: Iterable[str]) -> list[dict]:
    """The fields an edit changed, in the model's order then the added ones: each with what the
    model asked and what ran, as JSON text ("" when the field was not there), masked."""
    sensitive = list(sensitive_fields or ())
    ok_asked, before = _parsed(asked)
    ok_ran, after = _parsed(ran)
    if not (ok_asked and ok_ran):
        return []
    raw_before, raw_after = _leaves(before), _leaves(after)
    shown_before, shown_after = _leaves(masked(before, sensitive)), _leaves(masked(after, sensitive))
    changes = []
    for path in [*raw_before, *(p for p in raw_after if p not in raw_before)]:
        if path in raw_before and path in raw_after and raw_before[path] == raw_after[path]:
            continue
        # A masked path may be a parent of several leaves: show it once.
        shown_path = next((p for p in shown_before if path == p or path.startswith(f"{p}.") or path.startswith(f"{p}[")), None)
        shown_path = shown_path or next((p for p in shown_after if path == p or path.startswith(f"{p}.") or path.startswith(f"{p}[")), path)
        if any(change["field"] == shown_path for change in changes):
            continue
        changes.append({
            "field": shown_path,
            "asked": json.dumps(shown_before[shown_path], ensure_ascii=False) if shown_path in shown_before else "",
            "ran": json.dumps(shown_after[shown_path], ensure_ascii=False) if shown_path in shown_after else "",
            "sensitive": shown_before.get(shown_path) == MASK or shown_after.get(shown_path) == MASK,
        })
    return changes


def _edit(call: ToolCall, sensitive: list[str]) -> dict | None:
    if not call.executed_arguments:
        return None
    approval = call.approval
    return {
        "ran_with": shown_arguments(call.executed_arguments, sensitive),
        "ran_with_hash": call.executed_args_hash,
        "changes": field_changes(call.arguments, call.executed_arguments, sensitive),
        "by": approval.decider if approval is not None else "",
        "at": approval.decided_at.isoformat() if approval is not None and approval.decided_at else None,
        "note": approval.reason if approval is not None else "",
    }


def call_arguments(call: ToolCall, sensitive_fields: Iterable[str]) -> dict:
    sensitive = list(sensitive_fields or ())
    return {
        "pk": call.pk,
        "tool": call.tool_name,
        "args_hash": call.args_hash,
        "arguments": shown_arguments(call.arguments, sensitive),
        "edit": _edit(call, sensitive),
    }


def sensitive_fields_by_tool(names: Iterable[str]) -> dict[str, list[str]]:
    return dict(Tool.objects.filter(name__in=set(names)).values_list("name", "sensitive_fields"))


def run_call_arguments(*, run_id: int, after: int = 0, limit: int = CALLS_PER_READ) -> tuple[list[dict], bool]:
    """The run's calls with pk > `after`, in pk order, as `call_arguments`; and whether more follow."""
    calls = list(
        ToolCall.objects.filter(run_id=run_id, pk__gt=after).select_related("approval").order_by("pk")[: limit + 1]
    )
    more = len(calls) > limit
    calls = calls[:limit]
    sensitive = sensitive_fields_by_tool(c.tool_name for c in calls)
    return [call_arguments(call, sensitive.get(call.tool_name, [])) for call in calls], more


# The server-rendered timeline (the page without JavaScript) shows this many steps at most.
TIMELINE_STEPS = 300


def run_timeline(*, run) -> dict:
    """The run's steps with their calls as the page shows them before (and without) its live
    script: each call with its arguments masked, its approval, its error and result preview."""
    # Not read: what the page does not show and can be large (the preamble holds the system
    # prompt and the task; a full result can be megabytes: only a fork's edit marks are taken).
    steps = list(
        Step.objects.filter(run=run).defer("preamble", "message").annotate(content=KT("message__content"))
        .order_by("index")[: TIMELINE_STEPS + 1]
    )
    more = len(steps) > TIMELINE_STEPS
    steps = steps[:TIMELINE_STEPS]
    calls_by_step: dict[int, list[ToolCall]] = {}
    calls = ToolCall.objects.filter(step__in=steps).defer("result").select_related("approval")
    if run.forked_from_id:  # only a fork's copied results can have been edited
        calls = calls.annotate(
            edited_mark=KT("result__edited"), edited_by=KT("result__edited_by"), edited_at=KT("result__edited_at")
        )
    calls = list(calls.order_by("step_id", "index"))
    sensitive = sensitive_fields_by_tool(c.tool_name for c in calls)
    for call in calls:
        call.shown = call_arguments(call, sensitive.get(call.tool_name, []))
        # JSON true reads back as "true" (PostgreSQL) or 1 (SQLite).
        edited = str(getattr(call, "edited_mark", None)).lower() in ("true", "1")
        call.result_edit = {"by": call.edited_by or "", "at": call.edited_at} if edited else None
        calls_by_step.setdefault(call.step_id, []).append(call)
    for step in steps:
        step.shown_calls = calls_by_step.get(step.pk, [])
    # The same, for the live script: it starts from these instead of asking again.
    return {"steps": steps, "more": more, "arguments": [call.shown for call in calls]}
