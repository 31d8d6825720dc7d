"""The state check through a REAL Celery worker (see tests/conftest.py): the worker that parks the
run on its cancel_order queues the check once that commits, and a worker runs it; the card then
shows what lookup_order says of the order now."""
import pytest

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, CallEvidence, Run
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Order, Tool

pytestmark = pytest.mark.worker


def test_a_worker_checks_the_order_when_the_cancel_reaches_the_queue(
    celery_worker_proc, demo_data, script, wait_for, wait_for_run, client, alice
):
    Tool.objects.filter(name="cancel_order").update(
        state_check={"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}})
    Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.CANCELLED)
    celery_worker_proc(concurrency=2)
    model = script(calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")))
    run = run_create(agent=Agent.objects.get(name="demo"), task="Cancel ORD-1001", customer="acme",
                     overrides={"models": [model], "tools": ["lookup_order", "cancel_order"]})
    run_dispatch(run_id=run.pk)
    approval = pending_approval(wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL, timeout=60))
    evidence = wait_for(lambda: CallEvidence.objects.filter(approval=approval, state_checked_at__isnull=False).first(),
                        timeout=30, message="the worker's state check")
    assert evidence.state["summary"] == "ORD-1001: cancelled" and evidence.state_requested_at is None
    client.force_login(alice)
    page = client.get(f"/approvals/{approval.pk}/").content.decode()
    assert "ORD-1001: cancelled</strong>, checked <time" in page
