"""Outgoing notifications: a POST to every URL in WEBHOOK_URLS, so operators need not watch the page.

Events: "approval.pending" (a destructive call waits for a person), "approval.escalated" (it has
waited past its escalation threshold; sent once, by runs/supervision/approvals/escalation.py, alongside an
e-mail), "approval.expiring" (it will expire soon; sent once, by runs/supervision/approvals/expiry_warnings.py,
alongside an e-mail) and "budget.alert" (an agent crossed its daily threshold). Each URL's delivery is a row (WebhookDelivery) written in the
transaction that makes the event, so a lost broker loses nothing: its task is queued after commit,
sends it and marks it delivered, or failed after WEBHOOK_MAX_ATTEMPTS with backoff; the periodic
sweep queues again a delivery whose task never came (`webhooks_resend`). Delivery is at least
once: receivers can drop repeats by X-Agentsite-Delivery. The body never contains tool arguments,
only their keyed hash. With WEBHOOK_SECRET set, X-Agentsite-Signature is "t=<unix time>,v1=<hex
HMAC-SHA256 of '<t>.<body>'>", so a receiver can check the sender and refuse an old (replayed)
message.
"""
import hashlib
import hmac
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from audit.record import audited, entry_write, shown_repr
from runs.engine.dispatch import task_send
from runs.models import Agent, CallEvidence, Webhook, WebhookDelivery
from toolsapp import net

log = logging.getLogger("runs.services.notifications")  # its name from before the move: operators filter on it
SEND_TASK = "runs.tasks.send_webhook"


def webhook_urls(*, agent_id: int | None = None, project_id: int | None = None) -> list[str]:
    """Where notifications go: WEBHOOK_URLS (the site's: every project's events), then the enabled
    webhooks of the settings page, of the event's project only (by its agent's, in the same query)."""
    urls = list(settings.WEBHOOK_URLS)
    hooks = Webhook.objects.filter(enabled=True)
    if project_id is not None:
        hooks = hooks.filter(project_id=project_id)
    elif agent_id is not None:
        hooks = hooks.filter(project_id__in=Agent.objects.filter(pk=agent_id).values("project_id"))
    for url in hooks.values_list("url", flat=True):
        if url not in urls:
            urls.append(url)
    return urls


def notify(event: str, data, *, urls: list[str] | None = None, agent_id: int | None = None,
           project_id: int | None = None) -> list[int]:
    """Record `event` for every configured webhook of its project (the project, or the agent's),
    or only `urls`, and queue its sending once the current transaction commits. Returns the
    deliveries' ids.

    `data` is a dict, or a callable returning one (only called when webhooks are configured)."""
    urls = webhook_urls(agent_id=agent_id, project_id=project_id) if urls is None else urls
    if not urls:
        return []
    body = {"event": event, "sent_at": timezone.now().isoformat(), **(data() if callable(data) else data)}
    now = timezone.now()
    deliveries = WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(url=url, event=event, body=body, next_attempt_at=now) for url in urls]
    )
    ids = [d.pk for d in deliveries if d.pk is not None]
    transaction.on_commit(lambda: _enqueue(ids))
    return ids


def webhook_add(*, url: str, description: str, user, project=None) -> Webhook:
    """Register a receiver of `project`'s notifications (None: Default). Raises net.Blocked when
    the SSRF guard refuses its address (a private or local one not in OUTBOUND_ALLOWLIST): said at
    once, not at the first failed delivery."""
    net.check_url(url)
    return Webhook.objects.create(url=url, description=description, created_by=user,
                                  **({"project": project} if project is not None else {}))


def webhook_switch(*, webhook: Webhook, enabled: bool) -> Webhook:
    """Turn a receiver on or off: an off one gets no new notifications (and keeps its URL,
    description and deliveries, unlike removing it). Its deliveries already recorded still go."""
    was = webhook.enabled
    Webhook.objects.filter(pk=webhook.pk).update(enabled=enabled)
    webhook.enabled = enabled
    if was != enabled:  # an UPDATE sends no signal: the audit entry is written here
        entry_write(action=AuditEntry.Action.UPDATED, kind="webhook", object_id=webhook.pk,
                    object_repr=shown_repr(webhook, audited(Webhook) or {}),
                    before={"enabled": was}, after={"enabled": enabled})
    return webhook


def webhook_test(*, webhook: Webhook, user) -> int:
    """Send a "webhook.test" notification to this receiver only, through the same path as the
    real ones (recorded, retried, signed). Returns the delivery's id."""
    data = {"message": "A test notification from Agentsite's settings page.", "by": user.get_username()}
    return notify("webhook.test", data, urls=[webhook.url])[0]


def _enqueue(ids: list[int]) -> None:
    for delivery_id in ids:
        try:
            task_send(SEND_TASK, delivery_id)
        except Exception as exc:  # the broker is down: the row stays pending and the sweep sends it
            log.warning("webhook delivery %s not queued (%s); the sweep will send it", delivery_id, exc)


def webhooks_resend(*, limit: int = 200) -> list[int]:
    """Queue again pending deliveries that are overdue by WEBHOOK_RESEND_AFTER_SECONDS: their task
    was lost (the broker went away) or died with its worker. Returns their ids."""
    now = timezone.now()
    overdue = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING,
        next_attempt_at__lte=now - timedelta(seconds=settings.WEBHOOK_RESEND_AFTER_SECONDS),
    )
    ids = list(overdue.values_list("pk", flat=True)[:limit])
    sent = []
    for delivery_id in ids:
        # Pushed forward first, so the next sweep does not queue it again while this task waits.
        if WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING).update(next_attempt_at=now):
            try:
                task_send(SEND_TASK, delivery_id)
                sent.append(delivery_id)
            except Exception as exc:
                log.warning("webhook delivery %s not queued (%s)", delivery_id, exc)
                break
    return sent


def backoff_seconds(attempts: int) -> int:
    return min(300, 5 * 2 ** max(0, attempts - 1))


def webhook_deliver(*, delivery_id: int) -> float | None:
    """Send one recorded delivery and record the outcome. Returns the seconds to wait before
    trying again, or None when there is nothing more to do (delivered, failed for good, or
    already handled by another task)."""
    now = timezone.now()
    # Claim one attempt: a delivery already delivered or failed is never sent again.
    claimed = WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING).update(
        attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS)
    )
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    done = {"status": WebhookDelivery.Status.DELIVERED, "delivered_at": timezone.now(), "last_error": ""}
    try:
        status = webhook_send(url=delivery.url, event=delivery.event, body=delivery.body, delivery_id=delivery.pk)
        if status >= 400:
            done = {"status": WebhookDelivery.Status.FAILED, "last_error": f"HTTP {status}"}
    except net.Blocked as exc:  # configuration error: retrying cannot help
        log.error("webhook %s to %s refused: %s", delivery.event, delivery.url, exc)
        done = {"status": WebhookDelivery.Status.FAILED, "last_error": str(exc)[:1000]}
    except net.OutboundError as exc:
        if delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            log.error("webhook %s to %s failed %s times: %s", delivery.event, delivery.url, delivery.attempts, exc)
            done = {"status": WebhookDelivery.Status.FAILED, "last_error": str(exc)[:1000]}
        else:
            wait = backoff_seconds(delivery.attempts)
            WebhookDelivery.objects.filter(pk=delivery_id).update(
                last_error=str(exc)[:1000], next_attempt_at=timezone.now() + timedelta(seconds=wait)
            )
            return wait
    WebhookDelivery.objects.filter(pk=delivery_id).update(**done)
    return None


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """The X-Agentsite-Signature value: the HMAC covers the timestamp, so it cannot be replayed
    later with a new one."""
    signed = str(timestamp).encode() + b"." + body
    return f"t={timestamp},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def webhook_send(*, url: str, event: str, body: dict, delivery_id: int | None = None) -> int:
    """POST one notification. Returns the status; raises net.OutboundError for a retry, and
    net.Blocked (never retried) for an address the SSRF guard refuses."""
    data = net.encode_json(body)
    headers = {"X-Agentsite-Event": event}
    if delivery_id is not None:
        headers["X-Agentsite-Delivery"] = str(delivery_id)
    if settings.WEBHOOK_SECRET:
        timestamp = int(time.time())
        headers["X-Agentsite-Timestamp"] = str(timestamp)
        headers["X-Agentsite-Signature"] = signature(data, settings.WEBHOOK_SECRET, timestamp)  # of the exact bytes sent
    response = net.post_bytes(
        url, data, timeout=settings.WEBHOOK_TIMEOUT_SECONDS, headers=headers, max_bytes=64 * 1024
    )
    if response.status >= 500 or response.status == 429:
        raise net.OutboundError(f"{url} answered HTTP {response.status}")
    if response.status >= 400:
        log.warning("webhook %s refused by %s: HTTP %s", event, url, response.status)
    return response.status


def approval_pending_data(approval) -> dict:
    """approval.pending's body: the call without its arguments (their keyed hash only), and where
    each argument came from, without the values (`evidence`, null for a call without evidence):
    enough for a receiver to page someone when a value came from outside content."""
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
            # The call's own card (decidable there, with its evidence), not the whole queue.
            "url": settings.SITE_URL.rstrip("/") + reverse("approval_detail", args=[approval.pk]),
            "evidence": _evidence_sources(approval.pk),
        }
    }


def _evidence_sources(approval_id: int) -> dict | None:
    """{"sources": {"$.order_id": "tool", ...}, "outside_paths": [...]} from the call's stored
    evidence (runs/models/evidence.py); the words and values stay on the card."""
    row = CallEvidence.objects.filter(approval_id=approval_id).values_list("data", "outside_paths").first()
    if row is None:
        return None
    data, outside = row
    values = (data or {}).get("values") if isinstance(data, dict) else None
    sources = {str(v.get("path")): v.get("source") for v in values or () if isinstance(v, dict) and v.get("path")}
    return {"sources": sources, "outside_paths": list(outside or ())}


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
