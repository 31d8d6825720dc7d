"""Reads about a run's relatives: where it came from, its forks and re-runs, and a fork side by
side with its parent from the fork point on. Plain data for the run page, the compare page and the API."""
from runs.lifecycle.call_arguments import sensitive_fields_by_tool, shown_arguments
from runs.models import Run, RunEvent, Step, ToolCall

SHORT_HASH = 12  # enough to tell calls apart by eye; the full keyed hash is on the run page
COMPARE_PREVIEW_CHARS = 300


class NotAFork(ValueError):
    """Only a fork has a parent to compare with; the message says why in words."""


def _brief(run: Run) -> dict:
    return {"run_id": run.pk, "status": run.status, "status_label": run.get_status_display(), "created_at": run.created_at}


def run_family(run: Run) -> dict:
    """{"parent": the run this one was forked or re-run from (None for an original), "forks": forks
    of this run (with the step each started after), "reruns": its re-runs}, newest first (3 queries).

    Three, not one: SQLite's statistics say almost every run has no parent (NULL), so for an OR or
    a UNION of these filters it read all 100,000 runs (the run page 6 -> 34 ms); apart, each uses its index."""
    parent = None
    source = run.forked_from_id or run.rerun_of_id
    if source is not None:
        row = Run.objects.filter(pk=source).only("pk", "status", "created_at").first()
        if row is not None:
            parent = {**_brief(row), "relation": "fork" if run.forked_from_id else "rerun",
                      "step": run.forked_at_step if run.forked_from_id else None}
    forks = Run.objects.filter(forked_from=run).only("pk", "status", "created_at", "forked_at_step").order_by("-pk")
    reruns = Run.objects.filter(rerun_of=run).only("pk", "status", "created_at").order_by("-pk")
    return {
        "parent": parent,
        "forks": [{**_brief(f), "step": f.forked_at_step} for f in forks],
        "reruns": [_brief(r) for r in reruns],
    }


def run_comparison(fork: Run) -> dict:
    """A fork and its parent side by side from the fork step on: per step index, each side's
    model, finish reason, tokens, cost and latency, and its calls (tool, short args hash, status);
    each run's status and stop reason; token and cost totals of the steps after the fork step, and
    of the whole run. The fork step itself is shared ("shared": true) and counts in neither
    "since_fork" total. Raises NotAFork. (4 queries.)"""
    if fork.forked_from_id is None:
        if fork.forked_at_step is not None:
            raise NotAFork(f"Run {fork.pk} was forked from a run that no longer exists.")
        raise NotAFork(f"Run {fork.pk} is not a fork: it has no parent to compare with.")
    parent = Run.objects.get(pk=fork.forked_from_id)
    at = fork.forked_at_step
    steps, indexes = _steps_compared(parent.pk, fork.pk, at)
    return {
        "fork_step": at,
        "edit": _edit(fork),
        "parent": _side(parent, steps.get(parent.pk, {}), at),
        "fork": _side(fork, steps.get(fork.pk, {}), at),
        "rows": [
            {"index": i, "shared": i == at, "parent": steps.get(parent.pk, {}).get(i), "fork": steps.get(fork.pk, {}).get(i)}
            for i in indexes
        ],
    }


def runs_side_by_side(left: Run, right: Run) -> dict:
    """Any two runs side by side from their first step (e.g. one case's runs in two experiments):
    per step index, each side's step as run_comparison gives it, what differs marked. (3 queries.)"""
    steps, indexes = _steps_compared(left.pk, right.pk, 1)
    return {
        "left": _side(left, steps.get(left.pk, {}), 0),
        "right": _side(right, steps.get(right.pk, {}), 0),
        "rows": [{"index": i, "left": steps.get(left.pk, {}).get(i), "right": steps.get(right.pk, {}).get(i)}
                 for i in indexes],
    }


def _steps_compared(left_id: int, right_id: int, first: int) -> tuple[dict[int, dict[int, dict]], list[int]]:
    """Both runs' steps from index `first` on, what differs between the two of each index marked,
    and every step index either has."""
    steps = _steps_from({left_id, right_id}, first)
    indexes = sorted({i for by_index in steps.values() for i in by_index})
    for i in indexes:
        _mark_differences(steps.get(left_id, {}).get(i), steps.get(right_id, {}).get(i))
    for by_index in steps.values():
        for step in by_index.values():
            for call in step["calls"]:
                del call["full_hash"]  # compared above; the page and the API show the short one
    return steps, indexes


def _steps_from(run_ids: set[int], first: int) -> dict[int, dict[int, dict]]:
    """{run id: {step index: step}} for the steps from index `first` on, with their calls."""
    rows = Step.objects.filter(run_id__in=run_ids, index__gte=first).defer("preamble").order_by("run_id", "index")
    calls: dict[int, list[dict]] = {}
    found = list(
        ToolCall.objects.filter(step__in=rows).order_by("step_id", "index")
        .values_list("step_id", "tool_name", "args_hash", "status", "arguments", "result_text")
    )
    sensitive = sensitive_fields_by_tool(row[1] for row in found)
    for step_id, tool, args_hash, status, arguments, result_text in found:
        calls.setdefault(step_id, []).append({
            "tool": tool, "args_hash": args_hash[:SHORT_HASH], "status": status,
            "status_label": ToolCall.Status(status).label if status in ToolCall.Status.values else status,
            # Masked as on the run page; the result as the model read it (a preview).
            "arguments": shown_arguments(arguments, sensitive.get(tool, [])),
            "result_preview": result_text[:COMPARE_PREVIEW_CHARS],
            "full_hash": args_hash,
        })
    steps: dict[int, dict[int, dict]] = {}
    for step in rows:
        steps.setdefault(step.run_id, {})[step.index] = {
            "index": step.index, "kind": step.kind, "model": step.model, "finish_reason": step.finish_reason,
            "tokens_in": step.tokens_in, "tokens_out": step.tokens_out, "cost_usd": step.cost_usd,
            "latency_ms": round(step.latency_ms, 2), "calls": calls.get(step.pk, []),
            "content": (step.message or {}).get("content") or "",
        }
    return steps


def _mark_differences(parent: dict | None, fork: dict | None) -> None:
    """Mark what differs between the two runs' steps of one index (the answer; each call, by its
    position: tool, arguments, result), so the page can point at it."""
    if parent is None or fork is None:
        return
    differs = parent["content"] != fork["content"]
    parent["content_differs"] = fork["content_differs"] = differs
    parent_calls, fork_calls = parent["calls"], fork["calls"]
    for n in range(max(len(parent_calls), len(fork_calls))):
        mine = parent_calls[n] if n < len(parent_calls) else None
        theirs = fork_calls[n] if n < len(fork_calls) else None
        for call, other in ((mine, theirs), (theirs, mine)):
            if call is None:
                continue
            call["arguments_differ"] = other is None or (call["tool"], call["full_hash"]) != (other["tool"], other["full_hash"])
            call["result_differs"] = other is None or call["result_preview"] != other["result_preview"]


def _side(run: Run, steps: dict[int, dict], at: int) -> dict:
    after = [s for i, s in steps.items() if i > at]
    return {
        "run_id": run.pk,
        "status": run.status,
        "status_label": run.get_status_display(),
        "stop_reason": run.stop_reason or None,
        "stop_reason_label": run.get_stop_reason_display() if run.stop_reason else None,
        "answer": run.answer,
        "steps_since_fork": len(after),
        "since_fork": _totals(sum(s["tokens_in"] for s in after), sum(s["tokens_out"] for s in after),
                              sum(s["cost_usd"] for s in after)),
        "run_totals": _totals(run.tokens_in, run.tokens_out, run.cost_usd),
    }


def _totals(tokens_in: int, tokens_out: int, cost: float) -> dict:
    return {"tokens_in": tokens_in, "tokens_out": tokens_out, "total_tokens": tokens_in + tokens_out,
            "cost_usd": round(cost, 6)}


def _edit(fork: Run) -> dict | None:
    """How the fork's copy was edited, as its "fork" event recorded it (None: not edited)."""
    event = RunEvent.objects.filter(run=fork, kind="fork").values_list("data", flat=True).first()
    if not event or not event.get("edit"):
        return None
    return {key: event[key] for key in ("edit", "by", "call_id") if key in event}
