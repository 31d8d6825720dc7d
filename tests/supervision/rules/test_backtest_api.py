"""The backtest in the API: creating or changing a rule that would have approved calls people
rejected answers 409 naming them unless the request confirms them (the version records them);
a whole rule set replayed over one project's decisions, for the people who manage its rules."""
import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import Agent, ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.changes import rule_create
from tests.projects import member, project
from tests.supervision.rules.backtest_calls import Decided
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool

RULE = {"name": "cancels", "tool_pattern": "cancel_order", "action": "approve"}
NEVER_VIP = {"name": "never VIP", "tool_pattern": "cancel_order", "action": "reject", "reason": "VIP orders stay",
             "conditions": [{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]}


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


@pytest.fixture
def admin(demo_data):
    return api(make_user("ada", "admins"))


@pytest.fixture
def history(demo_data):
    decided = Decided()
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["note"])
    decided.rejected = decided.add("cancel_order", {"order_id": "ORD-1001", "note": "card 4111"}, decision="rejected",
                                   by="rita")
    decided.vip = decided.add("cancel_order", {"order_id": "VIP-7"}, decision="rejected", by="rita")
    decided.approved = decided.add("cancel_order", {"order_id": "ORD-8"}, decision="approved", by="amy")
    return decided


def test_creating_a_rule_over_a_rejection_answers_409_naming_it_until_confirmed(admin, history):
    refused = admin.post("/api/v1/rules/", RULE, format="json")

    assert refused.status_code == 409 and not ApprovalRule.objects.exists()
    calls = refused.json()["saved_over"]
    assert [c["approval"] for c in calls] == [history.vip.pk, history.rejected.pk]  # newest first
    assert calls[1] == {"approval": history.rejected.pk, "run": history.run.pk, "tool": "cancel_order", "person": "rita"}
    assert f"approval {history.rejected.pk} (run {history.run.pk}, cancel_order, rejected by rita)" in refused.json()["detail"]
    wrong = admin.post("/api/v1/rules/", {**RULE, "confirm_saved_over": [history.rejected.pk]}, format="json")
    assert wrong.status_code == 409, "one of the two confirmed is not a confirmation of both"

    created = admin.post("/api/v1/rules/", {**RULE, "confirm_saved_over": [history.rejected.pk, history.vip.pk]},
                         format="json")

    assert created.status_code == 201 and "confirm_saved_over" not in created.json()
    [version] = admin.get(f"/api/v1/rules/{created.json()['id']}/versions/").json()["results"]
    assert [c["approval"] for c in version["saved_over"]] == [history.vip.pk, history.rejected.pk]


def test_changing_a_rule_so_it_decides_asks_the_same_and_a_rule_that_agrees_saves_at_once(admin, history):
    trial = rule_create(data={**RULE, "shadow": True}, user=None)
    url = f"/api/v1/rules/{trial.pk}/"

    assert admin.patch(url, {"reason": "x"}, format="json").status_code == 200  # in shadow: decides nothing
    refused = admin.patch(url, {"shadow": False}, format="json")
    assert refused.status_code == 409 and len(refused.json()["saved_over"]) == 2
    ids = [c["approval"] for c in refused.json()["saved_over"]]
    assert admin.patch(url, {"shadow": False, "confirm_saved_over": ids}, format="json").status_code == 200
    assert len(ApprovalRuleVersion.objects.filter(rule_key=trial.pk).order_by("-version")[0].saved_over) == 2
    assert admin.post("/api/v1/rules/", {**NEVER_VIP, "position": 1}, format="json").status_code == 201


def test_the_preview_carries_the_backtest_with_the_rejection_first_and_its_arguments_masked(admin, history):
    preview = admin.post("/api/v1/rules/preview/", RULE, format="json").json()

    backtest = preview["backtest"]
    assert (backtest["approved_rejected"], backtest["agreed_approved"], backtest["days"]) == (2, 1, 30)
    first = backtest["disagreements"][0]
    assert first["kind"] == "approved_rejected" and first["person"] == "rita"
    assert "4111" not in str(backtest) and '"note": "••••"' in backtest["disagreements"][1]["arguments"]
    assert first["evidence"]["said"] == "The order is open, so I will cancel it."


def test_a_whole_rule_set_is_replayed_first_match_wins(admin, history):
    answer = admin.post("/api/v1/rules/backtest/", {"project": "default", "rules": [NEVER_VIP, RULE]}, format="json")

    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["agreed_rejected"], body["approved_rejected"], body["agreed_approved"]) == (1, 1, 1)
    assert [r["decided"] for r in body["rules"]] == [1, 2]
    assert [d["approval"] for d in body["disagreements"]] == [history.rejected.pk]
    assert body["disagreements"][0]["would"] == "approved automatically by rule 'cancels' as edited"
    # The order is the set's: the same rules the other way round approve the VIP order too.
    reversed_set = admin.post("/api/v1/rules/backtest/", {"project": "default", "rules": [RULE, NEVER_VIP]},
                              format="json").json()
    assert reversed_set["approved_rejected"] == 2
    left_out = admin.post("/api/v1/rules/backtest/", {"project": "default", "rules": [{**RULE, "shadow": True}]},
                          format="json").json()
    assert (left_out["left_out"], left_out["approved_rejected"]) == ([0], 0)


def test_a_draft_in_the_set_is_checked_as_a_rule_is(admin, history):
    answer = admin.post("/api/v1/rules/backtest/", {"project": "default", "rules": [
        RULE, {**RULE, "conditions": [{"path": "$.x", "op": "lt", "value": "fifty"}]}]}, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"]["rules"]["1"]["conditions"] == ["Condition 1: lt compares with a number."]


def test_only_the_projects_rule_managers_backtest_it_and_see_its_decisions_only(demo_data):
    alpha, beta = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=alpha)
    theirs = Agent.objects.get(pk=demo.pk)
    theirs.pk, theirs.name, theirs.project = None, "billing-bot", beta
    theirs.save()
    ours = Decided(Agent.objects.get(name="demo")).add("cancel_order", {"order_id": "ORD-1"}, decision="rejected")
    Decided(theirs).add("cancel_order", {"order_id": "ORD-SECRET"}, decision="rejected", by="bea")
    ada, olga = api(member("ada", alpha, "admins")), api(member("olga", alpha, "operators"))
    body = {"project": "alpha", "rules": [RULE]}

    mine = ada.post("/api/v1/rules/backtest/", body, format="json").json()
    assert [d["approval"] for d in mine["disagreements"]] == [ours.pk] and "SECRET" not in str(mine)
    refused = ada.post("/api/v1/rules/backtest/", {**body, "project": "beta"}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"]["project"] == ["No project 'beta'."]
    assert "SECRET" not in refused.content.decode()
    assert olga.post("/api/v1/rules/backtest/", body, format="json").status_code == 403
    member("olga", beta, "admins")  # an admin elsewhere is still an operator here
    assert api(member("olga", alpha, "operators")).post("/api/v1/rules/backtest/", body, format="json").status_code == 403


def test_the_schema_documents_the_rule_set_backtest_and_the_409(demo_data, tmp_path):
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    backtest = document["paths"]["/api/v1/rules/backtest/"]["post"]
    assert "first match wins" in backtest["description"] and "200" in backtest["responses"]
    assert "409" in document["paths"]["/api/v1/rules/"]["post"]["responses"]
    assert "409" in document["paths"]["/api/v1/rules/{id}/"]["patch"]["responses"]
    assert "confirm_saved_over" in document["components"]["schemas"]["RuleRequest"]["properties"]
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
