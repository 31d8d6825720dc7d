"""Webhooks for new pending approvals and daily budget alerts, received by a real local HTTP server."""
import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from agentsite.celery import app as celery_app
from runs.models import Agent, Approval, BudgetAlert, Run
from runs.notifications.webhooks import signature
from runs.observability.metrics.budget_alerts import budget_alerts_check
from tests.lifecycle.test_history import make_run
from tests.tools.local_http import LocalServer

DEMO_TASK = "Please cancel order ORD-1001, the customer asked."


class Receiver(LocalServer):
    """Records every POST; answers with the statuses in `script`, then 200."""

    def __init__(self, script=(), host="127.0.0.1"):
        self.requests: list[dict] = []
        self.script = list(script)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                status = receiver.script.pop(0) if receiver.script else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.serve(Handler, host)
        self.url = f"http://{host}:{self.port}/hook"

    def events(self) -> list[dict]:
        return [json.loads(r["body"]) for r in self.requests]



@pytest.fixture
def eager_tasks():
    """Celery tasks run in this process when queued, so the webhook is sent before we look."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def receiver(settings, eager_tasks):
    server = Receiver()
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{server.port}"]
    settings.WEBHOOK_URLS = [server.url]
    settings.WEBHOOK_SECRET = "hook-secret"
    yield server
    server.stop()


# --- pending approvals ---------------------------------------------------------------------------


def test_a_new_pending_approval_is_posted_signed_and_without_raw_arguments(launch, receiver):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)

    [request] = receiver.requests
    body = json.loads(request["body"])
    assert body["event"] == "approval.pending" and request["headers"]["X-Agentsite-Event"] == "approval.pending"
    assert body["approval"]["id"] == approval.pk and body["approval"]["run_id"] == run.pk
    assert body["approval"]["tool"] == "cancel_order"
    assert body["approval"]["args_hash"] == approval.tool_call.args_hash
    assert body["approval"]["url"].endswith(reverse("approval_detail", args=[approval.pk]))
    assert "ORD-1001" not in request["body"].decode()  # arguments only as their keyed hash
    timestamp = int(request["headers"]["X-Agentsite-Timestamp"])
    assert request["headers"]["X-Agentsite-Signature"] == signature(request["body"], "hook-secret", timestamp)


def test_automatic_decisions_send_nothing(launch, receiver):
    launch(DEMO_TASK, approval_policy="approve")
    assert receiver.requests == []


def test_a_failing_receiver_gets_the_notification_again(launch, receiver):
    receiver.script = [503, 502]
    launch(DEMO_TASK, approval_policy="ask")
    assert [e["event"] for e in receiver.events()] == ["approval.pending"] * 3
    assert len({e["approval"]["id"] for e in receiver.events()}) == 1


def test_a_webhook_to_a_private_address_is_refused_and_receives_nothing(launch, settings, eager_tasks, caplog):
    internal = Receiver()
    try:
        settings.WEBHOOK_URLS = [internal.url]  # 127.0.0.1 and not allowlisted
        settings.OUTBOUND_ALLOWLIST = []
        run = launch(DEMO_TASK, approval_policy="ask")
        assert run.status == Run.Status.AWAITING_APPROVAL  # the run is not harmed
        assert internal.requests == []
        assert "refused" in caplog.text and "127.0.0.1" in caplog.text
    finally:
        internal.stop()


# --- daily budget alerts -------------------------------------------------------------------------

NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


@pytest.fixture
def watched_agent(demo_data):
    return Agent.objects.create(name="billing", daily_token_alert=1000, daily_cost_alert_usd=0.50)


def test_crossing_a_daily_token_threshold_creates_one_alert_and_one_notification(watched_agent, receiver):
    make_run(watched_agent, created=NOW - timedelta(hours=2), tokens=(600, 300), cost=0.01)
    assert budget_alerts_check(now=NOW) == []  # 900 tokens: under 1000

    make_run(watched_agent, created=NOW - timedelta(hours=1), tokens=(100, 50), cost=0.01)
    [alert] = budget_alerts_check(now=NOW)
    assert (alert.kind, alert.threshold, alert.observed) == (BudgetAlert.Kind.TOKENS, 1000, 1050)
    assert budget_alerts_check(now=NOW) == []  # once per agent, day and kind

    [event] = receiver.events()
    assert event["event"] == "budget.alert"
    assert event["alert"] == {
        "agent": "billing", "day": "2026-11-29", "kind": BudgetAlert.Kind.TOKENS, "threshold": 1000, "observed": 1050,
        "url": event["alert"]["url"],
    }


def test_cost_threshold_counts_only_todays_runs(watched_agent):
    make_run(watched_agent, created=NOW - timedelta(days=1), cost=5.0)  # yesterday
    assert budget_alerts_check(now=NOW) == []
    make_run(watched_agent, created=NOW - timedelta(minutes=5), cost=0.75)
    [alert] = budget_alerts_check(now=NOW)
    assert alert.kind == BudgetAlert.Kind.COST and alert.observed == pytest.approx(0.75)
    # The next day starts again from zero.
    assert budget_alerts_check(now=NOW + timedelta(days=1)) == []


def test_agents_without_thresholds_never_alert(demo_data):
    agent = Agent.objects.get(name="demo")
    make_run(agent, created=NOW, tokens=(10**6, 10**6), cost=100.0)
    assert budget_alerts_check(now=NOW) == []


def test_alerts_are_listed_on_the_metrics_page(watched_agent):
    make_run(watched_agent, created=NOW, tokens=(5000, 0))
    budget_alerts_check(now=NOW)
    user = User.objects.create_user("vic")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(user)
    page = client.get(reverse("metrics")).content.decode()
    assert page.count('class="budget-alert"') == 1
    assert "billing" in page and "5,000" in page


def test_thresholds_are_set_on_the_agent_form(demo_data):
    from runs.web.forms.agents import AgentForm

    assert {"daily_token_alert", "daily_cost_alert_usd"} <= set(AgentForm().fields)
    base = {"name": "ops", "system_prompt": "Be brief.", "max_iterations": 5, "repeat_limit": 2,
            "max_wall_seconds": 60, "max_tokens": 1000, "max_cost_usd": 1, "first_tool_choice": "auto",
            "later_tool_choice": "auto"}
    form = AgentForm({**base, "daily_token_alert": "5000", "daily_cost_alert_usd": "2.5"})
    assert form.is_valid(), form.errors
    agent = form.save()
    assert (agent.daily_token_alert, agent.daily_cost_alert_usd) == (5000, 2.5)
    bad = AgentForm({**base, "name": "ops2", "daily_token_alert": "0", "daily_cost_alert_usd": "-1"})
    assert set(bad.errors) == {"daily_token_alert", "daily_cost_alert_usd"}


# --- an agent's model endpoint gets the same guard ---------------------------------------------


def test_an_agent_endpoint_on_a_private_address_is_refused_before_any_request(launch, script, settings):
    from tests.notifications.test_notifications import Receiver

    internal = Receiver()
    try:
        run = launch("hello", models=["gpt-x"], base_url=f"http://127.0.0.1:{internal.port}/v1")
        assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
        assert "refused" in run.stop_detail and "127.0.0.1" in run.stop_detail
        assert internal.requests == []
        settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{internal.port}"]  # a local model server, on purpose
        run = launch("hello", models=["gpt-x"], base_url=f"http://127.0.0.1:{internal.port}/v1")
        assert internal.requests  # now it is asked (and answers nonsense, which is another failure)
    finally:
        internal.stop()


def test_an_agent_endpoint_whose_name_resolves_elsewhere_after_the_check_reaches_nothing(
    launch, script, settings, monkeypatch
):
    # DNS rebinding: the first answer (the check when the run starts) is an allowlisted address,
    # every later one an internal address (127.0.0.2, a receiver that records what reaches it).
    import socket

    internal = Receiver(host="127.0.0.2")
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{internal.port}"]
    real_getaddrinfo, answers = socket.getaddrinfo, []

    def rebinding_getaddrinfo(host, *args, **kwargs):
        if host not in ("models.rebind.test", b"models.rebind.test"):
            return real_getaddrinfo(host, *args, **kwargs)
        answers.append("127.0.0.1" if not answers else "127.0.0.2")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[-1], internal.port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    try:
        run = launch("hello", models=["gpt-x"], base_url=f"http://models.rebind.test:{internal.port}/v1")
    finally:
        internal.stop()
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "127.0.0.2" in run.stop_detail and "refused" in run.stop_detail
    assert internal.requests == []
    assert len(answers) >= 2  # the connection did ask again, and was refused on the second answer

