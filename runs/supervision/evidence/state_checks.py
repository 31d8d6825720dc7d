"""State checks: a read-only tool a destructive tool names (Tool.state_check), run before a person
decides, so the card shows the world as it is now ("ORD-1001: cancelled, checked 4 s ago").
A check that fails says so and never blocks the decision.

It runs in a task (runs.tasks.state_check_run) once the call reaches the queue, and again when a
card is opened whose answer is older than STALE_AFTER: never in the request that shows the card.
The answer goes on the call's CallEvidence row (`state`, `state_checked_at`):
{"tool", "ok", "arguments", "summary", "answer"} or {"tool", "ok": false, "error"}; until the first
answer, {"checking": true}. A card that asks again shows the last answer with "checking" beside it."""
import hashlib
import json
import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hosting.text import loads as bounded_loads
from runs.engine.dispatch import task_send
from runs.engine.storage.events import approvals_changed
from runs.engine.tools.execution import check_call, execute_calls
from runs.models import Approval, CallEvidence
from runs.supervision.chat.messages import chat_evidence_refresh
from toolsapp.argument_paths import arguments_taken
from toolsapp.executors.base import ToolContext
from toolsapp.models import Tool
from toolsapp.sensitive import masked, redact, sensitive_values

log = logging.getLogger("runs.supervision.state_checks")  # its name from before the move: operators filter on it

CHECK_TASK = "runs.tasks.state_check_run"
STALE_AFTER = timedelta(seconds=60)  # an answer older than this is asked again when its card is opened
ANSWER_CHARS = 4000
SUMMARY_CHARS = 120


# --- asking ---------------------------------------------------------------------------------------


def state_check_soon(approval) -> None:
    """Once the transaction that asks about the call commits, run its tool's state check (if any).

    Nothing is read or written in that transaction: the loop's commit stays as it was. A call
    without a CallEvidence row gets no check (none is made here)."""
    if approval.status != Approval.Status.PENDING:
        return
    approval_id, tool_name = approval.pk, approval.tool_call.tool_name
    transaction.on_commit(lambda: _ask(approval_id, tool_name))


def _ask(approval_id: int, tool_name: str) -> None:
    try:
        if not Tool.objects.filter(name=tool_name).values_list("state_check", flat=True).first():
            return  # its tool names no check
        # "checking" until it answers (the card says so); the task replaces the state with its answer.
        if CallEvidence.objects.filter(approval_id=approval_id).update(state_requested_at=timezone.now(),
                                                                      state={"checking": True}):
            _send([approval_id])
    except Exception:  # the call waits for its person all the same; an opened card asks again
        log.warning(json.dumps({"event": "state_check_not_asked", "approval": approval_id}), exc_info=True)


def _send(approval_ids: list[int]) -> None:
    for approval_id in approval_ids:
        try:
            task_send(CHECK_TASK, approval_id)
        except Exception as exc:  # the broker is away: the mark ages, and an opened card asks again
            log.warning(json.dumps({"event": "state_check_not_queued", "approval": approval_id, "error": str(exc)}))


def state_refresh_stale(items: list) -> None:
    """Cards being opened (their `state` and `state_checked_at` read with them): the pending ones
    whose check answered longer than STALE_AFTER ago, or was asked that long ago and never answered
    (a lost task), are asked again unless someone asked within STALE_AFTER: one UPDATE, and the
    tasks sent after the commit, never waited for here. No query when none is stale, or when all
    that are were asked within STALE_AFTER (their `state_requested_at`, read with the cards)."""
    old = timezone.now() - STALE_AFTER
    due = [
        item for item in items
        if item.approval.status == Approval.Status.PENDING and item.state and (
            item.state_checked_at < old if item.state_checked_at is not None
            else item.state.get("checking") and item.approval.requested_at < old)
    ]
    for item in due:  # asked now, or by someone else within the minute: an answer is on its way
        item.state = {**item.state, "checking": True}
    # Those asked within the minute, as read with the cards, are not asked again here (no UPDATE
    # at all when a worker is slow to answer and the page is opened again and again).
    due = [item for item in due if getattr(item, "state_requested_at", None) is None or item.state_requested_at <= old]
    if not due:
        return
    now, ids = timezone.now(), [item.approval.pk for item in due]
    not_asked_lately = Q(state_requested_at__isnull=True) | Q(state_requested_at__lte=old)
    asked = CallEvidence.objects.filter(not_asked_lately, approval_id__in=ids).update(state_requested_at=now)
    if not asked:
        return
    if asked < len(ids):  # those asked by someone else within the minute are not asked twice
        ids = list(CallEvidence.objects.filter(approval_id__in=ids, state_requested_at=now)
                   .values_list("approval_id", flat=True))
    transaction.on_commit(lambda: _send(ids))


# --- running --------------------------------------------------------------------------------------


def state_check_run(*, approval_id: int) -> None:
    """The task: run the check of a pending call and store its answer; then every open queue
    refreshes. A decided call's check is not run (the state it would show is the decision's)."""
    evidence = (CallEvidence.objects.select_related("approval__tool_call", "approval__run__agent")
                .filter(approval_id=approval_id).first())
    if evidence is None:
        return
    approval = evidence.approval
    if approval.status != Approval.Status.PENDING:
        never_answered = {"state": {}} if "tool" not in (evidence.state or {}) else {}  # no "checking" left behind
        CallEvidence.objects.filter(approval_id=approval_id).update(state_requested_at=None, **never_answered)
        return
    state = state_check(approval)
    CallEvidence.objects.filter(approval_id=approval_id).update(
        state=state or {}, state_checked_at=timezone.now() if state else None, state_requested_at=None,
    )
    approvals_changed(run_id=approval.run_id)
    if state:
        chat_evidence_refresh(approval_id=approval_id)  # its chat message may have been posted before this answer


def state_check(approval) -> dict | None:
    """The answer of the call's state check now (None: its tool names none). The check takes its
    arguments from what approving would run: a proposed edit when there is one, else the call's."""
    call, run = approval.tool_call, approval.run
    tool = Tool.objects.filter(name=call.tool_name).first()
    spec = tool.state_check if tool is not None else None
    if not spec:
        return None
    name = spec.get("tool") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name.strip():
        return _failed("", f"{call.tool_name}'s state check names no tool")
    name = name.strip()
    check = Tool.objects.filter(name=name).first()
    refusal = _check_refusal(name, check, run)
    if refusal:
        return _failed(name, refusal)
    try:
        arguments = bounded_loads(approval.edited_arguments or call.executed_arguments or call.arguments or "{}")
        taken, missing = arguments_taken(spec.get("arguments") or {}, arguments)
    except (ValueError, TypeError, AttributeError) as exc:
        return _failed(name, f"its arguments cannot be taken from the call ({exc})")
    if missing:
        return _failed(name, f"the call has no value at {', '.join(missing)}")
    hidden = (*tool.sensitive_fields, *check.sensitive_fields)
    secrets = sensitive_values(arguments, tool.sensitive_fields)
    shown = masked(taken, hidden)
    values, error = check_call(tool_name=name, raw_arguments=json.dumps(taken), tools={name: check})
    if error:
        return _failed(name, redact(error, secrets), shown)
    key = hashlib.sha256(f"run:{run.pk}:approval:{approval.pk}:state_check".encode()).hexdigest()[:40]
    context = ToolContext(run_id=run.pk, call_id=f"state_check_{approval.pk}", idempotency_key=key, customer=run.customer)
    _, payload, _ = next(execute_calls([(check, values, context)], parallel=False))
    if not payload["ok"]:
        return _failed(name, redact(str(payload.get("error") or "the check failed"), secrets), shown)
    answer = masked(payload.get("result"), hidden)
    text = redact(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, indent=2), secrets)
    if len(text) > ANSWER_CHARS:
        text = text[:ANSWER_CHARS] + "…"
    return {"tool": name, "ok": True, "arguments": shown, "summary": redact(state_summary(answer, shown), secrets),
            "answer": text}


def _check_refusal(name: str, check: Tool | None, run) -> str:
    """Why `check` may not run as a state check of a call of `run`; "" when it may."""
    if check is None:
        return f"there is no tool named {name}"
    if not check.enabled:
        return f"{name} is disabled"
    if check.destructive:
        return f"refused: {name} is destructive, and a state check may only read"
    project_id = run.agent.project_id if run.agent_id else None
    if check.project_id is not None and check.project_id != project_id:
        return f"refused: {name} is another project's tool"
    return ""


def _failed(name: str, error: str, arguments: dict | None = None) -> dict:
    state = {"tool": name, "ok": False, "error": error[:ANSWER_CHARS]}
    if arguments is not None:
        state["arguments"] = arguments
    return state


def state_summary(answer: Any, arguments: dict) -> str:
    """A few words of the answer: "ORD-1001: cancelled" for an object with a status (the values
    the check was asked about, then the status), else its first SUMMARY_CHARS characters."""
    status = answer.get("status") if isinstance(answer, dict) else None
    if status is not None and not isinstance(status, (dict, list)):
        asked = ", ".join(_plain(value) for value in arguments.values() if value not in (None, ""))
        return f"{asked}: {_plain(status)}"[:SUMMARY_CHARS] if asked else _plain(status)[:SUMMARY_CHARS]
    text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    return text[:SUMMARY_CHARS] + ("…" if len(text) > SUMMARY_CHARS else "")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
