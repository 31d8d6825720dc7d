"""Approval rules in the API: CRUD with versions, validation in words, who may do what, and the
preview that saves nothing."""
import pytest
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import ApprovalRule, ApprovalRuleVersion, Run
from tests.support.approval_fixtures import make_user

RULE = {
    "name": "cancel ORD orders", "tool_pattern": "cancel_order", "action": "approve", "agent": "demo",
    "conditions": [{"path": "$.order_id", "op": "matches", "value": "^ORD-"}], "position": 10,
}


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


@pytest.fixture
def admin(demo_data):
    return api(make_user("ada", "admins"))


def test_admin_creates_reads_changes_and_deletes_a_rule_each_change_a_version(admin):
    created = admin.post("/api/v1/rules/", RULE, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["version"], body["updated_by_name"], body["agent"], body["conditions"]) == (1, "ada", "demo", RULE["conditions"])
    url = f"/api/v1/rules/{body['id']}/"

    assert admin.get("/api/v1/rules/").json()["results"][0]["name"] == "cancel ORD orders"
    changed = admin.patch(url, {"action": "ask_two"}, format="json")
    assert (changed.status_code, changed.json()["version"], changed.json()["action"]) == (200, 2, "ask_two")
    replaced = admin.put(url, {**RULE, "name": "cancel orders", "agent": None}, format="json")
    assert (replaced.status_code, replaced.json()["version"], replaced.json()["agent"]) == (200, 3, None)

    assert admin.delete(url).status_code == 204
    assert admin.get(url).status_code == 404
    assert not ApprovalRule.objects.exists()
    history = ApprovalRuleVersion.objects.filter(rule_key=body["id"]).order_by("version")
    assert [(v.version, v.change) for v in history] == [(1, "created"), (2, "updated"), (3, "updated"), (4, "deleted")]


def test_the_versions_of_a_rule_are_its_audit_trail(admin):
    rule_id = admin.post("/api/v1/rules/", RULE, format="json").json()["id"]
    admin.patch(f"/api/v1/rules/{rule_id}/", {"enabled": False}, format="json")

    versions = admin.get(f"/api/v1/rules/{rule_id}/versions/").json()["results"]

    assert [(v["version"], v["change"], v["changed_by_name"]) for v in versions] == [(2, "updated", "ada"), (1, "created", "ada")]
    assert versions[0]["snapshot"]["enabled"] is False and versions[1]["snapshot"]["enabled"] is True


@pytest.mark.parametrize("changes,field,message", [
    ({"conditions": [{"path": "$.amount", "op": "lt", "value": "fifty"}]}, "conditions", "Condition 1: lt compares with a number."),
    ({"conditions": {"path": "$.amount"}}, "conditions", "Conditions must be a list."),
    ({"conditions": [{"path": "$.x", "op": "matches", "value": "(unclosed"}]}, "conditions", "Condition 1: not an RE2 pattern"),
    ({"tool_pattern": " "}, "tool_pattern", "A tool name or a pattern"),
    ({"action": "ask_group"}, "group", "'Ask a named group' needs the group whose members decide."),
    ({"action": "approve_all"}, "action", "is not a valid choice"),
    ({"agent": "nobody"}, "agent", "does not exist"),
])
def test_a_rule_that_cannot_work_is_a_400_in_words(admin, changes, field, message):
    response = admin.post("/api/v1/rules/", {**RULE, **changes}, format="json")

    assert response.status_code == 400
    assert message in " ".join(response.json()["errors"][field])
    assert response.json()["detail"].startswith(f"{field}: ")
    assert not ApprovalRule.objects.exists()


def test_viewers_and_operators_read_rules_and_only_admins_write_them(admin, demo_data):
    rule_id = admin.post("/api/v1/rules/", RULE, format="json").json()["id"]
    for role in ("viewers", "operators"):
        client = api(make_user(f"someone-{role}", role))
        assert client.get("/api/v1/rules/").status_code == 200
        assert client.get(f"/api/v1/rules/{rule_id}/versions/").status_code == 200
        assert client.post("/api/v1/rules/", RULE, format="json").status_code == 403
        assert client.patch(f"/api/v1/rules/{rule_id}/", {"enabled": False}, format="json").status_code == 403
        assert client.delete(f"/api/v1/rules/{rule_id}/").status_code == 403
        assert client.post("/api/v1/rules/preview/", RULE, format="json").status_code == 403
    assert APIClient().get("/api/v1/rules/").status_code == 401
    assert ApprovalRule.objects.get().version == 1


def test_preview_counts_what_the_rule_would_have_done_and_saves_nothing(admin, launch):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL

    response = admin.post("/api/v1/rules/preview/", {"tool_pattern": "cancel_order", "action": "reject"}, format="json")

    assert response.status_code == 200, response.json()
    counts = response.json()
    assert (counts["considered"], counts["matched"], counts["reject"], counts["not_matched"]) == (1, 1, 1, 0)
    assert counts["examples"][0]["run_id"] == run.pk
    assert not ApprovalRule.objects.exists() and not ApprovalRuleVersion.objects.exists()

    other = admin.post("/api/v1/rules/preview/", {"tool_pattern": "get_*", "action": "approve"}, format="json").json()
    assert (other["matched"], other["not_matched"]) == (0, 1)
    bad = admin.post("/api/v1/rules/preview/", {"conditions": [{"path": "", "op": "eq"}]}, format="json")
    assert bad.status_code == 400 and "Condition 1: a JSON path" in bad.json()["errors"]["conditions"][0]


def test_the_launcher_is_an_account_given_and_read_back_by_its_current_username(admin, demo_data):
    bob = make_user("bob", "operators")
    created = admin.post("/api/v1/rules/", {**RULE, "launched_by": "bob"}, format="json")
    assert created.status_code == 201, created.json()
    rule = ApprovalRule.objects.get()
    assert rule.launched_by_id == bob.pk and created.json()["launched_by_unresolved"] == ""

    bob.username = "robert"
    bob.save()
    assert admin.get(f"/api/v1/rules/{rule.pk}/").json()["launched_by"] == "robert"
    unknown = admin.patch(f"/api/v1/rules/{rule.pk}/", {"launched_by": "bob"}, format="json")
    assert unknown.status_code == 400 and "does not exist" in " ".join(unknown.json()["errors"]["launched_by"])

    ApprovalRule.objects.filter(pk=rule.pk).update(launched_by=None, launched_by_unresolved="carol")
    kept = admin.patch(f"/api/v1/rules/{rule.pk}/", {"action": "ask_two"}, format="json").json()
    assert (kept["launched_by"], kept["launched_by_unresolved"]) == (None, "carol")  # still matches nobody
    chosen = admin.patch(f"/api/v1/rules/{rule.pk}/", {"launched_by": "robert"}, format="json").json()
    assert (chosen["launched_by"], chosen["launched_by_unresolved"]) == ("robert", "")


def test_a_whole_value_condition_is_written_and_described_in_the_openapi_schema(admin):
    whole = [{"path": "$.order_id", "op": "fullmatch", "value": r"ORD-\d+"}]
    created = admin.post("/api/v1/rules/", {**RULE, "conditions": whole}, format="json")
    assert created.status_code == 201 and created.json()["conditions"] == whole

    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    rule_schema = document["components"]["schemas"]["Rule"]["properties"]
    condition = rule_schema["conditions"]["items"]["properties"]
    assert condition["op"]["enum"] == ["eq", "ne", "lt", "gt", "in", "fullmatch", "matches", "present", "absent", "outside"]
    assert "the whole value must match" in condition["value"]["description"]
    assert "username" in rule_schema["launched_by"]["description"]
    assert rule_schema["launched_by_unresolved"]["readOnly"] is True
