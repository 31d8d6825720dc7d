"""The state now: a destructive tool's read-only check (Tool.state_check) runs when its call
reaches the queue, and again when a card is opened whose answer is older than a minute; the card
says what it answered and when, or that it failed, and the decision never waits for it."""
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agentsite.celery import app as celery_app
from runs.models import Approval, CallEvidence, Run
from runs.supervision.evidence import state_checks
from runs.supervision.evidence.state_checks import state_check_run, state_check_soon
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import pending_approval
from toolsapp.executors.python import python_handler
from toolsapp.models import Order, Tool

CHECK = {"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}


@python_handler("state_check_test_slow", read_only=True)
def _slow(args, ctx):
    time.sleep(1)
    return {"status": "late"}


@pytest.fixture(autouse=True)
def _cancel_is_checked(demo_data, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(state_check=CHECK)


@pytest.fixture
def eager_tasks():
    """Tasks run in this process as they are queued (after the commit that queues them)."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def sent(monkeypatch):
    """The checks queued, instead of run: [approval id, ...]."""
    queued = []
    monkeypatch.setattr(state_checks, "task_send", lambda name, *args: queued.append((name, *args)))
    return queued


def parked(launch, script, order_id="ORD-1001", tools=("lookup_order", "cancel_order")) -> Approval:
    """A run whose model asks to cancel `order_id`, parked on its approval."""
    model = script(calls(call("cancel_order", {"order_id": order_id, "reason": "customer asked"}, "c1")))
    run = launch(f"Cancel {order_id}", models=[model], tools=list(tools), customer="acme")
    assert run.status == Run.Status.AWAITING_APPROVAL
    return pending_approval(run)


def card(client, user, approval) -> str:
    client.force_login(user)
    response = client.get(reverse("approval_detail", args=[approval.pk]))
    assert response.status_code == 200
    return response.content.decode()


def state_of(approval) -> dict:
    return CallEvidence.objects.get(approval=approval).state


def test_the_check_runs_when_the_call_reaches_the_queue_and_the_card_shows_it(launch, script, eager_tasks, client, alice):
    Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.CANCELLED)
    approval = parked(launch, script)
    evidence = CallEvidence.objects.get(approval=approval)
    assert evidence.state["ok"] is True
    assert evidence.state["summary"] == "ORD-1001: cancelled"
    assert '"status": "cancelled"' in evidence.state["answer"]
    assert evidence.state_checked_at is not None and evidence.state_requested_at is None
    page = card(client, alice, approval)
    assert "ORD-1001: cancelled</strong>, checked <time" in page
    assert " s ago</time>" in page
    assert "lookup_order's whole answer</summary>" in page
    assert '&quot;status&quot;: &quot;<mark class="read-state">cancelled</mark>&quot;' in page, "marked as in a result read"


def test_a_failing_check_says_so_and_the_decision_still_works(launch, script, eager_tasks, client, alice):
    approval = parked(launch, script, order_id="ORD-2001")  # another customer's order: the lookup fails
    assert state_of(approval) == {"tool": "lookup_order", "ok": False, "arguments": {"order_id": "ORD-2001"},
                                  "error": "order ORD-2001 not found for this customer"}
    page = card(client, alice, approval)
    assert "The check failed: order ORD-2001 not found for this customer" in page
    response = client.post(reverse("approval_decide", args=[approval.pk]), {
        "decision": "reject", "reason": "not ours", "args_hash": approval.tool_call.args_hash,
    })
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REJECTED


def test_a_check_that_times_out_says_so(launch, script, eager_tasks):
    Tool.objects.create(name="slow_lookup", handler="state_check_test_slow", timeout_seconds=0.05,
                        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}})
    Tool.objects.filter(name="cancel_order").update(state_check={**CHECK, "tool": "slow_lookup"})
    approval = parked(launch, script)
    assert state_of(approval)["error"] == "the tool timed out after 0.05 seconds"


@pytest.mark.parametrize("change, error", [
    (lambda: Tool.objects.filter(name="cancel_order").update(state_check={**CHECK, "tool": "cancel_order"}),
     "refused: cancel_order is destructive, and a state check may only read"),
    (lambda: Tool.objects.filter(name="cancel_order").update(state_check={**CHECK, "tool": "no_such_tool"}),
     "there is no tool named no_such_tool"),
    (lambda: Tool.objects.filter(name="lookup_order").update(enabled=False), "lookup_order is disabled"),
    (lambda: Tool.objects.filter(name="cancel_order").update(state_check={**CHECK, "arguments": {"order_id": "$.order"}}),
     "the call has no value at $.order"),
])
def test_a_check_that_may_not_run_is_refused_in_words(launch, script, eager_tasks, change, error):
    change()
    approval = parked(launch, script, tools=["cancel_order"])  # the check need not be the agent's
    assert state_of(approval)["ok"] is False
    assert state_of(approval)["error"] == error
    # A destructive tool named as a check never runs: the order is as it was.
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN


def test_a_stale_check_is_asked_again_when_the_card_is_opened(launch, script, sent, client, alice):
    approval = parked(launch, script)
    assert sent == [(state_checks.CHECK_TASK, approval.pk)]  # when it reached the queue
    assert "The state now: checking…" in card(client, alice, approval)  # asked, not answered yet
    state_check_run(approval_id=approval.pk)  # what the worker does with it
    assert "ORD-1001: open" in card(client, alice, approval)
    assert len(sent) == 1  # fresh: not asked again
    # A minute later the order was cancelled elsewhere; opening the card asks again (no check in the request).
    CallEvidence.objects.filter(approval=approval).update(state_checked_at=timezone.now() - timedelta(seconds=61))
    Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.CANCELLED)
    page = card(client, alice, approval)
    assert "ORD-1001: open" in page and "checking again…" in page
    assert sent[1:] == [(state_checks.CHECK_TASK, approval.pk)]
    with CaptureQueriesContext(connection) as queries:
        page = card(client, alice, approval)
    assert len(sent) == 2 and "checking again…" in page  # asked within the minute: not again, and said so
    assert not [q["sql"] for q in queries if "state_requested_at" in q["sql"] and q["sql"].startswith("UPDATE")]
    state_check_run(approval_id=approval.pk)
    page = card(client, alice, approval)
    assert "ORD-1001: cancelled" in page and "checking" not in page


def test_a_lost_check_is_asked_again_after_a_minute(launch, script, sent, client, alice):
    approval = parked(launch, script)  # its task was lost: nobody ran it
    minute_ago = timezone.now() - timedelta(seconds=61)
    Approval.objects.filter(pk=approval.pk).update(requested_at=minute_ago)
    CallEvidence.objects.filter(approval=approval).update(state_requested_at=minute_ago)
    assert "The state now: checking…" in card(client, alice, approval)
    assert sent == [(state_checks.CHECK_TASK, approval.pk)] * 2
    card(client, alice, approval)
    assert len(sent) == 2


def test_no_check_and_no_evidence_show_nothing_and_ask_nothing(launch, script, sent, client, alice):
    Tool.objects.filter(name="cancel_order").update(state_check={})
    approval = parked(launch, script)
    assert sent == []
    assert 'class="state-check' not in card(client, alice, approval)
    CallEvidence.objects.filter(approval=approval).delete()
    with transaction.atomic():
        state_check_soon(approval)
    state_check_run(approval_id=approval.pk)
    assert not CallEvidence.objects.filter(approval=approval).exists()  # none is made


def test_a_decided_calls_check_does_not_run(launch, script, sent):
    approval = parked(launch, script)
    Approval.objects.filter(pk=approval.pk).update(status=Approval.Status.REJECTED, decided_at=timezone.now())
    state_check_run(approval_id=approval.pk)
    evidence = CallEvidence.objects.get(approval=approval)
    assert evidence.state == {} and evidence.state_requested_at is None


def test_the_answer_is_masked_as_the_check_tool_says(launch, script, eager_tasks, client, alice):
    Tool.objects.filter(name="lookup_order").update(sensitive_fields=["total"])
    approval = parked(launch, script)
    assert '"total": "••••"' in state_of(approval)["answer"]
    assert "499.00" not in state_of(approval)["answer"] and "499.00" not in card(client, alice, approval)


# --- the summary, over plain data ------------------------------------------------------------------


@pytest.mark.parametrize("answer, arguments, summary", [
    ({"order_id": "ORD-1001", "status": "cancelled"}, {"order_id": "ORD-1001"}, "ORD-1001: cancelled"),
    ({"status": "open"}, {"store": "north", "order_id": "ORD-7"}, "north, ORD-7: open"),
    ({"status": "open"}, {}, "open"),
    ({"state": "open"}, {"order_id": "ORD-7"}, '{"state": "open"}'),
    ("x" * 130, {}, "x" * 120 + "…"),
])
def test_the_summary_names_what_was_asked_and_its_status(answer, arguments, summary):
    assert state_checks.state_summary(answer, arguments) == summary
