"""The backtest: a rule as edited, replayed over the calls people decided in its project, beside
what they decided. Disagreements first (the ones that could do harm before the others), each with
its card's evidence; agreements counted; the window, the project and masking kept."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Agent, Run
from runs.supervision.approvals.gate import CRASH_NOTE
from runs.supervision.rules.backtest import (
    APPROVED_EDITED,
    APPROVED_REJECTED,
    REJECTED_APPROVED,
    rule_backtest,
)
from runs.supervision.rules.changes import rule_create
from runs.supervision.rules.preview import draft_spec
from tests.projects import project
from tests.supervision.rules.backtest_calls import EVIDENCE, Decided
from toolsapp.models import Tool

APPROVE_CANCELS = {"name": "cancel orders", "tool_pattern": "cancel_order", "action": "approve"}


@pytest.fixture
def decided(demo_data):
    return Decided()


def replay(data: dict, decided: Decided, **kwargs):
    return rule_backtest(draft_spec(data), project_id=decided.agent.project_id, **kwargs)


def test_a_call_a_person_rejected_that_the_rule_would_approve_is_listed_first_with_its_evidence(decided):
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="approved", edited=True, by="amy")
    rejected = decided.add("cancel_order", {"order_id": "ORD-1001"}, decision="rejected", by="rita")
    decided.add("cancel_order", {"order_id": "ORD-2"}, decision="approved", by="amy")

    result = replay(APPROVE_CANCELS, decided)

    first = result.disagreements[0]
    assert (first.kind, first.approval, first.run, first.tool, first.person) == (
        APPROVED_REJECTED, rejected.pk, decided.run.pk, "cancel_order", "rita")
    assert first.words == "would have approved what a person rejected"
    assert first.would == "approved automatically by rule 'cancel orders' as edited"
    assert first.reason == "rita said no" and first.arguments == '{"order_id": "ORD-1001"}'
    assert first.evidence["said"] == EVIDENCE["said"]
    assert first.evidence["values"] == EVIDENCE["values"]
    read = first.evidence["read"][0]
    assert read["tool"] == "lookup_order" and '"status": "cancelled"' in read["preview"]
    assert len(read["preview"]) == 300 and "END" not in read["preview"] and read["chars"] == 450
    assert [d.kind for d in result.disagreements] == [APPROVED_REJECTED, APPROVED_EDITED]
    assert result.rejected_over == [{"approval": rejected.pk, "run": decided.run.pk, "tool": "cancel_order",
                                     "person": "rita"}]


def test_agreements_and_what_is_counted_apart(decided):
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="approved")
    decided.add("cancel_order", {"order_id": "ORD-2"}, decision="approved")
    decided.add("cancel_order", {"order_id": "ORD-3"}, decision="rejected", unseen=["ORD-3"])  # held: unseen
    decided.add("cancel_order", {"order_id": "ORD-4"}, decision="approved", automatic=True)
    for status in ("pending", "expired", "closed"):
        decided.add("cancel_order", {"order_id": "ORD-5"}, decision=status)
    decided.add("create_ticket", {"title": "printer"}, decision="rejected")  # no rule: a person, as happened
    decided.add("cancel_order", "{not json", decision="approved")

    result = replay(APPROVE_CANCELS, decided)

    counts = {k: v for k, v in result.as_dict().items() if isinstance(v, int)}
    assert counts == {
        "days": 30, "considered": 5, "agreed": 2, "agreed_approved": 2, "agreed_rejected": 0, "left_to_people": 2,
        "held_by_safeguard": 1, "disagreed": 0, "approved_rejected": 0, "approved_edited": 0, "rejected_approved": 0,
        "automatic": 1, "undecided": 3, "unreadable": 1,
    }
    assert result.disagreements == [] and result.rules == [
        {"label": "rule 'cancel orders' as edited", "name": "cancel orders", "decided": 2 + 1}]


def test_a_reject_rule_agrees_with_rejections_and_disagrees_with_approvals(decided):
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")
    approved = decided.add("cancel_order", {"order_id": "ORD-2"}, decision="approved", by="amy")

    result = replay({**APPROVE_CANCELS, "action": "reject", "reason": "never"}, decided)

    assert (result.agreed_rejected, result.rejected_approved) == (1, 1)
    only = result.disagreements[0]
    assert (only.kind, only.approval, only.person_decision) == (REJECTED_APPROVED, approved.pk, "approved")
    assert only.would == "rejected automatically by rule 'cancel orders' as edited: never"


def test_a_call_asked_again_after_a_crash_counts_once_by_its_newest_approval(decided):
    first = decided.add("cancel_order", {"order_id": "ORD-1"}, decision="approved")
    decided.add("cancel_order", None, call=first.tool_call, decision="rejected", note=CRASH_NOTE)

    result = replay(APPROVE_CANCELS, decided)

    # Outcome unknown: one person, whatever a rule says; the approved first asking is not counted.
    assert (result.considered, result.left_to_people, result.held_by_safeguard, result.agreed) == (1, 1, 1, 0)


def test_only_the_last_30_days_count_and_the_window_is_a_setting(decided, settings):
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected", days_ago=29)
    decided.add("cancel_order", {"order_id": "ORD-2"}, decision="rejected", days_ago=31)

    assert replay(APPROVE_CANCELS, decided).approved_rejected == 1
    settings.BACKTEST_DAYS = 60
    assert replay(APPROVE_CANCELS, decided).approved_rejected == 2
    settings.BACKTEST_DAYS = 7
    assert replay(APPROVE_CANCELS, decided).considered == 0


def test_another_projects_decisions_are_never_counted_or_shown(decided):
    beta = project("Beta")
    theirs = Agent.objects.get(name="demo")
    theirs.pk, theirs.name, theirs.project = None, "billing-bot", beta
    theirs.save()
    Decided(theirs).add("cancel_order", {"order_id": "ORD-9"}, decision="rejected", by="bea")
    ours = decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")

    result = replay(APPROVE_CANCELS, decided)

    assert result.considered == 1 and [d.approval for d in result.disagreements] == [ours.pk]
    assert "bea" not in str(result.as_dict()) and "ORD-9" not in str(result.as_dict())
    assert rule_backtest(draft_spec(APPROVE_CANCELS), project_id=beta.pk).approved_rejected == 1


def test_the_listing_masks_the_tools_sensitive_fields(decided):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    decided.add("cancel_order", {"order_id": "ORD-1", "reason": "card 4111"}, decision="rejected")

    listed = replay(APPROVE_CANCELS, decided).as_dict()["disagreements"][0]

    assert listed["arguments"] == '{"order_id": "ORD-1", "reason": "••••"}' and "4111" not in str(listed)


def test_the_projects_other_rules_before_it_still_decide(decided):
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")
    decided.add("cancel_order", {"order_id": "VIP-2"}, decision="rejected")
    rule_create(data={"name": "never VIP", "tool_pattern": "cancel_order", "action": "reject", "position": 1,
                      "conditions": [{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]}, user=None)

    result = replay({**APPROVE_CANCELS, "position": 50}, decided)

    assert (result.agreed_rejected, result.approved_rejected) == (1, 1)
    assert [r["decided"] for r in result.rules] == [1, 1]
    # Placed before it, the draft decides both.
    assert replay({**APPROVE_CANCELS, "position": 0}, decided).approved_rejected == 2


def test_a_save_is_over_the_rejections_the_rule_itself_would_approve_not_another_rules(decided):
    theirs = decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")
    rule_create(data={**APPROVE_CANCELS, "name": "approve all cancels", "position": 50}, user=None)

    never_vip = replay({"name": "never VIP", "tool_pattern": "cancel_order", "action": "reject", "position": 1,
                        "conditions": [{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]}, decided)

    assert [d.approval for d in never_vip.disagreements] == [theirs.pk]  # shown: the set would approve it
    assert never_vip.disagreements[0].would == "approved automatically by rule 'approve all cancels' v1"
    assert never_vip.rejected_over == []  # but not this rule's doing


def test_an_edit_of_a_saved_rule_replaces_it_in_the_set(decided):
    rule = rule_create(data={**APPROVE_CANCELS, "action": "reject"}, user=None)
    decided.add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")

    result = rule_backtest(draft_spec({"action": "approve"}, rule=rule), project_id=rule.project_id)

    assert result.approved_rejected == 1 and len(result.rules) == 1


def test_a_condition_on_outside_content_reads_the_calls_evidence(decided):
    decided.add("send_email", {"to": "a@x.test"}, decision="rejected", outside=["$.to"])
    decided.add("send_email", {"to": "b@x.test"}, decision="rejected")
    outside = {"name": "outside", "tool_pattern": "*", "action": "approve",
               "conditions": [{"path": "$.to", "op": "outside"}]}

    assert replay(outside, decided).approved_rejected == 1


def test_the_calls_are_read_in_a_fixed_number_of_queries(decided):
    for n in range(3):
        decided.add("cancel_order", {"order_id": f"ORD-{n}"}, decision="rejected")
    with CaptureQueriesContext(connection) as few:
        replay(APPROVE_CANCELS, decided)
    for n in range(10):
        decided.add("cancel_order", {"order_id": f"ORD-{n}"}, decision="approved", edited=n % 2 == 0)
    with CaptureQueriesContext(connection) as many:
        result = replay(APPROVE_CANCELS, decided)

    assert result.disagreed == 3 + 5 and len(many) == len(few) <= 5


def test_the_runs_own_policy_routes_as_in_the_loop(decided):
    approve_all = Run.objects.create(agent=decided.agent, task="t", config={"approval_policy": "approve"})
    decided.add("create_ticket", {"title": "a"}, decision="rejected", run=approve_all, unseen=["T-9"])  # held
    plain = decided.add("create_ticket", {"title": "b"}, decision="rejected", run=approve_all)

    result = replay({"name": "elsewhere", "tool_pattern": "refund_*", "action": "reject"}, decided)

    assert (result.left_to_people, result.held_by_safeguard, result.approved_rejected) == (1, 1, 1)
    assert result.disagreements[0].approval == plain.pk
    assert result.disagreements[0].would == "approved automatically by the run's policy"
    assert result.rejected_over == [], "the policy approved it, not the rule being saved"
