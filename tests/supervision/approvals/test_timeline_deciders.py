"""Who decided a call, as the run's timeline events carry it: the run page builds its call cards
from these events, live and after a reload (the timeline is replayed from the stored events), so
a call a rule or a grant approved must say so in them, not only in the approval row."""
import pytest

from runs.engine.loop import run_advance
from runs.models import Approval, ApprovalRule, RunEvent
from runs.supervision.approvals.checks import IDENTICAL
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.approvals.gate import EXPIRED, approval_end_undecided
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import make_user, pending_approval
from tests.support.timeline_replay import replay_all


@pytest.fixture(autouse=True)
def _no_worker(demo_data, no_dispatch):
    """Decisions here are followed by run_advance in the test itself."""


def cancel(order_id, call_id):
    return calls(call("cancel_order", {"order_id": order_id, "reason": "customer asked"}, call_id))


def approval_events(run, call_id) -> list[dict]:
    """The approvals the call's events carried, in order (call events and approval events)."""
    pk = Approval.objects.get(run=run, tool_call__call_id=call_id).tool_call_id
    seen = []
    for kind, data in RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", "data"):
        if kind == "call" and data["pk"] == pk and data.get("approval"):
            seen.append(data["approval"])
        elif kind == "approval" and data["call_pk"] == pk:
            seen.append(data)
    return seen


def test_the_events_of_a_call_a_rule_approved_name_the_rule_and_its_version(launch, script):
    rule = ApprovalRule.objects.create(name="cancels of ORD-1001", action="approve", tool_pattern="cancel_*")
    ApprovalRule.objects.filter(pk=rule.pk).update(version=3)
    run = launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001", "c1"), {"content": "Cancelled."})])

    carried = approval_events(run, "c1")
    assert carried, "the call's events carry its approval"
    first_decided = next(a for a in carried if a["status"] == Approval.Status.APPROVED)
    assert (first_decided["decided_by"], first_decided["rule_name"], first_decided["rule_version"],
            first_decided["automatic"]) == ("rule 'cancels of ORD-1001' v3", "cancels of ORD-1001", 3, True)
    # After a reload the page rebuilds the call from the stored events: the same words.
    _, replayed, _ = replay_all(run.pk)
    pk = Approval.objects.get(run=run).tool_call_id
    assert replayed[pk]["approval"]["decided_by"] == "rule 'cancels of ORD-1001' v3"


def test_the_events_of_a_call_a_grant_approved_say_a_grant_and_the_grant_has_its_event(launch, script):
    alice = make_user("alice", "operators")
    model = script(cancel("ORD-1003", "first"), cancel("ORD-1003", "again"), {"content": "done"})
    run = launch("Cancel ORD-1003", models=[model])
    first = pending_approval(run)
    approval_decide(approval_id=first.pk, user=alice, approve=True, grant=IDENTICAL)
    run_advance(run_id=run.pk)

    again = Approval.objects.get(run=run, tool_call__call_id="again")
    assert (again.status, again.automatic) == (Approval.Status.APPROVED, True) and again.grant_id
    assert approval_events(run, "again")[-1]["decided_by"] == "a grant for this run"
    assert approval_events(run, "first")[-1]["decided_by"] == "alice"
    _, replayed, grants = replay_all(run.pk)
    assert replayed[again.tool_call_id]["approval"]["decided_by"] == "a grant for this run"
    assert [(g["tool"], g["args_hash"], g["by"], g["revoked"]) for g in grants.values()] == [
        ("cancel_order", first.tool_call.args_hash, "alice", False)]


def test_a_call_a_rule_only_sent_to_a_person_is_not_said_decided_by_the_rule(launch, script, alice):
    ApprovalRule.objects.create(name="cancels ask", action="ask", tool_pattern="cancel_*")
    expired = pending_approval(launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001", "c1"))]))
    decided = pending_approval(launch("Cancel order ORD-1003", models=[script(cancel("ORD-1003", "c1"))]))
    assert (expired.rule_name, decided.rule_name) == ("cancels ask", "cancels ask")

    approval_end_undecided(approval=expired, reason=EXPIRED)
    approval_decide(approval_id=decided.pk, user=alice, approve=False, reason="no")

    assert approval_events(expired.run, "c1")[-1]["decided_by"] == "expiry"
    assert approval_events(decided.run, "c1")[-1]["decided_by"] == "alice"
