"""Waits that warn first: a call waiting for people warns them (e-mail to a real local SMTP server,
a webhook to a real local receiver, the header's badge and the card) before it expires, once, at
the time its rule or agent sets."""
import json
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from runs.lifecycle.housekeeping import runs_sweep
from runs.models import Agent, Approval, WebhookDelivery
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.approvals.expiry_warnings import approvals_warn, warning_due_at
from runs.supervision.rules.changes import rule_create
from tests.notifications.test_notifications import eager_tasks  # noqa: F401 (fixture)
from tests.supervision.approvals.test_escalation import DEMO_TASK, SECRET_REASON, mailbox, receiver  # noqa: F401 (fixtures)
from tests.support.approval_fixtures import make_user, pending_approval
from toolsapp.models import Tool
from toolsapp.sensitive import MASK


def asked(launch, **agent_fields) -> Approval:
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    Agent.objects.filter(name="demo").update(**agent_fields)
    return pending_approval(launch(DEMO_TASK))


def seconds_before_expiry(approval: Approval) -> float:
    return (approval.expires_at - approval.warn_at).total_seconds()


def test_the_warning_time_comes_from_the_rule_else_the_agent_else_a_fifth_of_the_wait(launch, demo_data):
    assert seconds_before_expiry(asked(launch, approval_timeout_seconds=600)) == 120
    assert seconds_before_expiry(asked(launch, approval_timeout_seconds=600, expiry_warning_seconds=60)) == 60
    rule_create(data={"name": "cancels", "tool_pattern": "cancel_order", "action": "ask", "expiry_warning_seconds": 300},
                user=make_user("ada", "admins"))
    assert seconds_before_expiry(asked(launch, approval_timeout_seconds=600, expiry_warning_seconds=60)) == 300
    never = asked(launch, approval_timeout_seconds=None)
    assert (never.expires_at, never.warn_at) == (None, None)


def test_a_warning_longer_than_the_wait_warns_at_once():
    now = timezone.now()
    assert warning_due_at(requested_at=now, expires_at=now + timedelta(seconds=30), warning_seconds=3600) == now


def test_a_call_about_to_expire_warns_once_by_mail_webhook_badge_and_card(launch, mailbox, receiver, client, alice):  # noqa: F811
    approval = asked(launch, approval_timeout_seconds=600)
    Approval.objects.filter(pk=approval.pk).update(warn_at=timezone.now() - timedelta(seconds=1),
                                                   expires_at=timezone.now() + timedelta(seconds=100))
    client.force_login(alice)
    assert client.get(reverse("approval_count")).json()["expiring"] == 0

    runs_sweep()
    runs_sweep()  # the second sweep finds it warned already

    [mail] = mailbox.messages
    subject, body = mail["message"]["Subject"], mail["body"]
    assert subject.startswith("[Agentsite] Expires in 1 min: cancel_order in run #")
    assert "expires in 1 min unless someone decides it" in body
    assert f'"reason": {MASK}' in body and SECRET_REASON not in body
    assert f"https://agents.example.com/approvals/{approval.pk}/" in body
    [delivery] = WebhookDelivery.objects.filter(event="approval.expiring")
    assert delivery.status == WebhookDelivery.Status.DELIVERED
    [posted] = [e for e in receiver.events() if e["event"] == "approval.expiring"]
    assert posted["approval"]["id"] == approval.pk and 0 < posted["approval"]["seconds_left"] <= 100
    assert SECRET_REASON not in json.dumps(posted) and "ORD-1001" not in json.dumps(posted)

    assert client.get(reverse("approval_count")).json()["expiring"] == 1
    page = client.get(reverse("approval_queue")).content.decode()
    assert "1 expiring</span>" in page
    assert "expires soon: expiry counts as a rejection" in page
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.warned_at is not None


def test_decided_or_expired_calls_are_not_warned(launch, mailbox, alice, no_dispatch):  # noqa: F811
    decided = asked(launch, approval_timeout_seconds=600)
    overdue = asked(launch, approval_timeout_seconds=600)
    past = timezone.now() - timedelta(seconds=1)
    Approval.objects.filter(pk__in=[decided.pk, overdue.pk]).update(warn_at=past)
    Approval.objects.filter(pk=overdue.pk).update(expires_at=past)
    approval_decide(approval_id=decided.pk, user=alice, approve=False, reason="no")

    assert approvals_warn() == []
    assert mailbox.messages == []
    runs_sweep()
    overdue.refresh_from_db()
    assert (overdue.status, overdue.warned_at) == (Approval.Status.EXPIRED, None)


def test_rules_and_agents_take_a_warning_time_and_refuse_a_bad_one(demo_data):
    from tests.web.api.test_api import api
    client = api(make_user("ada", "admins"))
    made = client.post("/api/v1/rules/", {"name": "r", "tool_pattern": "*", "expiry_warning_seconds": 90}, format="json")
    assert made.status_code == 201 and made.json()["expiry_warning_seconds"] == 90
    bad = client.post("/api/v1/rules/", {"name": "r", "tool_pattern": "*", "expiry_warning_seconds": 0}, format="json")
    assert bad.status_code == 400 and "expiry_warning_seconds" in bad.json().get("errors", bad.json())
    agent = Agent.objects.get(name="demo")
    changed = client.patch(f"/api/v1/agents/{agent.pk}/", {"expiry_warning_seconds": 45}, format="json")
    assert changed.status_code == 200, changed.content
    assert Agent.objects.get(pk=agent.pk).expiry_warning_seconds == 45
    refused = client.patch(f"/api/v1/agents/{agent.pk}/", {"expiry_warning_seconds": -5}, format="json")
    assert refused.status_code == 400
    assert Agent.objects.get(pk=agent.pk).expiry_warning_seconds == 45
