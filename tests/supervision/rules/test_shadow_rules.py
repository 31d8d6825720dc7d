"""Rules in shadow, through the loop (a scripted model over HTTP, real tools and orders): people
decide as if the rule did not exist, what it would have decided is recorded, and its page and
the API compare that with what people decided."""
import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Approval, ApprovalRule, ApprovalRuleVersion, Run, ShadowDecision
from runs.supervision.approvals.decide import approval_decide
from runs.supervision.rules.changes import rule_create
from runs.supervision.rules.history import rule_history
from runs.supervision.rules.shadow_report import shadow_report
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api
from toolsapp.models import Order

DESK, LAMP = "ORD-1001", "ORD-1003"


def cancel(order_id, call_id="c1"):
    return calls(call("cancel_order", {"order_id": order_id, "reason": "customer asked"}, call_id))


def shadow_rule(ada, name="cancels", action="approve", **fields) -> ApprovalRule:
    return rule_create(data={"name": name, "tool_pattern": "cancel_order", "action": action, "shadow": True, **fields},
                       user=ada)


@pytest.fixture
def ada(demo_data):
    return make_user("ada", "admins")


def test_a_rule_in_shadow_decides_nothing_and_records_what_it_would_have_decided(launch, script, ada):
    rule = shadow_rule(ada)
    run = launch(f"Cancel order {DESK}", models=[script(cancel(DESK))])

    assert run.status == Run.Status.AWAITING_APPROVAL, "people decide as if the rule did not exist"
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic, approval.rule_id, approval.note) == (
        Approval.Status.PENDING, False, None, "")
    assert Order.objects.get(order_id=DESK).status == Order.Status.OPEN
    [shadow] = ShadowDecision.objects.all()
    assert (shadow.approval_id, shadow.rule_key, shadow.rule_version, shadow.outcome) == (
        approval.pk, rule.pk, 1, ShadowDecision.Outcome.APPROVE)
    assert shadow.detail == "automatic: rule 'cancels' v1"


def test_a_rule_in_shadow_is_judged_in_its_place_among_the_rules_that_act(launch, script, ada):
    rule_create(data={"name": "all cancels to two", "tool_pattern": "cancel_*", "action": "ask_two", "position": 50},
                user=ada)
    after = shadow_rule(ada, "after the acting rule", position=60)
    before = shadow_rule(ada, "before the acting rule", action="reject", position=40, reason="not today")
    launch(f"Cancel order {DESK}", models=[script(cancel(DESK))])

    approval = Approval.objects.get()
    assert (approval.required_approvals, approval.rule_name) == (2, "all cancels to two")
    [shadow] = ShadowDecision.objects.all()
    assert (shadow.rule_key, shadow.outcome, shadow.detail) == (before.pk, "reject", "not today")
    assert after.pk not in ShadowDecision.objects.values_list("rule_key", flat=True), \
        "the acting rule is tried first: the later rule would have decided nothing"


def test_safeguards_hold_back_what_a_rule_in_shadow_would_approve(launch, script, ada):
    shadow_rule(ada)
    launch("Cancel my lamp order", models=[script(cancel(LAMP))])  # ORD-1003 never seen by the run

    [shadow] = ShadowDecision.objects.all()
    assert shadow.outcome == ShadowDecision.Outcome.BLOCKED
    assert shadow.detail == "Rule 'cancels' v1 would approve, but the arguments hold ORD-1003, which this run has never seen."


def test_the_report_compares_with_what_people_decided(launch, script, ada, alice, bob, no_dispatch):
    rule = shadow_rule(ada)
    runs = [launch(f"Cancel order {DESK}", models=[script(cancel(DESK))]) for _ in range(4)]
    first, second, third, fourth = (Approval.objects.get(run=run) for run in runs)

    approval_decide(approval_id=first.pk, user=alice, approve=True)
    approval_decide(approval_id=second.pk, user=bob, approve=False, reason="the customer changed her mind")
    approval_decide(approval_id=third.pk, user=alice, approve=True,
                    arguments=f'{{"order_id": "{DESK}", "reason": "duplicate"}}', args_hash=third.tool_call.args_hash)
    # the fourth is still waiting

    [version] = shadow_report(rule.pk).versions
    assert (version.seen, version.agreed, version.disagreed, version.undecided) == (4, 1, 2, 1)
    assert version.agreement_percent == 33
    disagreements = shadow_report(rule.pk).disagreements
    assert [(d.decision.approval_id, d.people) for d in disagreements] == [
        (third.pk, "approved by alice with edited arguments"),
        (second.pk, "rejected by bob: the customer changed her mind"),
    ]
    assert fourth.pk not in {d.decision.approval_id for d in disagreements}


def test_putting_a_rule_in_shadow_is_one_click_versioned_and_its_page_shows_the_record(launch, script, ada, alice,
                                                                                     no_dispatch):
    rule = rule_create(data={"name": "cancels", "tool_pattern": "cancel_order", "action": "approve"}, user=ada)
    admin = Client()
    admin.force_login(ada)

    response = admin.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "on"}, follow=True)
    assert "is in shadow (version 2)" in response.content.decode()
    rule.refresh_from_db()
    assert (rule.shadow, rule.version) == (True, 2)
    [change, _created] = rule_history(rule_key=rule.pk)
    assert change.changed == ["shadow"] and change.version.changed_by_name == "ada"

    run = launch(f"Cancel order {DESK}", models=[script(cancel(DESK))])
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=False, reason="no")
    page = admin.get(reverse("rule_edit", args=[rule.pk])).content.decode()
    assert "This rule is in shadow." in page
    assert 'data-count="disagreed">1<' in page and "rejected by alice: no" in page

    admin.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "off", "next": "edit"})
    rule.refresh_from_db()
    assert (rule.shadow, rule.version) == (True, 2), "it would approve what alice rejected: confirmed by name first"
    rejected = Approval.objects.get(run=run)
    admin.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "off", "next": "edit", "confirm_saved_over": str(rejected.pk)})
    rule.refresh_from_db()
    assert (rule.shadow, rule.version) == (False, 3)
    run = launch(f"Cancel order {DESK}", models=[script(cancel(DESK), {"content": "Cancelled."})])
    assert run.status == Run.Status.SUCCEEDED, "acting again, the rule approves"
    assert ShadowDecision.objects.count() == 1


def test_only_people_who_manage_rules_may_put_one_in_shadow(ada, demo_data):
    rule = rule_create(data={"name": "cancels", "tool_pattern": "cancel_order", "action": "approve"}, user=ada)
    for name, group in (("olga", "operators"), ("victor", "viewers")):
        client = Client()
        client.force_login(make_user(name, group))
        assert client.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "on"}).status_code == 403
    assert Client().post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "on"}).status_code == 302  # to sign in
    rule.refresh_from_db()
    assert (rule.shadow, rule.version) == (False, 1)
    assert ApprovalRuleVersion.objects.filter(rule_key=rule.pk).count() == 1


def test_the_api_sets_shadow_and_reads_the_report(launch, script, ada, alice, no_dispatch):
    client = api(ada)
    created = client.post("/api/v1/rules/", {"name": "cancels", "tool_pattern": "cancel_order", "action": "reject",
                                             "shadow": True}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["shadow"] is True
    rule_id = created.json()["id"]
    run = launch(f"Cancel order {DESK}", models=[script(cancel(DESK))])
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=True)

    report = client.get(f"/api/v1/rules/{rule_id}/shadow/").json()
    assert report["versions"][0] | {"outcomes": None} == {
        "version": 1, "seen": 1, "agreed": 0, "disagreed": 1, "agreement_percent": 0, "left_to_people": 0,
        "decided_otherwise": 0, "undecided": 0, "outcomes": None}
    assert report["disagreements"][0]["people"] == "approved by alice"
    assert client.get("/api/v1/rules/999999/shadow/").status_code == 404


def test_a_version_recorded_before_shadow_existed_does_not_read_as_a_shadow_change(ada):
    rule = rule_create(data={"name": "cancels", "tool_pattern": "cancel_order"}, user=ada)
    first = ApprovalRuleVersion.objects.get(rule_key=rule.pk)
    first.snapshot.pop("shadow")
    first.save()
    from runs.supervision.rules.changes import rule_update
    rule_update(rule=rule, data={"position": 5}, user=ada)
    assert rule_history(rule_key=rule.pk)[0].changed == ["position"]
