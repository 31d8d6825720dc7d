"""Waits that warn first: a call waiting for people warns them before it expires, once.

When a call is asked about and its approval can expire, `warning_due_at` sets when to warn: its
expiry less the rule's `expiry_warning_seconds`, else its agent's, else a fifth of the wait. The
sweep (runs/lifecycle/housekeeping.py) calls `approvals_warn` every few seconds: each due approval
is claimed by one conditional UPDATE setting `warned_at` (two sweeps never warn twice), its
webhook "approval.expiring" written in the claim's transaction (at least once, retried like every
webhook), and its e-mail sent after the claim commits (at most once, as escalations are). The
header's badge counts the warned approvals still waiting ("2 expiring"), and their cards say so.
"""
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from runs.engine.storage.events import approvals_changed
from runs.models import Approval
from runs.notifications.webhooks import approval_pending_data, notify
from runs.supervision.approvals.escalation import age_text, approval_email, approval_link, escalation_emails_send

WARNINGS_PER_SWEEP = 100
DEFAULT_SHARE = 5  # with no setting, warn when a fifth of the wait is left


def warning_due_at(*, requested_at: datetime, expires_at: datetime | None, warning_seconds: int | None) -> datetime | None:
    """When to warn that an approval will expire; None when it never expires. A warning longer
    than the whole wait warns at once."""
    if expires_at is None:
        return None
    before = timedelta(seconds=warning_seconds) if warning_seconds else (expires_at - requested_at) / DEFAULT_SHARE
    return max(requested_at, expires_at - before)


def expiring_email(approval: Approval, *, now: datetime, sensitive_fields: list[str]):
    left = age_text((approval.expires_at - now).total_seconds())
    tool = " ".join(approval.tool_call.tool_name.split())[:100]
    return approval_email(
        approval, now=now, sensitive_fields=sensitive_fields,
        headline=f"A destructive call expires in {left} unless someone decides it (expiry counts as a rejection).",
        subject=f"Expires in {left}: {tool} in run #{approval.run_id}",
    )


def approval_expiring_data(approval: Approval, *, now: datetime) -> dict:
    """The webhook body: approval.pending's, with when it expires, the time left and its link."""
    data = approval_pending_data(approval)
    data["approval"].update({
        "expires_at": approval.expires_at.isoformat(),
        "seconds_left": round(max(0.0, (approval.expires_at - now).total_seconds()), 1),
        "rule": approval.rule_name or None,
        "required_approvals": approval.required_approvals,
        "approvals_given": approval.approvals_given,
        "url": approval_link(approval.pk),
    })
    return data


def approvals_warn(*, limit: int = WARNINGS_PER_SWEEP) -> list[int]:
    """Warn about the pending approvals whose warn_at has passed and that have not expired yet;
    returns their ids."""
    now = timezone.now()
    due = list(
        Approval.objects.filter(status=Approval.Status.PENDING, warn_at__lte=now, warned_at__isnull=True,
                                expires_at__gt=now)
        .order_by("warn_at", "pk").values_list("pk", flat=True)[:limit]
    )
    warned: list[Approval] = []
    for approval_id in due:
        with transaction.atomic():
            if not Approval.objects.filter(
                pk=approval_id, status=Approval.Status.PENDING, warned_at__isnull=True
            ).update(warned_at=now):
                continue  # decided meanwhile, or claimed by another sweep
            approval = Approval.objects.select_related("run", "run__agent", "tool_call", "group").get(pk=approval_id)
            notify("approval.expiring", lambda approval=approval: approval_expiring_data(approval, now=now),
                   project_id=approval.run.agent.project_id)
            approvals_changed(run_id=approval.run_id)  # the badges count it as expiring
        warned.append(approval)
    if warned:
        escalation_emails_send(warned, now=now, build=expiring_email)
    return [approval.pk for approval in warned]
