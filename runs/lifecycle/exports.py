"""Runs with their steps and calls as JSON Lines or CSV, streamed a batch of runs at a time, a
batch holding at most STEP_BATCH steps (or one run's, when one run has more).

An export leaves the system (a file on someone's laptop, a spreadsheet, a ticket), so it holds
less than the run page: a call's arguments only as their keyed hash (args_hash), and no tool
results, result previews, error texts (a schema error quotes the argument it refused), model
messages or final answers (the demo's answer quotes a tool result). Whoever needs those opens
the run page, where the permissions and masking of the dashboard apply.
"""
import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator

from django.db.models import Count, QuerySet

from runs.models import Approval, Run, Step, ToolCall

BATCH = 200
STEP_BATCH = 2000

RUN_FIELDS = ("id", "created_at", "finished_at", "agent__name", "task", "customer", "status", "stop_reason",
              "stop_detail", "iterations", "tokens_in", "tokens_out", "cost_usd", "tokens_cached", "tokens_reasoning",
              "compactions")

CSV_COLUMNS = (
    "run_id", "created_at", "finished_at", "agent", "task", "customer", "status", "stop_reason", "stop_detail",
    "iterations", "run_tokens_in", "run_tokens_out", "run_cost_usd",
    "step_index", "step_iteration", "step_kind", "model", "finish_reason", "step_latency_ms",
    "step_tokens_in", "step_tokens_out", "step_cost_usd",
    "call_index", "call_id", "tool", "args_hash", "call_status", "call_ok", "call_truncated", "call_latency_ms",
    "approval_status", "approval_decided_by",
    # Added later: at the end, so the earlier columns keep their places.
    "run_tokens_cached", "run_tokens_reasoning", "run_compactions",
    "step_tokens_cached", "step_tokens_reasoning", "step_context_tokens", "step_tool_definition_tokens",
    "step_compacted_calls",
)
RUN_CELLS, STEP_CELLS, CALL_CELLS = 13, 9, 10  # of the columns before those added later
# A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _runs_in_batches(runs: QuerySet[Run]) -> Iterator[list[dict]]:
    """The runs as plain dicts, BATCH at a time, each with its steps and calls (2 queries a batch,
    and 2 for each part of it that holds up to STEP_BATCH steps).

    Keyset pages over (created_at, pk), the history's order: no long-lived cursor, so a slow
    client does not hold a database transaction open for the whole download.
    """
    runs = runs.order_by("-created_at", "-pk")
    last = None
    while True:
        page = runs
        if last is not None:
            created, pk = last
            page = page.filter(created_at__lte=created).exclude(created_at=created, pk__gte=pk)
        rows = list(page.values(*RUN_FIELDS)[:BATCH])
        if not rows:
            return
        last = (rows[-1]["created_at"], rows[-1]["id"])
        for part in _by_steps(rows):
            yield _with_steps(part)
        if len(rows) < BATCH:
            return


def _by_steps(rows: list[dict]) -> Iterator[list[dict]]:
    """`rows` in consecutive parts of at most STEP_BATCH steps (a longer run is a part alone), so
    the steps and calls held at once stay bounded however long the runs are."""
    counts = dict(
        Step.objects.filter(run_id__in=[row["id"] for row in rows]).order_by().values("run_id")
        .annotate(n=Count("pk")).values_list("run_id", "n")
    )
    part, steps = [], 0
    for row in rows:
        n = counts.get(row["id"], 0)
        if part and steps + n > STEP_BATCH:
            yield part
            part, steps = [], 0
        part.append(row)
        steps += n
    if part:
        yield part


def _with_steps(rows: list[dict]) -> list[dict]:
    run_ids = [row["id"] for row in rows]
    calls_by_step: dict[int, list[dict]] = defaultdict(list)
    calls = (
        ToolCall.objects.filter(run_id__in=run_ids)
        .select_related("approval")
        .only("pk", "step_id", "index", "call_id", "tool_name", "args_hash", "status", "truncated", "latency_ms",
              "approval__status", "approval__decided_by_name", "approval__automatic", "approval__rule_name",
              "approval__rule_version", "approval__grant")
        .order_by("step_id", "index")
    )
    for call in calls:
        # Selected above: no query; a call without one raises DoesNotExist, an AttributeError.
        approval = getattr(call, "approval", None)
        calls_by_step[call.step_id].append({
            "index": call.index,
            "id": call.call_id,
            "tool": call.tool_name,
            "args_hash": call.args_hash,
            "status": call.status,
            # An outcome that is unknown is neither a success nor a failure.
            "ok": None if call.status == ToolCall.Status.UNKNOWN else call.ok,
            "truncated": call.truncated,
            "latency_ms": round(call.latency_ms, 2) if call.latency_ms is not None else None,
            "approval": None if approval is None else {
                "status": approval.status,
                # A person's name, or what decided without one: "rule 'X' v3", "a grant for this run".
                "decided_by": approval.decider if approval.status != Approval.Status.PENDING else None,
            },
        })
    steps_by_run: dict[int, list[dict]] = defaultdict(list)
    steps = Step.objects.filter(run_id__in=run_ids).order_by("run_id", "index").values(
        "pk", "run_id", "index", "iteration", "kind", "model", "finish_reason", "latency_ms",
        "tokens_in", "tokens_out", "cost_usd", "tokens_cached", "tokens_reasoning", "context_tokens",
        "tool_definition_tokens", "compacted_calls",
    )
    for step in steps:
        steps_by_run[step["run_id"]].append({
            "index": step["index"],
            "iteration": step["iteration"],
            "kind": step["kind"],
            "model": step["model"],
            "finish_reason": step["finish_reason"],
            "latency_ms": round(step["latency_ms"], 2),
            "tokens_in": step["tokens_in"],
            "tokens_out": step["tokens_out"],
            "tokens_cached": step["tokens_cached"],
            "tokens_reasoning": step["tokens_reasoning"],
            "context_tokens": step["context_tokens"],
            "tool_definition_tokens": step["tool_definition_tokens"],
            "compacted_calls": step["compacted_calls"],
            "cost_usd": step["cost_usd"],
            "calls": calls_by_step.get(step["pk"], []),
        })
    return [
        {
            "run_id": row["id"],
            "created_at": _iso(row["created_at"]),
            "finished_at": _iso(row["finished_at"]),
            "agent": row["agent__name"],
            "task": row["task"],
            "customer": row["customer"],
            "status": row["status"],
            "stop_reason": row["stop_reason"] or None,
            "stop_detail": row["stop_detail"],
            "iterations": row["iterations"],
            "tokens_in": row["tokens_in"],
            "tokens_out": row["tokens_out"],
            "tokens_cached": row["tokens_cached"],
            "tokens_reasoning": row["tokens_reasoning"],
            "compactions": row["compactions"],
            "cost_usd": row["cost_usd"],
            "steps": steps_by_run.get(row["id"], []),
        }
        for row in rows
    ]


def runs_export_records(runs: QuerySet[Run]) -> Iterator[dict]:
    """One dict per run, newest first, with its steps and their calls."""
    for batch in _runs_in_batches(runs):
        yield from batch


def runs_jsonl(runs: QuerySet[Run]) -> Iterator[str]:
    for record in runs_export_records(runs):
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _csv_rows(record: dict) -> Iterable[list]:
    """One row per call; a step without calls, or a run without steps, still gets one row."""
    run = [
        record["run_id"], record["created_at"], record["finished_at"], record["agent"], record["task"],
        record["customer"], record["status"], record["stop_reason"], record["stop_detail"], record["iterations"],
        record["tokens_in"], record["tokens_out"], record["cost_usd"],
    ]
    run_later = [record["tokens_cached"], record["tokens_reasoning"], record["compactions"]]
    no_step, no_call = [None] * STEP_CELLS, [None] * CALL_CELLS
    if not record["steps"]:
        yield run + no_step + no_call + run_later + [None] * 5
    for step in record["steps"]:
        step_cells = [
            step["index"], step["iteration"], step["kind"], step["model"], step["finish_reason"], step["latency_ms"],
            step["tokens_in"], step["tokens_out"], step["cost_usd"],
        ]
        step_later = [step["tokens_cached"], step["tokens_reasoning"], step["context_tokens"],
                      step["tool_definition_tokens"], " ".join(step["compacted_calls"])]
        if not step["calls"]:
            yield run + step_cells + no_call + run_later + step_later
        for call in step["calls"]:
            approval = call["approval"] or {}
            yield run + step_cells + [
                call["index"], call["id"], call["tool"], call["args_hash"], call["status"], call["ok"],
                call["truncated"], call["latency_ms"], approval.get("status"), approval.get("decided_by"),
            ] + run_later + step_later


def _cell(value):
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def runs_csv(runs: QuerySet[Run]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for record in runs_export_records(runs):
        for row in _csv_rows(record):
            writer.writerow([_cell(value) for value in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()
