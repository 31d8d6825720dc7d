"""Operators' decisions on destructive calls."""
from django.db import transaction
from django.utils import timezone

from runs.models import Approval
from runs.services.dispatch import run_dispatch
from runs.services.events import approvals_changed, event_record
from runs.snapshots import approval_brief


class AlreadyDecided(Exception):
    def __init__(self, approval: Approval):
        self.approval = approval
        who = approval.decided_by.get_username() if approval.decided_by else "a policy"
        super().__init__(f"already {approval.status} by {who} at {approval.decided_at:%Y-%m-%d %H:%M:%S}")


def approval_decide(*, approval_id: int, user, approve: bool, reason: str = "") -> Approval:
    """Record one decision; exactly one of two concurrent deciders wins (row lock + status check)."""
    with transaction.atomic():
        approval = Approval.objects.select_for_update().get(pk=approval_id)
        if approval.status != Approval.Status.PENDING:
            # Read again with the decider: after waiting on the lock, the row is re-read but a
            # joined user would not be.
            raise AlreadyDecided(Approval.objects.select_related("decided_by").get(pk=approval_id))
        if approval.expires_at and approval.expires_at <= timezone.now():
            approval.status = Approval.Status.EXPIRED
            approval.reason = "approval expired"
        else:
            approval.status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
            approval.reason = reason.strip() or ("" if approve else "no reason given")
            approval.decided_by = user if user is not None and user.is_authenticated else None
        approval.decided_at = timezone.now()
        approval.save()
        event_record(run_id=approval.run_id, kind="approval", data={"call_pk": approval.tool_call_id, **approval_brief(approval)})
        approvals_changed(run_id=approval.run_id)
        if not Approval.objects.filter(run_id=approval.run_id, status=Approval.Status.PENDING).exists():
            # The last open decision of this run: hand it back to a worker.
            run_dispatch(run_id=approval.run_id)
    return approval


def approvals_expire() -> int:
    """Expire overdue approvals (expiry counts as a rejection) and resume their runs."""
    now = timezone.now()
    count = 0
    for approval_id in Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now).values_list("pk", flat=True):
        try:
            approval_decide(approval_id=approval_id, user=None, approve=False, reason="approval expired")
            count += 1
        except AlreadyDecided:
            pass
    return count



