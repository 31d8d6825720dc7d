"""Approvals as supervision routes them: parked calls that need two people or a named group.

The loop sets `required_approvals` and `group` when it asks (from a rule or a critical tool);
these helpers set them on a parked approval the same way, so the people's side can be tested on
its own."""
from django.contrib.auth.models import Group

from runs.models import Approval, Run
from tests.support.approval_fixtures import pending_approval

CANCEL_TASK = "Cancel order ORD-1001"
EDITED = '{"order_id": "ORD-1002", "reason": "The customer meant their second order"}'


def parked(launch, **kwargs) -> Approval:
    """A cancel_order call of a fresh run, waiting for a person."""
    return pending_approval(launch(CANCEL_TASK, approval_policy="ask", **kwargs))


def needing_two(approval: Approval, *, launched_by=None) -> Approval:
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2)
    if launched_by is not None:
        Run.objects.filter(pk=approval.run_id).update(created_by=launched_by)
    approval.refresh_from_db()
    return approval


def for_group(approval: Approval, name: str) -> Group:
    group = Group.objects.create(name=name)
    Approval.objects.filter(pk=approval.pk).update(group=group)
    return group
