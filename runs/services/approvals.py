"""The approval lifecycle of destructive calls: request, automatic policy, expiry, decision,
asking again after a crash, and closing what is still open when a run ends.

The loop calls `approval_gate` for each call that may not simply run, and `approvals_close` when
a run ends; people decide through `approval_decide` (a signed-in person, always); the periodic sweep
calls `approvals_expire`, which can only expire (the system's only decision is a rejection).
Decisions are append-only: every change is one UPDATE from pending (never over a decision), a
decision keeps its decider's name, and a call asked about again gets a new approval and points at it.
"""
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, Case, CharField, DateTimeField, F, Q, TextField, Value, When
from django.utils import timezone

from runs.engine.db import write_transaction
from runs.engine.dispatch import run_dispatch
from runs.engine.events import approvals_changed, event_record
from runs.engine.snapshots import approval_brief
from runs.models import Approval, ApprovalVote, Run, ToolCall
from runs.services.approval_checks import (
    ALREADY_VOTED,
    EditRefused,
    NotAllowed,
    approved_arguments,
    check_decider,
    check_grant,
    check_vote,
    edit_of,
)
from runs.services.approval_routes import call_route, rejection_payload
from runs.services.grants import grant_create
from runs.services.notifications import approval_pending_data, notify
from toolsapp.models import Tool

EXPIRED = "approval expired"
CRASH_NOTE = (
    "Outcome unknown: interrupted by a crash while running, it may already have taken effect. "
    "Check the real state first: approving runs it again."
)

# What the loop does with a call once its gate is passed.
RUN, WAIT, DONE = "run", "wait", "done"


class AlreadyDecided(Exception):
    def __init__(self, approval: Approval):
        self.approval = approval
        who = approval.decided_by_name or ("a policy" if approval.automatic else "the system")
        super().__init__(f"already {approval.status} by {who} at {approval.decided_at:%Y-%m-%d %H:%M:%S}")


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
        approval = _expire(approval, EXPIRED, recorder=recorder) or Approval.objects.get(pk=approval.pk)
        call.approval = approval
    return _apply(call, approval, recorder)


def approval_request(
    *, call: ToolCall, tool, config: dict, recorder, note: str = "", outcome_unknown: bool = False
) -> str:
    """Ask for a decision on `call`, or take it from the run's policy, a rule or a grant
    (`approval_routes.route_call` says which; this gathers the facts and writes its route).

    A call whose outcome is unknown (it may have taken effect) always waits for a person,
    whatever the policy: approving it again is a decision about a possible second effect."""
    run = recorder.run
    route, unseen = call_route(call=call, tool=tool, run=run, config=config, outcome_unknown=outcome_unknown)
    timeout = config.get("approval_timeout_seconds")
    now = timezone.now()
    approval = Approval(
        tool_call=call, run=run, note=" ".join(n for n in (note, route.note) if n),
        expires_at=now + timedelta(seconds=timeout) if timeout else None,
        required_approvals=route.required_approvals, group_id=route.group_id, grant_id=route.grant_id,
        unseen_ids=list(unseen),
    )
    if route.rule is not None:
        approval.rule_id, approval.rule_version, approval.rule_name = route.rule.id, route.rule.version, route.rule.name
    if route.automatic:
        approval.status, approval.automatic, approval.decided_at, approval.reason = route.status, True, now, route.reason
    else:
        escalate_after = (route.rule and route.rule.escalate_after_seconds) or config.get("escalate_after_seconds")
        approval.escalate_at = now + timedelta(seconds=escalate_after) if escalate_after else None
    approval.save()
    call.approval = approval
    if approval.status != Approval.Status.PENDING:
        return _apply(call, approval, recorder)
    recorder.call_update(call, ToolCall.Status.AWAITING_APPROVAL, approval=approval)
    approvals_changed(run_id=run.pk)
    notify("approval.pending", lambda: approval_pending_data(approval))
    return WAIT


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
    pending = Approval.objects.filter(run=recorder.run, status=Approval.Status.PENDING)
    for approval in pending:
        _expire(approval, closed_reason(detail or reason), recorder=recorder, status=Approval.Status.CLOSED)


def _expire(approval: Approval, reason: str, *, recorder=None, status: str = Approval.Status.EXPIRED) -> Approval | None:
    """Expire (or close, `status`) a pending approval in one statement; None when a decision
    landed first."""
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


# --- people's side ---------------------------------------------------------------------------------


def approval_decide(
    *, approval_id: int, user, approve: bool, reason: str = "", arguments: str | None = None, guidance: str = "",
    grant: str = "", args_hash: str = "",
) -> Approval:
    """Record one person's decision, only over a pending approval, in one conditional UPDATE.

    Of two concurrent deciders exactly one changes the row; the other's UPDATE matches nothing
    (PostgreSQL re-checks `status` once the winner commits) and is told who won. A decision is
    never written over: the statement cannot touch an approval that is no longer pending.
    An overdue approval is recorded as expired, whoever asks.

    A call that needs two people: each approval adds a vote and counts in the same UPDATE
    (`approvals_given + 1`, computed by the database from the row as it is when the lock is
    granted), which decides only when the count reaches `required_approvals`; the approval is
    returned still pending after the first ("1 of 2"). One rejection decides. A person's second
    vote meets the votes' unique key (NotAllowed), even when both arrive at once.

    `arguments`: the operator's edit (JSON text; EditRefused when the tool forbids edits or its
    schema refuses them). Every vote is for one version of the arguments: an edit replaces the
    version and starts the count again at the editor's vote, so a call that needs two runs edited
    arguments only once two people approved those very arguments; until then the edit waits on
    the approval, proposed. `args_hash`: the arguments the person approves as their page showed
    them (required when an edit is proposed, so nobody approves an edit they never saw).
    `guidance` goes with a rejection; `grant` ("identical" or "tool") with an approval, given in
    the same transaction. Raises Approval.DoesNotExist, AlreadyDecided, NotAllowed, EditRefused.

    `user` is the person deciding, always: a decision without one would skip the group and
    two-person checks, so it is refused (the system only expires, through `approval_expire`).
    """
    if user is None or not user.is_authenticated:
        raise NotAllowed("A decision needs a signed-in person.")
    with write_transaction():
        approval = Approval.objects.select_related("run", "tool_call").get(pk=approval_id)
        return _decide_read(
            approval, person=user, approve=approve, reason=reason, arguments=arguments, guidance=guidance, grant=grant,
            args_hash=args_hash,
        )


def _decide_read(
    approval: Approval, *, person, approve: bool, reason: str, arguments, guidance: str, grant: str, args_hash: str = ""
) -> Approval:
    """`approval_decide` on the approval as read, inside its write transaction. The read can be
    stale: on PostgreSQL reading takes no lock, so another decision may commit between the read
    and the UPDATE; only the UPDATE's own conditions (from pending) keep that decision."""
    approval_id = approval.pk
    if approval.status != Approval.Status.PENDING:
        raise AlreadyDecided(approval)
    paused = approval.run.status == Run.Status.PAUSED  # decided meanwhile: it waits for its resume
    now = timezone.now()
    overdue = approval.expires_at is not None and approval.expires_at <= now
    # The vote counts for the arguments as read: an edit that landed since voids it (on PostgreSQL
    # the UPDATE re-reads the row once the editor commits, and then matches nothing).
    only_if = Q(edited_args_hash=approval.edited_args_hash) if approve and not overdue else Q()
    restart, target = False, None
    if overdue:
        fields = {"status": Approval.Status.EXPIRED, "reason": EXPIRED, "decided_at": now}
        grant = ""
    else:
        tool = Tool.objects.filter(name=approval.tool_call.tool_name).first()
        check_decider(approval=approval, user=person, approve=approve)
        check_grant(approval=approval, tool=tool, approve=approve, scope=grant)
        edit = edit_of(approval=approval, tool=tool, text=arguments, approve=approve)
        if approve:
            target = approved_arguments(approval=approval, edit=edit, text=arguments, seen_hash=args_hash)
            restart = target.hash != (approval.edited_args_hash or approval.tool_call.args_hash)
        check_vote(approval=approval, user=person, approve=approve, restart=restart)
        fields = _decision_fields(approve=approve, person=person, reason=reason, guidance=guidance, now=now, restart=restart)
        if restart:  # the model's arguments sent back clear the edit
            fields.update(edited_arguments=target.text, edited_args_hash=target.hash if target.text else "")
        if approve and approval.required_approvals > 1 and not restart:
            _vote(approval=approval, user=person, reason=reason, args_hash=target.hash)
    changed = Approval.objects.filter(only_if, pk=approval_id, status=Approval.Status.PENDING).update(**fields)
    approval = Approval.objects.select_related("tool_call").get(pk=approval_id)
    if not changed:
        if approval.status == Approval.Status.PENDING:  # an edit landed since the read
            raise EditRefused("The arguments were edited meanwhile: look at the call again.")
        raise AlreadyDecided(approval)  # and this transaction's vote, if any, is rolled back
    if restart and approval.required_approvals > 1:
        # After the UPDATE, which waited for any vote committing meanwhile: those are void too.
        ApprovalVote.objects.filter(approval=approval, superseded_at__isnull=True).update(superseded_at=now)
        _vote(approval=approval, user=person, reason=reason, args_hash=target.hash)
    event_record(run_id=approval.run_id, kind="approval", data={"call_pk": approval.tool_call_id, **approval_brief(approval)})
    if grant and approval.status == Approval.Status.APPROVED:
        grant_create(approval=approval, user=person, scope=grant)
    approvals_changed(run_id=approval.run_id)
    if approval.status == Approval.Status.PENDING:
        return approval  # one of several approvals: the run keeps waiting
    if not paused and not Approval.objects.filter(run_id=approval.run_id, status=Approval.Status.PENDING).exists():
        # The last open decision of this run: hand it back to a worker.
        run_dispatch(run_id=approval.run_id)
    return approval


def _decision_fields(*, approve: bool, person, reason: str, guidance: str, now, restart: bool = False) -> dict:
    """The columns the deciding UPDATE sets. An approval counts one more; it decides (status,
    decider, reason) only when the count reaches what the call needs, which the database
    computes from the row it locked (in an UPDATE every column reads the row before it).
    An edit (`restart`) sets the count to its one vote: it decides only a call that needs one."""
    name = person.get_username()
    if not approve:
        return {
            "status": Approval.Status.REJECTED, "decided_at": now, "decided_by": person, "decided_by_name": name,
            "reason": reason.strip() or "no reason given", "guidance": guidance.strip(),
        }
    deciding = Q(required_approvals__lte=1) if restart else Q(approvals_given__gte=F("required_approvals") - 1)

    def once_decided(value, meanwhile, field):
        return Case(When(deciding, then=Value(value)), default=Value(meanwhile), output_field=field)

    return {
        "approvals_given": Value(1) if restart else F("approvals_given") + 1,
        "status": once_decided(Approval.Status.APPROVED, Approval.Status.PENDING, CharField()),
        "decided_at": once_decided(now, None, DateTimeField()),
        "decided_by": once_decided(person.pk, None, BigIntegerField()),
        "decided_by_name": once_decided(name, "", CharField()),
        "reason": once_decided(reason.strip(), "", TextField()),
    }


def _vote(*, approval: Approval, user, reason: str, args_hash: str) -> None:
    """One person's approval of a call that needs several. The unique key on (approval, person)
    refuses a second vote, also one sent at the same moment (PostgreSQL's insert waits for the
    first to commit, then fails)."""
    try:
        with transaction.atomic():
            ApprovalVote.objects.create(
                approval=approval, user=user, user_name=user.get_username(), reason=reason.strip(), args_hash=args_hash
            )
    except IntegrityError:
        raise NotAllowed(ALREADY_VOTED) from None


def approval_expire(*, approval_id: int) -> Approval | None:
    """The system's decision on an overdue approval: expired (a rejection; it can approve nothing),
    and its run handed back to a worker when that was its last open decision. None when the
    approval was decided first or is not overdue."""
    with write_transaction():
        approval = Approval.objects.select_related("run").get(pk=approval_id)
        overdue = approval.expires_at is not None and approval.expires_at <= timezone.now()
        if approval.status != Approval.Status.PENDING or not overdue:
            return None
        expired = _expire(approval, EXPIRED)  # from pending only: a decision that landed stands
        if expired is None:
            return None
        last = not Approval.objects.filter(run_id=approval.run_id, status=Approval.Status.PENDING).exists()
        if last and approval.run.status != Run.Status.PAUSED:  # a paused run waits for its resume
            run_dispatch(run_id=approval.run_id)
    return expired


def approvals_expire() -> int:
    """Expire overdue approvals (expiry counts as a rejection) and resume their runs."""
    now = timezone.now()
    overdue = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now).values_list("pk", flat=True)
    return sum(approval_expire(approval_id=approval_id) is not None for approval_id in overdue)
