"""Destructive calls wait for a decision."""

from runs.models import Approval, Run, ToolCall
from runs.supervision.approvals import decide
from tests.engine.loop_contract.support import call, calls, result_for
from toolsapp.models import Order

# --- 11. destructive tools need a decision ---------------------------------------------------------


def test_destructive_call_parks_the_run_until_someone_decides(launch):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.PENDING
    assert approval.tool_call.tool_name == "cancel_order"
    assert approval.tool_call.status == ToolCall.Status.AWAITING_APPROVAL
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN


def test_approve_policy_runs_the_destructive_call(launch):
    run = launch("Cancel order ORD-1001", approval_policy="approve")
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer.startswith("Cancelled order ORD-1001")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.APPROVED and approval.automatic


def test_reject_policy_reaches_the_model_as_an_operator_rejection(launch, script):
    model = script(
        calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")), {"content": "ok"}
    )
    run = launch("cancel it", models=[model], approval_policy="reject")
    result = result_for(script.requests(model)[1], "c1")
    assert result["ok"] is False
    assert result["error"].startswith("rejected by operator: ")
    assert len(result["error"]) > len("rejected by operator: ")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.REJECTED


def test_operator_rejection_with_reason_reaches_the_model(launch, monkeypatch, alice):
    from runs.engine.loop import run_advance
    from runs.supervision.approvals.decide import approval_decide

    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)
    run = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="too risky")
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert "I did not cancel order ORD-1001" in run.answer
    assert "rejected by operator: too risky" in run.answer
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    cancel = ToolCall.objects.get(run=run, tool_name="cancel_order")
    assert cancel.result == {"ok": False, "error": "rejected by operator: too risky"}


def test_operator_approval_lets_the_call_run(launch, monkeypatch, alice):
    from runs.engine.loop import run_advance
    from runs.supervision.approvals.decide import approval_decide

    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)
    run = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=alice, approve=True)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer.startswith("Cancelled order ORD-1001")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED


def test_history_is_resent_in_full_when_a_parked_run_resumes(launch, script, monkeypatch, alice):
    from runs.engine.loop import run_advance
    from runs.supervision.approvals.decide import approval_decide

    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)
    model = script(
        calls(call("lookup_order", {"order_id": "ORD-1003"}, "c1")),
        calls(call("cancel_order", {"order_id": "ORD-1003", "reason": "customer asked"}, "c2")),
        {"content": "Cancelled."},
    )
    run = launch("cancel ORD-1003", models=[model])
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=True)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    requests = script.requests(model)
    assert len(requests) == 3
    before, after = requests[1]["messages"], requests[2]["messages"]
    assert after[: len(before)] == before
    assert [m["role"] for m in after[len(before):]] == ["assistant", "tool"]
    assert result_for(requests[2], "c2")["result"]["cancelled"] is True
    assert requests[2]["tools"] == requests[0]["tools"]
