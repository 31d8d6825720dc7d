"""Rebuild runs, calls and grants from their timeline events alone, as the live page does, and
compare them with the rows: the proof that every state change has its event."""
from runs.engine.storage.snapshots import PREVIEW_CHARS
from runs.models import Approval, OperatorMessage, Run, RunEvent, RunGrant, Step, ToolCall

RUN_FIELDS = ("status", "stop_reason", "stop_detail", "answer", "iterations")
CALL_FIELDS = ("status", "ok", "error", "truncated", "result_preview", "latency_ms")


def replay(run_id: int) -> tuple[dict, dict[int, dict]]:
    """(the run's last state, {call pk: call state}) from the run's events, in sequence order."""
    run, calls, _ = replay_all(run_id)
    return run, calls


def replay_all(run_id: int) -> tuple[dict, dict[int, dict], dict[int, dict]]:
    """(the run's last state, {call pk: call state}, {grant id: grant state}) from the run's events."""
    run: dict = {}
    calls: dict[int, dict] = {}
    grants: dict[int, dict] = {}
    for kind, data in RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("kind", "data"):
        if kind == "run":
            run = data
        elif kind == "step":
            for call in data["calls"]:
                _apply_call(calls, call)
        elif kind == "call":
            _apply_call(calls, data)
        elif kind == "approval":
            approval = {k: v for k, v in data.items() if k != "call_pk"}
            calls.setdefault(data["call_pk"], {})["approval"] = approval
        elif kind == "grant":
            grants[data["grant_id"]] = data
    return run, calls, grants


def _apply_call(calls: dict, data: dict) -> None:
    known = calls.get(data["pk"], {})
    if not data.get("approval") and known.get("approval"):
        data = {**data, "approval": known["approval"]}  # a call event need not repeat its approval
    calls[data["pk"]] = data


def mismatches(run_id: int) -> list[str]:
    """Where the replayed state differs from the rows (empty when they agree)."""
    replayed_run, replayed_calls, replayed_grants = replay_all(run_id)
    row = Run.objects.get(pk=run_id)
    problems = []
    expected_run = {
        "status": row.status, "stop_reason": row.stop_reason or None, "stop_detail": row.stop_detail,
        "answer": row.answer, "iterations": row.iterations,
        "usage": {"tokens_in": row.tokens_in, "tokens_out": row.tokens_out, "cost_usd": round(row.cost_usd, 6)},
    }
    for name, value in expected_run.items():
        got = replayed_run.get(name)
        if name == "usage":
            got = {k: (got or {}).get(k) for k in value}
        if got != value:
            problems.append(f"run {run_id} {name}: events say {got!r}, the row says {value!r}")
    rows = ToolCall.objects.filter(run_id=run_id).select_related("approval")
    for call in rows:
        seen = replayed_calls.get(call.pk)
        if seen is None:
            problems.append(f"call {call.pk} ({call.tool_name}) has no event")
            continue
        expected = {
            "status": call.status, "ok": call.ok, "error": call.error, "truncated": call.truncated,
            "result_preview": call.result_text[:PREVIEW_CHARS],
            "latency_ms": round(call.latency_ms, 2) if call.latency_ms is not None else None,
        }
        for name, value in expected.items():
            if seen.get(name) != value:
                problems.append(f"call {call.pk} {name}: events say {seen.get(name)!r}, the row says {value!r}")
        approval = call.approval
        got = seen.get("approval") or {}
        if approval is None:
            if got:
                problems.append(f"call {call.pk}: events show an approval, the row has none")
            continue
        decider = approval.decider if approval.status != Approval.Status.PENDING else None
        expected_approval = {
            "id": approval.pk, "status": approval.status, "reason": approval.reason, "decided_by": decider,
            "automatic": approval.automatic, "rule_name": approval.rule_name or None,
            "rule_version": approval.rule_version, "required_approvals": approval.required_approvals,
            "approvals_given": approval.approvals_given, "edited": bool(approval.edited_args_hash),
            "edited_args_hash": approval.edited_args_hash or None, "guidance": approval.guidance,
        }
        for name, value in expected_approval.items():
            if got.get(name) != value:
                problems.append(f"call {call.pk} approval {name}: events say {got.get(name)!r}, the row says {value!r}")
    return problems + _grant_mismatches(run_id, replayed_grants) + lever_mismatches(run_id) + fork_mismatches(run_id)


def _grant_mismatches(run_id: int, replayed: dict[int, dict]) -> list[str]:
    problems = []
    for grant in RunGrant.objects.filter(run_id=run_id):
        seen = replayed.get(grant.pk)
        if seen is None:
            problems.append(f"grant {grant.pk} ({grant.tool_name}) has no event")
            continue
        expected = {
            "tool": grant.tool_name, "args_hash": grant.args_hash, "by": grant.granted_by_name,
            "source_approval_id": grant.source_approval_id, "revoked": grant.revoked_at is not None,
            "revoked_by": grant.revoked_by_name or None,
        }
        for name, value in expected.items():
            if seen.get(name) != value:
                problems.append(f"grant {grant.pk} {name}: events say {seen.get(name)!r}, the row says {value!r}")
    return problems


def replay_levers(run_id: int) -> dict:
    """Operators' levers as the live page shows them, from the "lever" events alone: the notes
    (who, text), who paused the run, whether a pause or a stop waits, and who asked for it."""
    state = {"notes": [], "pause_requested": False, "paused_by": "", "stop_requested_by": ""}
    for data in RunEvent.objects.filter(run_id=run_id, kind="lever").order_by("seq").values_list("data", flat=True):
        lever = data["lever"]
        if lever == "message":
            state["notes"].append((data["by"], data["text"]))
        elif lever == "pause":
            state["pause_requested"], state["paused_by"] = True, data["by"]
        elif lever == "paused":
            state["pause_requested"], state["paused_by"] = False, data["by"]
        elif lever == "resume":
            state["pause_requested"] = False
        elif lever == "stop":
            state["stop_requested_by"] = data["by"]
    return state


def lever_mismatches(run_id: int) -> list[str]:
    """Where the replayed levers differ from the rows: every note has its event, and the run's
    pause and stop requests (with who asked) are the events' (its paused status is the run events')."""
    replayed = replay_levers(run_id)
    row = Run.objects.get(pk=run_id)
    expected = {
        "notes": list(OperatorMessage.objects.filter(run_id=run_id).order_by("created_at", "pk")
                      .values_list("author_name", "text")),
        "pause_requested": row.pause_requested,
        "paused_by": row.paused_by_name,
        "stop_requested_by": row.stop_requested_by_name,
    }
    return [f"run {run_id} levers {name}: events say {replayed[name]!r}, the rows say {value!r}"
            for name, value in expected.items() if replayed[name] != value]


def fork_mismatches(run_id: int) -> list[str]:
    """A fork's timeline must say where it came from (one "fork" event naming its parent and
    step) and show every copied step as its rows hold it, calls included."""
    row = Run.objects.get(pk=run_id)
    if row.forked_at_step is None:
        return []
    problems = []
    events = list(RunEvent.objects.filter(run_id=run_id, kind__in=("fork", "step")).order_by("seq").values_list("kind", "data"))
    forks = [data for kind, data in events if kind == "fork"]
    if len(forks) != 1:
        problems.append(f"fork {run_id}: {len(forks)} fork events, expected one")
    elif (forks[0].get("step"), row.forked_from_id is None or forks[0].get("parent") == row.forked_from_id) != (
        row.forked_at_step, True
    ):
        problems.append(f"fork {run_id}: the fork event says {forks[0]!r}, the row says parent "
                        f"{row.forked_from_id} step {row.forked_at_step}")
    shown = {data["index"]: data for kind, data in events if kind == "step"}
    calls: dict[int, list[int]] = {}
    for step_id, pk in ToolCall.objects.filter(run_id=run_id).order_by("step_id", "index").values_list("step_id", "pk"):
        calls.setdefault(step_id, []).append(pk)
    for step in Step.objects.filter(run_id=run_id, index__lte=row.forked_at_step):
        seen = shown.get(step.index)
        if seen is None:
            problems.append(f"fork {run_id}: copied step {step.index} has no event")
            continue
        expected = {
            "model": step.model, "finish_reason": step.finish_reason, "tokens_in": step.tokens_in,
            "tokens_out": step.tokens_out, "cost_usd": step.cost_usd, "content": step.message.get("content") or "",
            "calls": calls.get(step.pk, []),
        }
        got = {**seen, "calls": [c["pk"] for c in seen.get("calls", [])]}
        for name, value in expected.items():
            if got.get(name) != value:
                problems.append(f"fork {run_id} step {step.index} {name}: events say {got.get(name)!r}, the row says {value!r}")
    return problems
