"""The gate a destructive call passes on the loop's side: request, automatic policy, asking
again after a crash, and closing what is still open when a run ends.

The loop calls `approval_gate` for each call that may not simply run, and `approvals_close` when
a run ends; people decide through `decide.approval_decide` (a signed-in person, always); the periodic
sweep calls `decide.approvals_expire`, which can only expire (the system's only decision is a rejection).
An approval nobody decided ends in one place, `approval_end_undecided` (expired, or closed with its run).
Decisions are append-only: every change is one UPDATE from pending (never over a decision), a
decision keeps its decider's name, and a call asked about again gets a new approval and points at it.
"""
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from runs.engine import hooks
from runs.engine.storage.events import approvals_changed, event_record
from runs.engine.storage.snapshots import approval_brief
from runs.models import Approval, CallEvidence, ToolCall
from runs.notifications.webhooks import approval_pending_data, notify
from runs.supervision.approvals.expiry_warnings import warning_due_at
from runs.supervision.chat.messages import chat_request
from runs.supervision.evidence.state_checks import state_check_soon
from runs.supervision.rules.route_facts import CallRoutes, call_routes
from runs.supervision.rules.shadow import shadow_decisions_record

EXPIRED = "approval expired"
CRASH_NOTE = (
    "Outcome unknown: interrupted by a crash while running, it may already have taken effect. "
    "Check the real state first: approving runs it again."
)

# What the loop does with a call once its gate is passed (the engine's words: runs/engine/hooks.py).
RUN, WAIT, DONE = hooks.RUN, hooks.WAIT, hooks.DONE


def closed_reason(run_ended: str) -> str:
    """Why an approval nobody decided was closed: how the run ended, and by whom when a person
    ended it ("Cancelled by alice.")."""
    return f"closed: the run ended ({run_ended})"


# --- the loop's side ------------------------------------------------------------------------------


def approval_gate(*, call: ToolCall, tool, config: dict, recorder) -> str:
    """Bring one open call of a run (`recorder.run`) to RUN, WAIT (for a person) or DONE.

    `tool` is the call's tool as it is now (None when disabled or removed while the run waited).
    """
    if tool is None:
        if call.may_have_taken_effect:
            error = f"outcome unknown: interrupted by a crash, it may have taken effect; tool {call.tool_name!r} is no longer available"
            recorder.call_update(call, ToolCall.Status.UNKNOWN, payload={"ok": False, "error": error})
            return DONE
        recorder.call_update(
            call, ToolCall.Status.FAILED, payload={"ok": False, "error": f"tool {call.tool_name!r} is no longer available"}
        )
        return DONE
    status = call.status
    if status == ToolCall.Status.STARTED:
        # Started before a crash, with no result recorded: its effect may or may not exist.
        if tool.idempotent:
            return RUN
        return approval_request(
            call=call, tool=tool, config=config, recorder=recorder, note=CRASH_NOTE, outcome_unknown=True
        )
    if status == ToolCall.Status.PENDING:
        return approval_request(call=call, tool=tool, config=config, recorder=recorder) if tool.destructive else RUN
    if status == ToolCall.Status.APPROVED:
        return RUN
    if status != ToolCall.Status.AWAITING_APPROVAL:
        return DONE
    approval = call.approval
    if approval.status == Approval.Status.PENDING and approval.expires_at and approval.expires_at <= timezone.now():
        approval = (approval_end_undecided(approval=approval, reason=EXPIRED, recorder=recorder)
                    or Approval.objects.get(pk=approval.pk))
        call.approval = approval
    return _apply(call, approval, recorder)


def approval_request(
    *, call: ToolCall, tool, config: dict, recorder, note: str = "", outcome_unknown: bool = False
) -> str:
    """Ask for a decision on `call`, or take it from the run's policy, a rule or a grant
    (`who_decides.route_call` in runs/supervision/rules/ says which; this gathers the facts and writes its route).

    A call whose outcome is unknown (it may have taken effect) always waits for a person,
    whatever the policy: approving it again is a decision about a possible second effect.

    Every approval, automatic ones too, gets its evidence (CallEvidence) in the same transaction:
    a person's card shows it, and twins and backtests read it later."""
    run = recorder.run
    routes = call_routes(call=call, tool=tool, run=run, config=config, outcome_unknown=outcome_unknown)
    route, unseen, shadowed = routes.route, routes.unseen, routes.shadowed
    timeout = config.get("approval_timeout_seconds")
    now = timezone.now()
    approval = Approval(
        tool_call=call, run=run, note=" ".join(n for n in (note, route.note) if n),
        expires_at=now + timedelta(seconds=timeout) if timeout else None,
        required_approvals=route.required_approvals, group_id=route.group_id, grant_id=route.grant_id,
        quorum_groups=list(route.quorum_group_ids),
        unseen_ids=list(unseen),
    )
    if route.rule is not None:
        approval.rule_id, approval.rule_version, approval.rule_name = route.rule.id, route.rule.version, route.rule.name
    if route.automatic:
        approval.status, approval.automatic, approval.reason = route.status, True, route.reason
    else:
        escalate_after = (route.rule and route.rule.escalate_after_seconds) or config.get("escalate_after_seconds")
        approval.escalate_at = now + timedelta(seconds=escalate_after) if escalate_after else None
        warning = (route.rule and route.rule.expiry_warning_seconds) or config.get("expiry_warning_seconds")
        approval.warn_at = warning_due_at(requested_at=now, expires_at=approval.expires_at, warning_seconds=warning)
    if route.automatic:
        # Decided in the moment it was asked: a wait of 0. The INSERT stamps requested_at itself
        # (auto_now_add, later than `now`), so the decision takes that time, not an earlier one,
        # in the same transaction: no reader sees it decided without a time.
        with transaction.atomic():
            approval.save()
            approval.decided_at = approval.requested_at
            approval.save(update_fields=["decided_at"])
            _evidence_save(approval, routes)
    else:
        with transaction.atomic():
            approval.save()
            _evidence_save(approval, routes)
        state_check_soon(approval)
    shadow_decisions_record(approval, shadowed)
    call.approval = approval
    if approval.status != Approval.Status.PENDING:
        return _apply(call, approval, recorder)
    recorder.call_update(call, ToolCall.Status.AWAITING_APPROVAL, approval=approval)
    chat_request(approval)
    approvals_changed(run_id=run.pk)
    notify("approval.pending", lambda: approval_pending_data(approval), agent_id=run.agent_id)
    return WAIT


def _evidence_save(approval: Approval, routes: CallRoutes) -> None:
    CallEvidence.objects.create(
        approval=approval, project_id=routes.project_id, tool_name=approval.tool_call.tool_name,
        identity=routes.identity, data=routes.evidence.data, outside_paths=routes.evidence.outside_paths,
    )


def _apply(call: ToolCall, approval: Approval, recorder) -> str:
    """What a call becomes under its approval's current status."""
    if approval.status == Approval.Status.PENDING:
        return WAIT
    if approval.status == Approval.Status.APPROVED:
        edited = {}
        if approval.edited_arguments:
            # The call runs with what the operator approved; a later approval without edits (asked
            # again after a crash) keeps these, so a resumed call runs what a person approved.
            edited = {"executed_arguments": approval.edited_arguments, "executed_args_hash": approval.edited_args_hash}
        recorder.call_update(call, ToolCall.Status.APPROVED, approval=approval, **edited)
        return RUN
    reason = approval.reason or (EXPIRED if approval.status == Approval.Status.EXPIRED else "no reason given")
    if call.may_have_taken_effect:
        # Started before a crash and not run again: "rejected" would tell the model nothing happened.
        error = f"outcome unknown: interrupted by a crash, it may have taken effect; not run again ({reason})"
        recorder.call_update(call, ToolCall.Status.UNKNOWN, payload={"ok": False, "error": error}, approval=approval)
        return DONE
    recorder.call_update(call, ToolCall.Status.REJECTED, payload=rejection_payload(approval, reason), approval=approval)
    return DONE


def approvals_close(*, recorder, reason: str, detail: str = "") -> None:
    """A run that ends: its pending approvals are closed (the run ended, nobody decided, and it
    was no timeout), each with its event; `detail` says how it ended and who ended it."""
    if not recorder.approvals_possible:
        return  # its driver sent no call through the gate: the run has no approval
    pending = Approval.objects.filter(run=recorder.run, status=Approval.Status.PENDING)
    for approval in pending:
        approval_end_undecided(approval=approval, reason=closed_reason(detail or reason), recorder=recorder,
                               status=Approval.Status.CLOSED)


def approval_end_undecided(*, approval: Approval, reason: str, recorder=None,
                           status: str = Approval.Status.EXPIRED) -> Approval | None:
    """End a pending approval that nobody decided: expired (its time ran out), or closed (`status`
    CLOSED: its run ended), with `reason`, in one UPDATE from pending, and its "approval" event
    (through `recorder`, the run's driver, when there is one). None when a decision landed first."""
    now = timezone.now()
    changed = Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(
        status=status, decided_at=now, reason=reason
    )
    if not changed:
        return None
    approval.status, approval.decided_at, approval.reason = status, now, reason
    data = {"call_pk": approval.tool_call_id, **approval_brief(approval)}
    if recorder is not None:
        recorder.event("approval", data)
    else:
        event_record(run_id=approval.run_id, kind="approval", data=data)
    approvals_changed(run_id=approval.run_id)
    return approval


def rejection_payload(approval, reason: str) -> dict:
    """The result the model reads for a rejected call: who rejected it and why, and what to do
    instead when the person said so."""
    if approval.automatic and approval.rule_name:
        error = f"rejected by rule {approval.rule_name!r} v{approval.rule_version}: {reason}"
    else:
        error = f"rejected by operator: {reason}"
    payload = {"ok": False, "error": error}
    if approval.guidance:
        payload["guidance"] = approval.guidance
    return payload
