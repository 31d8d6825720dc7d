"""The people's side of approvals: one person's decision (approve, reject, edit, grant, a vote of
two), recorded in one conditional UPDATE from pending, and the system's only decision, expiry.

Decisions are append-only: every change is one UPDATE from pending (never over a decision), a
decision keeps its decider's name. The loop's side (request, policy, closing) is in gate.py.
"""

from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, Case, CharField, DateTimeField, F, Q, TextField, Value, When
from django.utils import timezone

from projects.access import may, visible_projects
from runs.engine.dispatch import run_dispatch
from runs.engine.storage.db import write_transaction
from runs.engine.storage.events import approvals_changed, event_record
from runs.engine.storage.snapshots import approval_brief
from runs.models import Approval, ApprovalVote, Run
from runs.roles import PERM_DECIDE
from runs.supervision.approvals.checks import (
    ALREADY_VOTED,
    EditRefused,
    NotAllowed,
    approved_arguments,
    check_decider,
    check_grant,
    check_vote,
    edit_of,
)
from runs.supervision.approvals.gate import EXPIRED, approval_end_undecided
from runs.supervision.approvals.grants import grant_create
from runs.supervision.approvals.quorum import quorum_met, quorum_voters
from runs.supervision.evidence.state_checks import state_check_soon
from runs.supervision.evidence.twins import twins_record_shown
from runs.supervision.quality.nudges import check_nudge
from toolsapp.models import Tool

__all__ = ["AlreadyDecided", "EditRefused", "NotAllowed", "approval_decide", "approval_expire", "approvals_expire"]


class AlreadyDecided(Exception):
    def __init__(self, approval: Approval):
        self.approval = approval
        who = approval.decided_by_name or ("a policy" if approval.automatic else "the system")
        super().__init__(f"already {approval.status} by {who} at {approval.decided_at:%Y-%m-%d %H:%M:%S}")


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
        approval = Approval.objects.select_related("run", "run__agent", "tool_call").get(pk=approval_id)
        _check_project(user, approval.run.agent.project_id)
        return _decide_read(
            approval, person=user, approve=approve, reason=reason, arguments=arguments, guidance=guidance, grant=grant,
            args_hash=args_hash,
        )


def _check_project(user, project_id: int) -> None:
    """A person of some projects only decides their projects' calls, as their role there allows;
    another project's call is as if there were none. (Whether a person with a site role may
    decide at all is the caller's check, as it was before projects.)"""
    visible = visible_projects(user)
    if not visible:
        return  # every project's (None), or no role anywhere: the caller checks the permission
    if project_id not in visible:
        raise Approval.DoesNotExist
    if not may(user, PERM_DECIDE, project_id):
        raise NotAllowed("You may not decide calls of this project: your role there does not decide.")


def _decide_read(
    approval: Approval, *, person, approve: bool, reason: str, arguments, guidance: str, grant: str, args_hash: str = ""
) -> Approval:
    """`approval_decide` on the approval as read, inside its write transaction. The read can be
    stale: on PostgreSQL reading takes no lock, so another decision may commit between the read
    and the UPDATE; only the UPDATE's own conditions (from pending) keep that decision."""
    approval_id = approval.pk
    if approval.quorum_groups and approve:
        # A quorum is decided from the votes themselves (who covers which group), not only from
        # the count the UPDATE computes: its row is locked first, so votes arriving at once are
        # counted one after the other and each sees the ones before it.
        approval = Approval.objects.select_for_update(of=("self",)).select_related("run", "tool_call").get(pk=approval_id)
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
        check_nudge(approval=approval, user=person, approve=approve, reason=reason)  # after quick approvals in a row
        check_grant(approval=approval, tool=tool, approve=approve, scope=grant)
        edit = edit_of(approval=approval, tool=tool, text=arguments, approve=approve)
        if approve:
            target = approved_arguments(approval=approval, edit=edit, text=arguments, seen_hash=args_hash)
            restart = target.hash != (approval.edited_args_hash or approval.tool_call.args_hash)
        check_vote(approval=approval, user=person, approve=approve, restart=restart)
        met = None
        if approve and approval.required_approvals > 1 and not restart:
            _vote(approval=approval, user=person, reason=reason, args_hash=target.hash)
            if approval.quorum_groups:
                voters = quorum_voters(approval_id=approval_id, group_ids=approval.quorum_groups)
                met = quorum_met(required=approval.required_approvals, group_ids=approval.quorum_groups, voters=voters)
        fields = _decision_fields(
            approve=approve, person=person, reason=reason, guidance=guidance, now=now, restart=restart, met=met
        )
        if restart:  # the model's arguments sent back clear the edit
            fields.update(edited_arguments=target.text, edited_args_hash=target.hash if target.text else "")
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
    twins_record_shown(approval)  # the twins this person was shown, kept with the call's evidence
    if grant and approval.status == Approval.Status.APPROVED:
        grant_create(approval=approval, user=person, scope=grant)
    approvals_changed(run_id=approval.run_id)
    if approval.status == Approval.Status.PENDING:
        if restart:
            state_check_soon(approval)  # the state of what approving now would run: the edited arguments
        return approval  # one of several approvals: the run keeps waiting
    if not paused and not Approval.objects.filter(run_id=approval.run_id, status=Approval.Status.PENDING).exists():
        # The last open decision of this run: hand it back to a worker.
        run_dispatch(run_id=approval.run_id)
    return approval


def _decision_fields(
    *, approve: bool, person, reason: str, guidance: str, now, restart: bool = False, met: bool | None = None
) -> dict:
    """The columns the deciding UPDATE sets. An approval counts one more; it decides (status,
    decider, reason) only when the count reaches what the call needs, which the database
    computes from the row it locked (in an UPDATE every column reads the row before it).
    An edit (`restart`) sets the count to its one vote: it decides only a call that needs one.
    A quorum's votes were read under its row's lock: `met` says whether they decide it."""
    name = person.get_username()
    if not approve:
        return {
            "status": Approval.Status.REJECTED, "decided_at": now, "decided_by": person, "decided_by_name": name,
            "reason": reason.strip() or "no reason given", "guidance": guidance.strip(),
        }
    deciding = Q(required_approvals__lte=1) if restart else Q(approvals_given__gte=F("required_approvals") - 1)
    if met is not None:
        deciding = Q(pk__isnull=not met)  # always true or always false

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
        expired = approval_end_undecided(approval=approval, reason=EXPIRED)  # a decision that landed first stands
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
