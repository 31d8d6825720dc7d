"""Fault matrix: an approval that expires while an operator approves it.

Expiry counts as a rejection. Whichever lands first wins, in one place (a row lock and a status
check in `approval_decide`), and the tool runs only under an approval that says "approved":
no destructive effect without a matching approval, whatever the timing.
"""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.engine.loop import run_advance
from runs.models import Approval, Run, RunEvent, ToolCall
from runs.supervision.approvals.decide import AlreadyDecided, approval_decide, approvals_expire
from tests.support.approval_fixtures import pending_approval
from tests.support.timeline_replay import mismatches
from toolsapp.models import Order

CANCEL = "Cancel order ORD-1001"


def finish(run) -> Run:
    run_advance(run_id=run.pk)  # what the worker does with the dispatched run
    run.refresh_from_db()
    return run


def assert_effect_matches_the_decision(run, approval) -> None:
    order = Order.objects.get(order_id="ORD-1001")
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    if approval.status == Approval.Status.APPROVED:
        assert (order.status, call.status) == (Order.Status.CANCELLED, ToolCall.Status.SUCCEEDED)
    else:
        assert (order.status, call.status) == (Order.Status.OPEN, ToolCall.Status.REJECTED), (approval.status, call.error)
    assert RunEvent.objects.filter(run=run, kind="approval").count() == 1, "one decision, one event"
    assert mismatches(run.pk) == []


def test_an_approval_given_after_the_expiry_counts_as_expired_and_nothing_runs(launch, alice, no_dispatch):
    run = launch(CANCEL, approval_policy="ask")
    approval = pending_approval(run)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    decided = approval_decide(approval_id=approval.pk, user=alice, approve=True)  # nobody expired it yet
    assert (decided.status, decided.decided_by) == (Approval.Status.EXPIRED, None)
    run = finish(run)

    assert run.status == Run.Status.SUCCEEDED
    assert_effect_matches_the_decision(run, decided)
    assert "expired" in ToolCall.objects.get(pk=approval.tool_call_id).error


@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor == "sqlite", reason="the race needs real row locks (PostgreSQL)")
def test_the_sweep_expiring_and_an_operator_approving_at_once_give_one_decision_and_a_matching_effect(
    launch, alice, no_dispatch
):
    outcomes = []
    # The first two are steered to each side (the operator approves before the expiry and the
    # sweep comes after; the sweep expires it and the operator clicks after), so both outcomes are
    # checked every time; in the others the operator clicks a little before, at, or a little after
    # the expiry while the sweep runs at it.
    for offset in ("operator first", "sweep first", -0.02, -0.005, 0.0, 0.0, 0.005, 0.02):
        Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.OPEN, cancel_idempotency_key="")
        run = launch(CANCEL, approval_policy="ask")
        approval = pending_approval(run)
        # Steered: an expiry far ahead for the operator who comes first, already due for the sweep.
        ahead = {"operator first": 60_000, "sweep first": 0}.get(offset, 30)
        expiry = timezone.now() + timedelta(milliseconds=ahead)
        Approval.objects.filter(pk=approval.pk).update(expires_at=expiry)
        barrier = threading.Barrier(2)
        operator_done, sweep_done = threading.Event(), threading.Event()
        errors = []

        def until_expiry(extra: float = 0.0) -> float:
            return max(0.0, (expiry - timezone.now()).total_seconds() + extra)

        def operator(offset=offset):
            try:
                barrier.wait(5)
                if offset == "sweep first":
                    sweep_done.wait(5)
                elif offset != "operator first":
                    time.sleep(until_expiry(offset))
                approval_decide(approval_id=approval.pk, user=alice, approve=True)
            except AlreadyDecided:
                pass
            except Exception as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)
            finally:
                operator_done.set()
                connection.close()

        def sweep(offset=offset):
            try:
                barrier.wait(5)
                if offset == "operator first":
                    operator_done.wait(5)
                else:
                    time.sleep(until_expiry())
                approvals_expire()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                sweep_done.set()
                connection.close()

        threads = [threading.Thread(target=operator), threading.Thread(target=sweep)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        approval.refresh_from_db()
        assert approval.status != Approval.Status.PENDING
        run = finish(run)
        assert_effect_matches_the_decision(run, approval)
        outcomes.append(approval.status)
    print("decisions:", outcomes)
    assert outcomes[:2] == [Approval.Status.APPROVED, Approval.Status.EXPIRED], outcomes
    assert set(outcomes) == {Approval.Status.APPROVED, Approval.Status.EXPIRED}
