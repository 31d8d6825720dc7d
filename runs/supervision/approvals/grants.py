"""Grants for one run: a person's standing approval of identical calls (same tool, same arguments
hash) or of every call of one tool, for the rest of the run, until revoked.

A grant is given with an approval (`approval_decide(grant=...)`, in its transaction) and revoked
by anyone who may decide approvals. Both leave a "grant" event on the run's timeline; the row
keeps who gave it, when, and who revoked it when: the audit trail of grants. The loop applies
active grants (runs.supervision.approvals.gate, safeguards first).
"""
from django.utils import timezone

from runs.engine.storage.db import write_transaction
from runs.engine.storage.events import event_record
from runs.engine.storage.snapshots import grant_brief
from runs.models import Approval, RunGrant
from runs.supervision.approvals.checks import IDENTICAL


def grant_create(*, approval: Approval, user, scope: str) -> RunGrant:
    """The grant that goes with `approval` (decided approved by `user`); call inside its transaction.

    An identical grant covers the arguments the person approved: the edited ones when they edited.
    Asking again for a grant the run already has gives that grant back, without a second event."""
    existing = grant_of_approval(approval=approval, scope=scope)
    if existing is not None:
        return existing
    call = approval.tool_call
    grant = RunGrant.objects.create(
        run_id=approval.run_id, tool_name=call.tool_name, args_hash=_scope_hash(approval, scope), source_approval=approval,
        granted_by=user, granted_by_name=user.get_username(),
    )
    event_record(run_id=grant.run_id, kind="grant", data=grant_brief(grant))
    return grant


def grant_of_approval(*, approval: Approval, scope: str) -> RunGrant | None:
    """The run's active grant of `scope` covering `approval`'s call, if there is one."""
    return RunGrant.objects.filter(
        run_id=approval.run_id, tool_name=approval.tool_call.tool_name, args_hash=_scope_hash(approval, scope),
        revoked_at__isnull=True,
    ).order_by("pk").first()


def _scope_hash(approval: Approval, scope: str) -> str:
    return (approval.edited_args_hash or approval.tool_call.args_hash) if scope == IDENTICAL else ""


def grant_revoke(*, grant_id: int, user) -> RunGrant:
    """Revoke a grant in one conditional UPDATE; revoking a revoked grant changes nothing (the
    first revoker stays on record). Raises RunGrant.DoesNotExist."""
    with write_transaction():
        revoked = RunGrant.objects.filter(pk=grant_id, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by_name=user.get_username()
        )
        grant = RunGrant.objects.get(pk=grant_id)
        if revoked:
            event_record(run_id=grant.run_id, kind="grant", data=grant_brief(grant))
    return grant


def grants_of_run(run_id: int) -> list[RunGrant]:
    """The run's grants, oldest first, revoked ones included (with who revoked them)."""
    return list(RunGrant.objects.filter(run_id=run_id).order_by("created_at", "pk"))
