"""What each call of a run was asked to do, as the run page shows it: the model's arguments as
pretty-printed JSON with the tool's sensitive fields masked (the queue's masking), and after an
edit-then-approve, what ran instead, field by field, with who changed it and why.

Read from the rows when a page asks, never from stored events: a field an administrator marks
sensitive today is masked in yesterday's runs too, and the events stay as small as they were.
"""
import datetime
import functools
import json
from collections.abc import Iterable

from django.db import connection
from django.db.models.fields.json import KT
from django.utils import timezone

from hosting.text import loads as bounded_loads
from runs.models import Approval, Step, ToolCall
from toolsapp.models import Tool
from toolsapp.sensitive import MASK, masked

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


def value_leaves(value, path: str = "", *, root: str = "(the arguments)") -> dict[str, object]:
    """Every scalar (and empty container) of `value` by its path: `city`, `items[0].sku`; a value
    that is itself a scalar under `root`. Also the compare pages' key changes (value_changes.py)."""
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            out.update(value_leaves(item, f"{path}.{key}" if path else str(key), root=root))
        return out
    if isinstance(value, list) and value:
        out = {}
        for n, item in enumerate(value):
            out.update(value_leaves(item, f"{path}[{n}]", root=root))
        return out
    return {path or root: value}


def field_changes(asked: str, ran: str, sensitive_fields: Iterable[str]) -> list[dict]:
    """The fields an edit changed, in the model's order then the added ones: each with what the
    model asked and what ran, as JSON text ("" when the field was not there), masked."""
    sensitive = list(sensitive_fields or ())
    ok_asked, before = _parsed(asked)
    ok_ran, after = _parsed(ran)
    if not (ok_asked and ok_ran):
        return []
    raw_before, raw_after = value_leaves(before), value_leaves(after)
    shown_before, shown_after = value_leaves(masked(before, sensitive)), value_leaves(masked(after, sensitive))
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


STEP_COLUMNS = ("id", "index", "iteration", "kind", "model", "latency_ms", "tokens_in", "tokens_out", "cost_usd",
                "finish_reason", "model_errors", "notes", "reasoning", "message", "created_at", "tokens_cached",
                "tokens_reasoning", "context_tokens", "tool_definition_tokens", "compacted_calls")
CALL_COLUMNS = ("id", "step_id", "index", "call_id", "tool_name", "arguments", "args_hash", "status", "latency_ms",
                "truncated", "error", "result_text", "executed_arguments", "executed_args_hash", "approval_id")
JSON_STEP_COLUMNS = ("model_errors", "notes", "message", "compacted_calls")


@functools.cache
def _timeline_sql() -> tuple[str, str, str]:
    """The statements of run_timeline, built once per process: the page runs them on every load,
    and the ORM's query building cost far more than the queries (a dozen steps: 3 ms against 0.1)."""
    q = connection.ops.quote_name

    def columns(model, names):
        return ", ".join(q(model._meta.get_field(n).column) for n in names)

    steps = (f"SELECT {columns(Step, STEP_COLUMNS)} FROM {q(Step._meta.db_table)} WHERE {q('run_id')} = %s "
             f"ORDER BY {q('index')} LIMIT %s")
    calls = (f"SELECT {columns(ToolCall, CALL_COLUMNS)} FROM {q(ToolCall._meta.db_table)} WHERE {q('run_id')} = %s "
             f"AND {q('step_id')} IN (SELECT {q('id')} FROM {q(Step._meta.db_table)} WHERE {q('run_id')} = %s "
             f"ORDER BY {q('index')} LIMIT %s) ORDER BY {q('step_id')}, {q('index')}")
    tools = f"SELECT {q('name')}, {q('sensitive_fields')} FROM {q(Tool._meta.db_table)} WHERE {q('name')} IN "
    return steps, calls, tools


def _json(value):
    """A JSON column as a raw cursor returns it: text on SQLite, already decoded on PostgreSQL."""
    return json.loads(value) if isinstance(value, str) else value


def _moment(value):
    """A datetime column as a raw cursor returns it (SQLite: naive, in UTC), made aware."""
    if value is not None and timezone.is_naive(value):
        value = value.replace(tzinfo=datetime.UTC)
    return value


def run_timeline(*, run) -> dict:
    """The run's steps with their calls as the page shows them before (and without) its live
    script: each call with its arguments masked, its approval, its error and result preview.

    Not read: what the page does not show and can be large (the preamble holds the system prompt
    and the task; a full result can be megabytes: only a fork's edit marks are taken)."""
    steps_sql, calls_sql, tools_sql = _timeline_sql()
    with connection.cursor() as cursor:
        cursor.execute(steps_sql, [run.pk, TIMELINE_STEPS + 1])
        step_rows = cursor.fetchall()
        cursor.execute(calls_sql, [run.pk, run.pk, TIMELINE_STEPS])
        call_rows = cursor.fetchall()
        names = sorted({row[CALL_COLUMNS.index("tool_name")] for row in call_rows})
        sensitive = {}
        if names:
            cursor.execute(tools_sql + f"({', '.join(['%s'] * len(names))})", names)
            sensitive = {name: _json(fields) or [] for name, fields in cursor.fetchall()}
    more = len(step_rows) > TIMELINE_STEPS
    steps = []
    for row in step_rows[:TIMELINE_STEPS]:
        values = dict(zip(STEP_COLUMNS, row))
        for name in JSON_STEP_COLUMNS:
            values[name] = _json(values[name])
        message = values.pop("message") or {}
        values["created_at"] = _moment(values["created_at"])
        step = Step(run_id=run.pk, **values)
        step.content = message.get("content") if isinstance(message, dict) else ""
        steps.append(step)
    calls = [ToolCall(run_id=run.pk, **dict(zip(CALL_COLUMNS, row))) for row in call_rows]
    for call in calls:
        call.truncated = bool(call.truncated)
    approvals = {a.pk: a for a in Approval.objects.filter(pk__in=[c.approval_id for c in calls if c.approval_id])} \
        if any(c.approval_id for c in calls) else {}
    marks = {}
    if run.forked_from_id and calls:  # only a fork's copied results can have been edited
        marks = {
            pk: {"by": by or "", "at": at}
            for pk, mark, by, at in ToolCall.objects.filter(run=run, pk__in=[c.pk for c in calls])
            .annotate(edited_mark=KT("result__edited"), edited_by=KT("result__edited_by"), edited_at=KT("result__edited_at"))
            .values_list("pk", "edited_mark", "edited_by", "edited_at")
            if str(mark).lower() in ("true", "1")  # JSON true reads back as "true" (PostgreSQL) or 1 (SQLite)
        }
    calls_by_step: dict[int, list[ToolCall]] = {}
    for call in calls:
        call.approval = approvals.get(call.approval_id)
        call.shown = call_arguments(call, sensitive.get(call.tool_name, []))
        call.result_edit = marks.get(call.pk)
        calls_by_step.setdefault(call.step_id, []).append(call)
    for step in steps:
        step.shown_calls = calls_by_step.get(step.pk, [])
    # The same, for the live script: it starts from these instead of asking again.
    return {"steps": steps, "more": more, "arguments": [call.shown for call in calls]}
