"""The engine's hooks (runs/engine/hooks.py): how it reaches supervision and observability."""
import pytest
from django.core.exceptions import ImproperlyConfigured

from runs.engine import hooks
from runs.models import Approval, Run, ToolCall
from runs.supervision.approvals import gate
from runs.supervision.approvals.decide import approval_decide

CANCEL = "Please cancel order ORD-1001, the customer asked."


def test_the_approval_gate_and_listeners_are_registered_at_start():
    assert hooks._gate is gate.approval_gate
    assert gate.approvals_close in hooks._listeners["run_ending"]
    # The search text first: the rollups hold the day's lock until the commit.
    # Then what other apps listen to: an experiment's case is scored (evals, in its own AppConfig).
    assert [f.__name__ for f in hooks._listeners["run_ended"]] == ["index_ended_run", "mark_uncounted", "case_run_ended"]


def test_without_a_gate_a_destructive_call_is_never_run(monkeypatch, launch):
    # The engine fails closed: with nothing to ask, the call that needs asking does not run.
    monkeypatch.setattr(hooks, "_gate", None)
    with pytest.raises(ImproperlyConfigured):
        hooks.call_gate(call=None, tool=None, config={}, recorder=None)
    run = launch(CANCEL)
    call = ToolCall.objects.get(run=run, tool_name="cancel_order")
    assert call.status != ToolCall.Status.SUCCEEDED
    assert run.status == Run.Status.FAILED
    assert not Approval.objects.filter(run=run).exists()


def test_a_listener_subscribed_twice_is_called_once(monkeypatch, launch, alice, no_dispatch):
    seen = []
    monkeypatch.setitem(hooks._listeners, "run_ended", list(hooks._listeners["run_ended"]))
    listener = lambda *, run, fields: seen.append(fields.get("status"))  # noqa: E731
    hooks.subscribe("run_ended", listener)
    hooks.subscribe("run_ended", listener)
    run = launch(CANCEL)
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=False, reason="no")
    from runs.engine.loop import run_advance

    run_advance(run_id=run.pk)
    assert seen == [Run.Status.SUCCEEDED]
