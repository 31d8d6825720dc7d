"""Webhooks are recorded with the event that causes them, so a lost Redis loses none, and their
signature carries a timestamp, so a receiver can refuse a replayed message.

A real worker sends them to a real HTTP receiver on 127.0.0.1; the receiver checks signatures
exactly as the README tells receivers to.
"""
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from runs.lifecycle.housekeeping import runs_sweep
from runs.models import Agent, WebhookDelivery
from runs.observability.metrics.budget_alerts import budget_alerts_check
from tests.lifecycle.test_history import make_run
from tests.notifications.test_notifications import Receiver

SECRET = "hook-secret"


def verify(body: bytes, header: str, secret: str, *, now: float, tolerance: int = 300) -> bool:
    """The receiver's check, as in the README: a valid HMAC of "t.body", and t not too old."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    expected = hmac.new(secret.encode(), f"{parts['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"]) and abs(now - int(parts["t"])) <= tolerance


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


@pytest.mark.worker
def test_webhook_recorded_while_redis_is_down_is_sent_by_a_later_sweep_signed_with_a_timestamp(
    celery_worker_proc, demo_data, own_redis, receiver, settings, wait_for
):
    settings.WEBHOOK_URLS = [receiver.url]
    settings.WEBHOOK_SECRET = SECRET
    allow = f"127.0.0.1:{receiver.port}"
    settings.OUTBOUND_ALLOWLIST = [allow]
    celery_worker_proc(redis_url=own_redis.url(0), env={"WEBHOOK_SECRET": SECRET, "OUTBOUND_ALLOWLIST": allow})
    agent = Agent.objects.create(name="billing", daily_token_alert=1000)
    now = datetime.now(UTC)
    make_run(agent, created=now - timedelta(minutes=1), tokens=(2000, 0))

    own_redis.kill()
    [alert] = budget_alerts_check(now=now)  # its webhook cannot be queued: Redis is down
    [delivery] = WebhookDelivery.objects.all()
    assert (delivery.event, delivery.status, delivery.url) == ("budget.alert", WebhookDelivery.Status.PENDING, receiver.url)
    assert delivery.body["alert"]["agent"] == "billing"
    own_redis.start()

    # Not yet overdue: the sweep leaves it to the task that may still be on its way.
    assert runs_sweep()["webhooks_resent"] == []
    settings.WEBHOOK_RESEND_AFTER_SECONDS = 0
    assert runs_sweep()["webhooks_resent"] == [delivery.pk]
    wait_for(lambda: receiver.requests, message="the webhook to arrive")
    wait_for(
        lambda: WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.DELIVERED).exists(),
        message="the delivery to be marked delivered",
    )

    [request] = receiver.requests
    headers, body = request["headers"], request["body"]
    assert json.loads(body)["alert"]["agent"] == "billing"
    assert headers["X-Agentsite-Delivery"] == str(delivery.pk)
    timestamp = int(headers["X-Agentsite-Timestamp"])
    assert headers["X-Agentsite-Signature"].startswith(f"t={timestamp},v1=")
    assert verify(body, headers["X-Agentsite-Signature"], SECRET, now=time.time())
    # The same message replayed later is refused by a receiver that checks the timestamp, and a
    # timestamp changed to look fresh breaks the signature.
    assert not verify(body, headers["X-Agentsite-Signature"], SECRET, now=timestamp + 3600)
    forged = headers["X-Agentsite-Signature"].replace(f"t={timestamp}", f"t={timestamp + 3600}")
    assert not verify(body, forged, SECRET, now=timestamp + 3600)
    delivered = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (delivered.attempts, delivered.last_error) == (1, "")
    # Delivered is final: a later sweep sends nothing again.
    assert runs_sweep()["webhooks_resent"] == []


def test_a_receiver_that_keeps_failing_is_given_up_after_the_last_attempt(demo_data, settings, receiver):
    from agentsite.celery import app as celery_app

    receiver.script = [503] * 10
    settings.WEBHOOK_URLS = [receiver.url]
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{receiver.port}"]
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    celery_app.conf.task_always_eager = True  # retries run at once, in this process
    try:
        agent = Agent.objects.create(name="billing", daily_token_alert=1000)
        now = datetime.now(UTC)
        make_run(agent, created=now - timedelta(minutes=1), tokens=(2000, 0))
        budget_alerts_check(now=now)
    finally:
        celery_app.conf.task_always_eager = False
    [delivery] = WebhookDelivery.objects.all()
    assert (delivery.status, delivery.attempts, len(receiver.requests)) == (WebhookDelivery.Status.FAILED, 3, 3)
    assert "503" in delivery.last_error
    settings.WEBHOOK_RESEND_AFTER_SECONDS = 0
    assert runs_sweep()["webhooks_resent"] == []  # failed for good: not sent again
