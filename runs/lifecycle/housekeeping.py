"""Periodic care: hand out runs a worker lost, expire and escalate approvals, resend lost webhooks,
count ended runs left uncounted, prune old runs."""
import json
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.controls.budget_requests import holds_check
from runs.engine.dispatch import run_dispatch
from runs.engine.storage.events import event_record
from runs.engine.storage.snapshots import run_data, run_summary
from runs.lifecycle.archive import runs_delete
from runs.models import Approval, BudgetHold, Run
from runs.notifications.webhooks import webhooks_resend
from runs.observability.metrics import counter
from runs.supervision.approvals.decide import approvals_expire
from runs.supervision.approvals.escalation import approvals_escalate
from runs.supervision.approvals.expiry_warnings import approvals_warn
from runs.supervision.chat.messages import chat_sync

log = logging.getLogger("runs.services.housekeeping")  # its name from before the move: operators filter on it


def runs_sweep() -> dict:
    """Re-dispatch runs that no live worker drives; expire overdue approvals, then escalate those
    waiting past their threshold; queue again the webhooks whose task was lost.

    A run is stranded when it is `running` with a lease that ran out (its worker died), or
    `queued` with no lease RUN_REQUEUE_AFTER_SECONDS after it was last dispatched (its message
    may have been lost with Redis). Sending a run twice is harmless: the lease lets only one
    worker drive it.
    """
    now = timezone.now()
    lease_free = Q(lease_owner="") | Q(lease_expires_at__lt=now)
    waited = Q(last_sent__lt=now - timedelta(seconds=settings.RUN_REQUEUE_AFTER_SECONDS))
    pending = Approval.objects.filter(run=OuterRef("pk"), status=Approval.Status.PENDING)
    held = BudgetHold.objects.filter(run=OuterRef("pk"))
    stranded = list(
        Run.objects.alias(last_sent=Coalesce("dispatched_at", "created_at")).filter(
            # Its worker died (the lease ran out), or its task message was lost.
            (Q(status=Run.Status.RUNNING) & lease_free)
            | (Q(status=Run.Status.QUEUED) & Q(lease_expires_at__lt=now))
            # (One a spent budget holds waits for holds_check below.)
            | (Q(status=Run.Status.QUEUED, lease_owner="") & waited & ~Exists(held))
            # Every decision is in, but the task that should resume it never arrived.
            | (Q(status=Run.Status.AWAITING_APPROVAL) & lease_free & ~Exists(pending))
        ).values_list("pk", flat=True)[:1000]
    )
    for run_id in stranded:
        run_dispatch(run_id=run_id)
    summaries_abandoned(lease_free)
    released = holds_check()  # runs a budget held, whose budget was raised or whose period turned
    expired = approvals_expire()
    escalated = approvals_escalate()  # after expiry: an expired approval needs nobody any more
    warned = approvals_warn()
    chat_sync()  # messages in the chat channel: posted, and showing their outcome
    webhooks = webhooks_resend()
    counted = counter.count_left_over()  # ended runs whose process died before counting them
    if stranded or released or expired or escalated or warned or webhooks or counted:
        log.info(json.dumps({"event": "sweep", "redispatched": stranded, "budget_released": released, "approvals_expired": expired,
                             "approvals_escalated": escalated, "approvals_warned": warned, "webhooks_resent": webhooks,
                             "runs_counted": counted}))
    return {"redispatched": stranded, "budget_released": released, "approvals_expired": expired, "approvals_escalated": escalated,
            "approvals_warned": warned,
            "webhooks_resent": webhooks, "runs_counted": counted}


def summaries_abandoned(lease_free: Q) -> None:
    """An ended run whose worker died while asking for its summary reads as stopping no longer:
    it ended without one (its lease ran out, so nobody is asking)."""
    for run in Run.objects.filter(lease_free, summary_pending=True)[:1000]:
        if Run.objects.filter(lease_free, pk=run.pk, summary_pending=True).update(summary_pending=False):
            run.summary_pending = False
            event_record(run_id=run.pk, kind="run", data=run_summary(run))


def runs_prune(*, days: int, archive_dir: str | None = None, batch: int = 500) -> int:
    """Delete finished runs older than `days` (with their steps and calls), archiving them first
    as JSON Lines when `archive_dir` is given. Their approvals are always kept, as ArchivedApproval
    rows. Returns how many were deleted."""
    cutoff = timezone.now() - timedelta(days=days)
    old = Run.objects.filter(status__in=Run.FINISHED_STATUSES, created_at__lt=cutoff).order_by("pk")
    archive = None
    if archive_dir:
        Path(archive_dir).mkdir(parents=True, exist_ok=True)
        archive = open(Path(archive_dir) / f"runs-before-{cutoff:%Y%m%d}.jsonl", "a", encoding="utf-8")
    deleted = 0
    try:
        while True:
            ids = list(old.values_list("pk", flat=True)[:batch])
            if not ids:
                break
            if archive:
                for run in Run.objects.filter(pk__in=ids):
                    archive.write(json.dumps(run_data(run), default=str) + "\n")
                archive.flush()
            # Their decisions are archived in the same transaction as the delete, batch by batch.
            runs_delete(run_ids=ids)
            deleted += len(ids)
    finally:
        if archive:
            archive.close()
    return deleted
