"""A quorum: "ask several people" needs N approvals from different people, and one of them from
each of its named groups (one from Finance and one from Support), with the two-person rule's
guarantees: each person once, never the launcher, one rejection ends it, votes at the same moment
counted exactly once. Through the loop (a scripted model over HTTP), the decision service, the
API and the queue page."""
import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from runs.models import Approval, ApprovalRule, ApprovalVote, RunEvent
from runs.supervision.approvals.decide import NotAllowed, approval_decide
from runs.supervision.approvals.quorum import groups_uncovered
from runs.supervision.rules.changes import InvalidRule, rule_create, rule_update
from runs.supervision.rules.history import rule_history
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import make_user
from tests.support.supervision_fixtures import EDITED, parked
from tests.support.threads import together
from tests.web.api.test_api import api
from toolsapp.models import Tool


@pytest.fixture
def teams(demo_data):
    finance, support = Group.objects.create(name="finance"), Group.objects.create(name="support")
    people = {}
    for name, groups in {"fay": [finance], "fred": [finance], "sam": [support], "both": [finance, support],
                         "olga": []}.items():
        people[name] = make_user(name, "operators")
        people[name].groups.add(*groups)
    people["finance"], people["support"] = finance, support
    return people


def quorum_rule(teams, needed=2, groups=("finance", "support")):
    return rule_create(data={"name": "refunds need finance and support", "tool_pattern": "cancel_order",
                             "action": "ask_quorum", "approvals_needed": needed,
                             "quorum_groups": [teams[g] for g in groups]},
                       user=admin())


def admin():
    from django.contrib.auth.models import User
    return User.objects.filter(username="ada").first() or make_user("ada", "admins")


def asked(launch, script) -> Approval:
    model = script(calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "asked"}, "c1")))
    run = launch("Cancel order ORD-1001", models=[model])
    return Approval.objects.get(run=run)


def approve(user, approval):
    return approval_decide(approval_id=approval.pk, user=user, approve=True)


def test_the_rule_asks_for_the_quorum_and_only_one_from_each_group_decides(launch, script, teams, no_dispatch):
    quorum_rule(teams)
    approval = asked(launch, script)
    assert (approval.status, approval.required_approvals, approval.rule_name) == (
        "pending", 2, "refunds need finance and support")
    assert approval.quorum_groups == [teams["finance"].pk, teams["support"].pk]

    assert approve(teams["fay"], approval).status == "pending"
    second = approve(teams["fred"], approval)
    assert (second.status, second.approvals_given) == ("pending", 2), "two from finance: support still missing"
    third = approve(teams["sam"], approval)
    assert (third.status, third.decided_by_name, third.approvals_given) == ("approved", "sam", 3)
    assert no_dispatch == [approval.run_id]


def test_a_person_in_both_groups_covers_only_one(launch, teams, no_dispatch):
    approval = parked(launch)
    Approval.objects.filter(pk=approval.pk).update(
        required_approvals=2, quorum_groups=[teams["finance"].pk, teams["support"].pk])
    assert approve(teams["both"], approval).status == "pending"
    decided = approve(teams["fay"], approval)  # fay covers finance, so "both" covers support
    assert decided.status == "approved"


def test_people_outside_the_groups_the_launcher_and_second_votes_are_refused(launch, teams, no_dispatch):
    approval = parked(launch)
    Approval.objects.filter(pk=approval.pk).update(
        required_approvals=2, quorum_groups=[teams["finance"].pk, teams["support"].pk])
    approval.run.created_by = teams["sam"]
    approval.run.save(update_fields=["created_by"])

    with pytest.raises(NotAllowed, match="Only members of finance or support may decide this call."):
        approve(teams["olga"], approval)
    with pytest.raises(NotAllowed, match="Only members of finance or support"):
        approval_decide(approval_id=approval.pk, user=teams["olga"], approve=False, reason="no")
    with pytest.raises(NotAllowed, match="You launched this run"):
        approve(teams["sam"], approval)
    approve(teams["fay"], approval)
    with pytest.raises(NotAllowed, match="You already approved"):
        approve(teams["fay"], approval)
    rejected = approval_decide(approval_id=approval.pk, user=teams["fred"], approve=False, reason="not this one")
    assert (rejected.status, rejected.decided_by_name) == ("rejected", "fred"), "one rejection ends it"


def test_an_approval_of_arguments_an_edit_replaced_does_not_count_toward_the_quorum(launch, teams, no_dispatch):
    approval = parked(launch)
    Approval.objects.filter(pk=approval.pk).update(
        required_approvals=3, quorum_groups=[teams["finance"].pk, teams["support"].pk])
    Tool.objects.filter(name="cancel_order").update(allow_argument_edits=True)
    approve(teams["fay"], approval)  # the model's arguments
    edited = approval_decide(approval_id=approval.pk, user=teams["sam"], approve=True, arguments=EDITED)
    assert (edited.status, edited.approvals_given) == ("pending", 1), "the edit counts its own vote only"

    # fay never saw the edited arguments: fred's is the second approval of them, not the third.
    second = approval_decide(approval_id=approval.pk, user=teams["fred"], approve=True, args_hash=edited.edited_args_hash)
    assert (second.status, second.approvals_given) == ("pending", 2)
    third = approval_decide(approval_id=approval.pk, user=teams["fay"], approve=True,  # now for the edited ones
                            args_hash=edited.edited_args_hash)
    assert (third.status, third.decided_by_name, third.edited_args_hash) == ("approved", "fay", edited.edited_args_hash)


@pytest.mark.django_db(transaction=True)
def test_the_last_two_approvals_at_the_same_moment_decide_exactly_once(launch, teams, no_dispatch):
    for round_number in range(4):
        approval = parked(launch)
        Approval.objects.filter(pk=approval.pk).update(
            required_approvals=3, quorum_groups=[teams["finance"].pk, teams["support"].pk])
        approve(teams["fay"], approval)
        pair = (teams["fred"], teams["sam"]) if round_number % 2 == 0 else (teams["sam"], teams["fred"])

        outcomes = together(*(lambda user=user: approve(user, approval) for user in pair))

        assert sorted(o.status for o in outcomes) == ["approved", "pending"], outcomes
        approval.refresh_from_db()
        assert (approval.status, approval.approvals_given) == ("approved", 3)
        assert ApprovalVote.objects.filter(approval=approval).count() == 3
        events = [e.data["status"] for e in RunEvent.objects.filter(run=approval.run, kind="approval").order_by("seq")]
        assert events == ["pending", "pending", "approved"]
    assert len(no_dispatch) == 4


def test_matching_people_to_groups():
    assert groups_uncovered([1, 2], {"a": {1, 2}}) == [2]
    assert groups_uncovered([1, 2], {"a": {1, 2}, "b": {1}}) == []
    assert groups_uncovered([1, 2, 3], {"a": {1, 2}, "b": {2, 3}, "c": {1}}) == []
    assert groups_uncovered([1, 2], {"a": {1}, "b": {1}, "c": set()}) == [2]


def test_a_quorum_rule_is_checked_versioned_and_offered_by_the_api(teams):
    ada = admin()
    base = {"name": "q", "tool_pattern": "cancel_order", "action": "ask_quorum"}
    with pytest.raises(InvalidRule) as missing:
        rule_create(data=base, user=ada)
    assert "approvals_needed" in missing.value.errors
    with pytest.raises(InvalidRule) as too_many_groups:
        rule_create(data={**base, "approvals_needed": 2,
                          "quorum_groups": [teams["finance"], teams["support"], Group.objects.create(name="legal")]},
                    user=ada)
    assert too_many_groups.value.errors["quorum_groups"] == [
        "Each group gives one of the 2 approvals from a different person: at most 2 groups."]
    with pytest.raises(InvalidRule):
        rule_create(data={**base, "approvals_needed": 11}, user=ada)

    rule = quorum_rule(teams)
    assert rule.version == 1 and list(rule.quorum_groups.values_list("name", flat=True)) == ["finance", "support"]
    rule = rule_update(rule=rule, data={"quorum_groups": [teams["finance"]]}, user=ada)
    assert rule.version == 2 and rule_history(rule_key=rule.pk)[0].changed == ["quorum"]
    rule = rule_update(rule=rule, data={"action": "ask"}, user=ada)
    assert (rule.approvals_needed, rule.quorum_groups.count()) == (None, 0), "only a quorum keeps its count and groups"

    client = api(ada)
    made = client.post("/api/v1/rules/", {**base, "approvals_needed": 3, "quorum_groups": ["finance", "support"]},
                       format="json")
    assert made.status_code == 201, made.content
    assert (made.json()["approvals_needed"], made.json()["quorum_groups"]) == (3, ["finance", "support"])
    unknown = client.post("/api/v1/rules/", {**base, "approvals_needed": 3, "quorum_groups": ["nobody"]}, format="json")
    assert unknown.status_code == 400
    assert ApprovalRule.objects.filter(action="ask_quorum").count() == 1


def test_the_queue_says_which_groups_are_still_missing_and_who_may_not_decide(launch, script, teams, no_dispatch):
    quorum_rule(teams)
    approval = asked(launch, script)
    approve(teams["fay"], approval)

    page = Client()
    page.force_login(teams["sam"])
    text = page.get(reverse("approval_queue")).content.decode()
    assert "one from each of finance, support: still needs support" in text
    outsider = Client()
    outsider.force_login(teams["olga"])
    assert "Only members of finance or support may decide this call." in outsider.get(reverse("approval_queue")).content.decode()
