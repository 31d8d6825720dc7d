"""The approval on its call's OpenTelemetry span: who decided (the kind, never a name), the wait
from asking and, for a person, from the card appearing, whether the arguments were edited, how
many twins the decider was shown, and whether a nudge asked for a reason."""
from datetime import timedelta

import pytest

from runs.engine.loop import run_advance
from runs.models import Approval, CallEvidence, NudgeShown, Run
from runs.observability.tracing.approval_events import approval_attributes, decision_facts
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import call, calls
from tests.observability.tracing.test_tracing import by_name, collector, flushed, levers_here  # noqa: F401 (fixtures)
from tests.projects import project
from tests.supervision.quality.seed import S, agent_in, at, decided, run_of

CANCEL = call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")


@pytest.mark.django_db
def test_the_attributes_say_how_a_call_was_decided():
    run = run_of(agent_in(project("Shop")))
    person = decided(run, asked=at(5), shown=30, took=3, by=_user("alice"))
    CallEvidence.objects.filter(pk=person.pk).update(twins_at_decision=[{"approval": 1}, {"approval": 2}])
    NudgeShown.objects.create(approval=person, user_name="alice", streak=3)
    Approval.objects.filter(pk=person.pk).update(edited_args_hash="e" * 64)
    by_rule = decided(run, asked=at(6), took=0, automatic=True)
    Approval.objects.filter(pk=by_rule.pk).update(rule_name="desk", rule_version=2)
    rejected = decided(run, status=S.REJECTED, asked=at(7), took=8, by=_user("bob"), evidence=False)
    approvals = list(Approval.objects.filter(pk__in=[person.pk, by_rule.pk, rejected.pk]).order_by("pk"))
    decision_facts(approvals)
    person, by_rule, rejected = (approval_attributes(a) for a in approvals)
    assert person == {
        "agentsite.approval.status": "approved", "agentsite.approval.decider": "person",
        "agentsite.approval.wait_ms": 33000.0, "agentsite.approval.decide_ms": 3000.0,
        "agentsite.approval.edited": True, "agentsite.approval.twins_shown": 2, "agentsite.approval.nudged": True,
    }
    assert by_rule == {"agentsite.approval.status": "approved", "agentsite.approval.decider": "rule",
                       "agentsite.approval.wait_ms": 0.0, "agentsite.approval.edited": False,
                       "agentsite.approval.twins_shown": 0}
    # No evidence kept: the card appeared when it was asked.
    assert rejected["agentsite.approval.decide_ms"] == 8000.0 and rejected["agentsite.approval.nudged"] is False
    assert "alice" not in str(person) and "bob" not in str(rejected)


def test_an_exported_span_carries_them(collector, launch, script, alice, levers_here):  # noqa: F811
    receiver = collector()
    run = launch("Cancel ORD-1001", models=[script(calls(CANCEL), {"content": "Cancelled."})])
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    shown = approval.requested_at + timedelta(seconds=1)
    CallEvidence.objects.update_or_create(approval=approval, defaults={"tool_name": "cancel_order", "shown_at": shown})
    approval_decide(approval_id=approval.pk, user=alice, approve=True)
    CallEvidence.objects.filter(pk=approval.pk).update(twins_at_decision=[{"approval": 99, "run": 7, "state": "waiting"}])
    Approval.objects.filter(pk=approval.pk).update(decided_at=shown + timedelta(seconds=4))
    run_advance(run_id=run.pk)
    (cancel,) = by_name(flushed(receiver), "execute_tool ")
    attributes = cancel.attributes
    assert attributes["agentsite.approval.decider"] == "person"
    assert attributes["agentsite.approval.decide_ms"] == pytest.approx(4000.0)
    assert attributes["agentsite.approval.wait_ms"] == pytest.approx(5000.0)
    assert (attributes["agentsite.approval.twins_shown"], attributes["agentsite.approval.edited"],
            attributes["agentsite.approval.nudged"]) == (1, False, False)
    decided_event = cancel.events[-1]
    assert decided_event[0] == "agentsite.approval.decided" and decided_event[2]["agentsite.approval.twins_shown"] == 1


def _user(name: str):
    from django.contrib.auth.models import User

    return User.objects.create_user(name)
