"""Outgoing notifications: a POST to every URL in WEBHOOK_URLS, so operators need not watch the page.

Events: "approval.pending" (a destructive call waits for a person) and "budget.alert" (an agent
crossed its daily threshold). Each URL gets its own Celery task, retried with backoff when the
receiver fails, after the transaction that made the event commits. The body never contains tool
arguments, only their keyed hash. With WEBHOOK_SECRET set, X-Agentsite-Signature carries
"sha256=" + the HMAC-SHA256 of the exact body, so a receiver can check the sender.
"""
import hashlib
import hmac
import logging

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from runs.services.dispatch import task_send
from toolsapp import net

log = logging.getLogger(__name__)


def notify(event: str, data) -> None:
    """Send `event` to every configured webhook once the current transaction commits.

    `data` is a dict, or a callable returning one (only called when webhooks are configured)."""
    if not settings.WEBHOOK_URLS:
        return
    body = {"event": event, "sent_at": timezone.now().isoformat(), **(data() if callable(data) else data)}
    transaction.on_commit(lambda: _enqueue(event, body))


def _enqueue(event: str, body: dict) -> None:
    for url in settings.WEBHOOK_URLS:
        try:
            task_send("runs.tasks.send_webhook", url, event, body)
        except Exception as exc:  # the broker is down: a notification is not worth failing a run
            log.warning("webhook %s for %s not queued: %s", event, url, exc)


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_send(*, url: str, event: str, body: dict) -> int:
    """POST one notification. Returns the status; raises net.OutboundError for a retry, and
    net.Blocked (never retried) for an address the SSRF guard refuses."""
    data = net.encode_json(body)
    headers = {"X-Agentsite-Event": event}
    if settings.WEBHOOK_SECRET:
        headers["X-Agentsite-Signature"] = signature(data, settings.WEBHOOK_SECRET)  # of the exact bytes sent
    response = net.post_bytes(
        url, data, timeout=settings.WEBHOOK_TIMEOUT_SECONDS, headers=headers, max_bytes=64 * 1024
    )
    if response.status >= 500 or response.status == 429:
        raise net.OutboundError(f"{url} answered HTTP {response.status}")
    if response.status >= 400:
        log.warning("webhook %s refused by %s: HTTP %s", event, url, response.status)
    return response.status


def approval_pending_data(approval) -> dict:
    call = approval.tool_call
    return {
        "approval": {
            "id": approval.pk,
            "run_id": approval.run_id,
            "agent": approval.run.agent.name,
            "tool": call.tool_name,
            "call_id": call.call_id,
            "args_hash": call.args_hash,
            "note": approval.note,
            "requested_at": approval.requested_at.isoformat() if approval.requested_at else None,
            "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
            "url": settings.SITE_URL.rstrip("/") + reverse("approval_queue"),
        }
    }


def budget_alert_data(alert) -> dict:
    return {
        "alert": {
            "agent": alert.agent.name,
            "day": alert.day.isoformat(),
            "kind": alert.kind,
            "threshold": alert.threshold,
            "observed": alert.observed,
            "url": settings.SITE_URL.rstrip("/") + reverse("metrics"),
        }
    }
