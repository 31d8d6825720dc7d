"""Escalation: an approval waiting past its threshold is e-mailed (to a real local SMTP server) and
posted as a webhook once, with masked arguments and a link that needs a signed-in person."""
import email
import email.policy
import json
import logging
import re
import threading
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from runs.lifecycle.housekeeping import runs_sweep
from runs.models import Agent, Approval, WebhookDelivery
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.approvals.escalation import age_text, approvals_escalate
from tests.conftest import free_port
from tests.notifications.test_notifications import Receiver, eager_tasks  # noqa: F401 (fixture)
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

DEMO_TASK = "Please cancel order ORD-1001, the customer asked."
SECRET_REASON = "Customer asked to cancel"  # what the demo model gives as the (here sensitive) reason


class Mailbox:
    """aiosmtpd handler: keeps every message the server accepts."""

    def __init__(self):
        self.messages: list[dict] = []

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append({"to": list(envelope.rcpt_tos), "message": message, "body": message.get_content()})
        return "250 Message accepted for delivery"


@pytest.fixture
def mailbox(settings):
    handler = Mailbox()
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.DEFAULT_FROM_EMAIL = "agentsite@example.com"
    settings.APPROVAL_ESCALATION_EMAILS = ["oncall@example.com"]
    settings.SITE_URL = "https://agents.example.com"
    handler.controller = controller  # its port: a test may point EMAIL_PORT elsewhere for a while
    yield handler
    controller.stop()


@pytest.fixture
def receiver(settings, eager_tasks):  # noqa: F811 (the fixture imported above)
    server = Receiver()
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{server.port}"]
    settings.WEBHOOK_URLS = [server.url]
    yield server
    server.stop()


@pytest.fixture
def waiting(launch, broker):
    """launch() -> a pending approval of cancel_order (whose "reason" is sensitive), asked 10 min
    ago and due for escalation."""
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])

    def make(**agent_fields) -> Approval:
        if agent_fields:
            Agent.objects.filter(name="demo").update(**agent_fields)
        approval = pending_approval(launch(DEMO_TASK))
        now = timezone.now()
        Approval.objects.filter(pk=approval.pk).update(
            requested_at=now - timedelta(minutes=10), escalate_at=now - timedelta(seconds=1)
        )
        approval.refresh_from_db()
        return approval

    return make


def item_path(approval_id: int) -> str:
    """The queue item's page, as the README promises it."""
    path = f"/approvals/{approval_id}/"
    assert reverse("approval_detail", args=[approval_id]) == path
    return path


def test_a_waiting_approval_is_emailed_once_with_masked_arguments_hash_and_link(waiting, mailbox, receiver):
    approval = waiting()
    call = approval.tool_call

    runs_sweep()
    runs_sweep()  # the second sweep finds it escalated already

    [mail] = mailbox.messages
    body, subject = mail["body"], mail["message"]["Subject"]
    assert mail["to"] == ["oncall@example.com"]
    assert "cancel_order" in subject and f"run #{approval.run_id}" in subject and "10 min" in subject
    assert "cancel_order" in body and f"#{approval.run_id}, agent demo" in body
    assert '"order_id": "ORD-1001"' in body  # not sensitive: shown
    assert f'"reason": {MASK}' in body and SECRET_REASON not in body  # sensitive: masked
    assert call.args_hash in body
    assert "waited 10 min" in body
    assert f"https://agents.example.com{item_path(approval.pk)}" in body
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.escalated_at is not None

    # The webhook: one delivery of approval.escalated, with the hash and the link, no arguments.
    deliveries = WebhookDelivery.objects.filter(event="approval.escalated")
    assert deliveries.count() == 1 and deliveries.get().status == WebhookDelivery.Status.DELIVERED
    [posted] = [e for e in receiver.events() if e["event"] == "approval.escalated"]
    assert posted["approval"]["id"] == approval.pk and posted["approval"]["args_hash"] == call.args_hash
    assert posted["approval"]["url"] == f"https://agents.example.com{item_path(approval.pk)}"
    assert posted["approval"]["waited_seconds"] >= 600
    raw = json.dumps(posted)
    assert "ORD-1001" not in raw and SECRET_REASON not in raw


def test_the_link_needs_sign_in_and_opening_it_decides_nothing(waiting, mailbox, client, alice):
    approval = waiting()
    approvals_escalate()
    [mail] = mailbox.messages
    path = item_path(approval.pk)
    assert f"https://agents.example.com{path}" in mail["body"]
    assert "token" not in mail["body"].split(path)[-1]  # nothing after the path: no token, no query
    anonymous = client.get(path)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]
    client.force_login(alice)
    assert client.get(path).status_code == 200
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING  # a GET decides nothing


def test_no_escalation_when_decided_before_the_threshold(waiting, mailbox, receiver, alice, no_dispatch):
    approval = waiting()
    Approval.objects.filter(pk=approval.pk).update(escalate_at=timezone.now() + timedelta(hours=1))
    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="not this one")
    Approval.objects.filter(pk=approval.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))  # time passes

    assert approvals_escalate() == []
    assert mailbox.messages == []
    assert not WebhookDelivery.objects.filter(event="approval.escalated").exists()
    approval.refresh_from_db()
    assert approval.escalated_at is None


def test_escalate_at_decides_when_whichever_threshold_set_it(waiting, mailbox):
    # The agent says 30 min; a rule's 5 min was written into escalate_at when the call was asked.
    by_rule = waiting(escalate_after_seconds=1800)
    by_agent = waiting()
    now = timezone.now()
    Approval.objects.filter(pk=by_rule.pk).update(escalate_at=by_rule.requested_at + timedelta(minutes=5))
    Approval.objects.filter(pk=by_agent.pk).update(escalate_at=by_agent.requested_at + timedelta(minutes=30))
    assert by_agent.requested_at + timedelta(minutes=30) > now

    assert approvals_escalate() == [by_rule.pk]
    assert len(mailbox.messages) == 1 and f"run #{by_rule.run_id}" in mailbox.messages[0]["message"]["Subject"]
    assert Approval.objects.get(pk=by_agent.pk).escalated_at is None


def test_the_agents_addresses_replace_the_default_ones(waiting, mailbox):
    waiting(escalation_emails="lead@example.com, ops@example.com")
    approvals_escalate()
    [mail] = mailbox.messages
    assert sorted(mail["to"]) == ["lead@example.com", "ops@example.com"]


def test_nobody_to_tell_sends_no_email_but_still_escalates(waiting, mailbox, settings):
    settings.APPROVAL_ESCALATION_EMAILS = []
    approval = waiting()
    assert approvals_escalate() == [approval.pk]
    assert mailbox.messages == []


def test_a_mail_server_that_is_down_does_not_break_the_sweep(waiting, mailbox, receiver, caplog, settings):
    approval = waiting()
    settings.EMAIL_PORT = free_port()  # nothing listens there
    with caplog.at_level(logging.ERROR, logger="runs.supervision.approvals.escalation"):
        result = runs_sweep()
    assert result["approvals_escalated"] == [approval.pk]
    [line] = [r.getMessage() for r in caplog.records if "escalation_email_not_sent" in r.getMessage()]
    assert json.loads(line)["approvals"] == [approval.pk]
    assert SECRET_REASON not in line and "ORD-1001" not in line
    # The webhook went out; the e-mail is not tried again (at most once).
    assert [e["event"] for e in receiver.events()].count("approval.escalated") == 1
    settings.EMAIL_PORT = mailbox.controller.port  # the server is back
    runs_sweep()
    assert mailbox.messages == []


def test_two_sweeps_at_once_escalate_once(waiting, mailbox, transactional_db):
    approval = waiting()
    start = threading.Barrier(2)
    results, errors = [], []

    def sweep():
        try:
            start.wait()
            results.append(approvals_escalate())
        except Exception as exc:  # pragma: no cover - shown by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted(results, key=len) == [[], [approval.pk]]
    assert len(mailbox.messages) == 1


# --- The agent's settings -----------------------------------------------------------------------


def test_the_agent_form_sets_threshold_and_addresses_and_runs_freeze_the_threshold(demo_data, launch):
    from runs.web.forms.agents import AgentForm

    base = {"name": "ops", "system_prompt": "Be brief.", "max_iterations": 5, "repeat_limit": 2,
            "max_wall_seconds": 60, "max_tokens": 1000, "max_cost_usd": 1, "first_tool_choice": "auto",
            "later_tool_choice": "auto"}
    form = AgentForm({**base, "escalate_after_seconds": "300", "escalation_emails": "a@example.com, b@example.com"})
    assert form.is_valid(), form.errors
    agent = form.save()
    assert (agent.escalate_after_seconds, agent.escalation_emails) == (300, "a@example.com, b@example.com")
    bad = AgentForm({**base, "name": "ops2", "escalate_after_seconds": "0", "escalation_emails": "a@example.com, nope"})
    assert set(bad.errors) == {"escalate_after_seconds", "escalation_emails"}
    assert "nope" in bad.errors["escalation_emails"][0]

    Agent.objects.filter(name="demo").update(escalate_after_seconds=120)
    assert launch("What's the weather in Lagos?").config["escalate_after_seconds"] == 120
    Agent.objects.filter(name="demo").update(escalate_after_seconds=None)
    assert launch("What's the weather in Lagos?").config["escalate_after_seconds"] is None


def test_the_agent_api_reads_and_checks_the_escalation_settings(demo_data, client):
    from tests.lifecycle.test_history import user_in

    client.force_login(user_in("admins", "ada"))
    agent = Agent.objects.get(name="demo")
    url = f"/api/v1/agents/{agent.pk}/"
    response = client.patch(url, {"escalate_after_seconds": 600, "escalation_emails": "lead@example.com"},
                            content_type="application/json")
    assert response.status_code == 200, response.content
    assert (response.json()["escalate_after_seconds"], response.json()["escalation_emails"]) == (600, "lead@example.com")
    refused = client.patch(url, {"escalation_emails": "lead@example.com; ops"}, content_type="application/json")
    assert refused.status_code == 400 and "escalation_emails" in refused.content.decode()


# --- The header badge -----------------------------------------------------------------------------


def test_the_badge_count_says_how_long_the_oldest_call_has_waited(waiting, client, alice):
    count_url = reverse("approval_count")
    client.force_login(alice)
    assert client.get(count_url).json() == {"pending": 0, "expiring": 0, "budget_waiting": 0, "oldest_requested_at": None,
                                              "oldest_waiting_seconds": None}
    older, newer = waiting(), waiting()
    Approval.objects.filter(pk=newer.pk).update(requested_at=timezone.now() - timedelta(minutes=2))
    data = client.get(count_url).json()
    assert data["pending"] == 2
    assert data["oldest_requested_at"] == older.requested_at.isoformat()
    assert data["oldest_waiting_seconds"] >= 600


def test_the_header_is_written_with_the_oldest_calls_age(waiting, client, alice):
    # In the page itself, not added by the badge's script after loading: the menu has its final
    # width at the first paint, and nothing under it moves while a person is about to click.
    client.force_login(alice)
    assert 'id="approval-oldest"' not in client.get(reverse("run_list")).content.decode()
    waiting()
    page = client.get(reverse("run_list")).content.decode()
    label = re.search(r'<span id="approval-oldest" class="badge-age" data-seconds="([0-9.]+)">· oldest ([^<]+)</span>', page)
    assert label, page
    assert float(label.group(1)) >= 600 and label.group(2) == age_text(float(label.group(1)))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (59.9, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h"), (7500, "2 h 5 min"),
     (86400, "1 d"), (3 * 86400 + 4 * 3600 + 59, "3 d 4 h")],
)
def test_ages_are_written_as_the_badge_writes_them(seconds, text):
    assert age_text(seconds) == text
