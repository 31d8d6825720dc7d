"""The REST API: authentication, the dashboard's permissions, runs, approvals, agents, tools,
metrics, exports and the OpenAPI document."""
import csv
import io
import json
import re
from html import unescape
from urllib.parse import parse_qs

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.engine.loop import run_advance
from runs.lifecycle import launch as launch_module
from runs.models import Agent, Approval, Run
from tests.support.approval_fixtures import make_user, pending_approval
from toolsapp.models import Tool

CANCEL_TASK = "Cancel order ORD-1001"
SECRET = "sk-live-9f8e7d6c5b4a-TOPSECRET"


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


@pytest.fixture
def admin(demo_data):
    return make_user("ada", "admins")


@pytest.fixture
def dispatched(monkeypatch):
    """No worker here: launches are recorded instead of handed to Celery."""
    sent = []
    monkeypatch.setattr(launch_module, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


def launch_via_api(client, **body):
    return client.post("/api/v1/runs/", {"agent": "demo", "task": "What's the weather in Lagos and London?", **body},
                       format="json")


# --- Authentication -------------------------------------------------------------------------------


def test_anonymous_requests_get_a_json_401(demo_data):
    response = APIClient().get("/api/v1/runs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert "credentials" in response.json()["detail"]


def test_a_token_from_username_and_password_opens_the_api(alice):
    response = APIClient().post("/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json")
    assert response.status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/v1/runs/").status_code == 200
    wrong = APIClient().post("/api/v1/token/", {"username": "alice", "password": "nope"}, format="json")
    assert wrong.status_code == 400 and "credentials" in wrong.json()["detail"]


def test_a_bad_token_is_refused(demo_data):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/v1/runs/")
    assert response.status_code == 401 and response.json()["detail"] == "Invalid token."


def test_a_browser_session_reads_but_must_send_its_csrf_token_to_write(alice, dispatched):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get("/api/v1/runs/").status_code == 200
    response = launch_via_api(client)
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Run.objects.exists() and dispatched == []


# --- Permissions, as on the dashboard -----------------------------------------------------------------


def test_a_viewer_reads_everything_but_cannot_launch_cancel_or_decide(launch, viewer, no_dispatch, dispatched):
    run = launch(CANCEL_TASK)
    approval = pending_approval(run)
    client = api(viewer)
    for path in ("/api/v1/runs/", f"/api/v1/runs/{run.pk}/", "/api/v1/approvals/", "/api/v1/metrics/",
                 "/api/v1/agents/", "/api/v1/tools/", "/api/v1/runs/export.jsonl"):
        assert client.get(path).status_code == 200, path
    refused = [
        launch_via_api(client),
        client.post(f"/api/v1/runs/{run.pk}/cancel/"),
        client.post(f"/api/v1/approvals/{approval.pk}/approve/"),
        client.post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "no"}, format="json"),
    ]
    assert [r.status_code for r in refused] == [403] * 4
    assert all(r.json()["detail"] == "You do not have permission to perform this action." for r in refused)
    run.refresh_from_db()
    approval.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL and approval.status == Approval.Status.PENDING
    assert Run.objects.count() == 1 and dispatched == [] and no_dispatch == []


def test_an_operator_cannot_manage_agents_or_tools(alice):
    client = api(alice)
    agent = Agent.objects.get(name="demo")
    tool = Tool.objects.get(name="get_weather")
    attempts = [
        client.post("/api/v1/agents/", {"name": "mine"}, format="json"),
        client.patch(f"/api/v1/agents/{agent.pk}/", {"max_iterations": 3}, format="json"),
        client.delete(f"/api/v1/agents/{agent.pk}/"),
        client.post("/api/v1/tools/", {"name": "t", "parameters": {"type": "object"}}, format="json"),
        client.patch(f"/api/v1/tools/{tool.pk}/", {"enabled": False}, format="json"),
        client.delete(f"/api/v1/tools/{tool.pk}/"),
    ]
    assert [r.status_code for r in attempts] == [403] * 6
    agent.refresh_from_db()
    tool.refresh_from_db()
    assert agent.max_iterations == 10 and tool.enabled
    assert not Agent.objects.filter(name="mine").exists() and not Tool.objects.filter(name="t").exists()


# --- Runs ------------------------------------------------------------------------------------------------


def test_launch_then_detail_shows_steps_and_calls_with_hashes(alice, dispatched):
    client = api(alice)
    response = launch_via_api(client, customer="globex", max_iterations=4)
    assert response.status_code == 201, response.json()
    body = response.json()
    run_id = body["run_id"]
    assert response["Location"].endswith(f"/api/v1/runs/{run_id}/")
    assert body["status"] == Run.Status.QUEUED and body["steps"] == [] and body["created_by"] == "alice"
    assert body["customer"] == "globex" and body["overrides"] == {"max_iterations": 4}
    assert dispatched == [run_id]

    run_advance(run_id=run_id)
    detail = client.get(f"/api/v1/runs/{run_id}/").json()
    assert detail["status"] == Run.Status.SUCCEEDED and detail["stop_reason"] == Run.StopReason.FINAL_ANSWER
    assert "Lagos" in detail["answer"]
    calls = [call for step in detail["steps"] for call in step["calls"]]
    assert sorted(call["tool"] for call in calls) == ["get_weather", "get_weather"]
    stored = {c.call_id: c.args_hash for c in Run.objects.get(pk=run_id).tool_calls.all()}
    assert {call["id"]: call["args_hash"] for call in calls} == stored
    assert all("arguments" not in call for call in calls)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"agent": "nobody"}, "agent"),
        ({"task": "   "}, "task"),
        ({"tools": ["no_such_tool"]}, "tools"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_cost_usd": -1}, "max_cost_usd"),
        ({"first_tool_choice": "always"}, "first_tool_choice"),
        ({"models": ["demo", ""]}, "models"),
        ({"models": ["demo\x00"]}, "models"),
    ],
)
def test_launch_refuses_bad_input_with_a_400_naming_the_field(alice, dispatched, body, field):
    response = launch_via_api(api(alice), **body)
    assert response.status_code == 400
    data = response.json()
    assert field in data["errors"] and data["detail"].startswith(f"{field}:")
    assert not Run.objects.exists() and dispatched == []


def test_a_model_name_may_contain_a_comma(alice, dispatched):
    # Providers allow any character in a model name; the launch keeps the list exactly as given.
    models = ["vendor/model,v2", "demo"]
    response = launch_via_api(api(alice), models=models)
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["run_id"])
    assert run.config["models"] == models and run.overrides["models"] == models


def test_unknown_ids_and_paths_are_json_404s(alice):
    client = api(alice)
    for path in ("/api/v1/runs/999999/", "/api/v1/agents/999999/", "/api/v1/nothing-here/"):
        response = client.get(path)
        assert response.status_code == 404 and response.json()["detail"], path
    assert client.post("/api/v1/runs/999999/cancel/").status_code == 404
    assert client.post("/api/v1/approvals/999999/approve/").status_code == 404


def test_history_filters_use_the_pages_parameter_names(launch, alice):
    weather = launch()
    parked = launch(CANCEL_TASK)
    client = api(alice)

    def ids(**params):
        response = client.get("/api/v1/runs/", params)
        assert response.status_code == 200, response.json()
        return [row["run_id"] for row in response.json()["results"]]

    assert ids() == [parked.pk, weather.pk]
    assert ids(status=Run.Status.AWAITING_APPROVAL) == [parked.pk]
    assert ids(tool="lookup_order") == [parked.pk]
    assert ids(q="weather") == [weather.pk]
    assert ids(agent=weather.agent_id, stop_reason=Run.StopReason.FINAL_ANSWER) == [weather.pk]
    page = client.get("/api/v1/runs/").json()
    assert page["count"] == 2 and page["count_is_exact"] and page["next"] is None
    assert page["results"][0]["agent"] == "demo" and page["results"][0]["stop_reason"] is None


@pytest.mark.parametrize(
    "params, field",
    [({"created_from": "yesterday"}, "created_from"), ({"status": "sleeping"}, "status"),
     ({"agent": "abc"}, "agent"), ({"created_from": "2026-03-10", "created_to": "2026-03-01"}, "created_to"),
     ({"page": "0"}, "page"), ({"page": "x"}, "page")],
)
def test_bad_filter_values_are_400s(alice, params, field):
    response = api(alice).get("/api/v1/runs/", params)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_cancel_a_queued_run_then_a_second_cancel_is_a_conflict(alice, dispatched):
    client = api(alice)
    run_id = launch_via_api(client).json()["run_id"]
    response = client.post(f"/api/v1/runs/{run_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["run"]["status"] == Run.Status.CANCELLED and "was cancelled" in response.json()["detail"]
    again = client.post(f"/api/v1/runs/{run_id}/cancel/")
    assert again.status_code == 409 and "already finished (cancelled)" in again.json()["detail"]


# --- Approvals ---------------------------------------------------------------------------------------


def test_pending_approvals_list_what_the_queue_shows(launch, alice):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    run = launch(CANCEL_TASK)
    listed = api(alice).get("/api/v1/approvals/").json()["results"]
    assert [item["id"] for item in listed] == [pending_approval(run).pk]
    item = listed[0]
    assert item["run_id"] == run.pk and item["tool"] == "cancel_order" and item["task"] == CANCEL_TASK
    # JSON, the sensitive field's value the mask as a string; the queue's text beside it, masked alike.
    assert item["arguments"] == {"order_id": "ORD-1001", "reason": "••••"}
    assert item["arguments_text"] == '{\n  "order_id": "ORD-1001",\n  "reason": ••••\n}'
    assert item["proposed_arguments"] is None and item["proposed_arguments_text"] is None
    assert item["unseen_identifiers"] == [] and not item["expired"]


def test_approve_then_the_second_decider_gets_a_409_naming_the_first(launch, alice, bob, no_dispatch):
    run = launch(CANCEL_TASK)
    approval = pending_approval(run)
    first = api(alice).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    assert first.status_code == 200
    assert first.json()["approval"]["status"] == Approval.Status.APPROVED
    assert first.json()["approval"]["decided_by"] == "alice"
    second = api(bob).post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "too late"}, format="json")
    assert second.status_code == 409
    assert second.json()["detail"].startswith("Already approved by alice at ")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by.username == "alice"
    assert no_dispatch == [run.pk]
    assert api(alice).get("/api/v1/approvals/").json()["results"] == []


def test_reject_with_a_reason_reaches_the_model(launch, alice, no_dispatch):
    run = launch(CANCEL_TASK)
    approval = pending_approval(run)
    response = api(alice).post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "customer changed their mind"},
                               format="json")
    assert response.status_code == 200
    assert response.json()["approval"]["reason"] == "customer changed their mind"
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert "customer changed their mind" in run.answer


# --- Agents and tools -----------------------------------------------------------------------------------


def test_admin_manages_agents_with_budget_alert_fields(admin):
    client = api(admin)
    created = client.post("/api/v1/agents/", {
        "name": "triage", "tools": ["get_weather"], "model_list": ["demo"], "daily_token_alert": 50000,
        "daily_cost_alert_usd": 2.5,
    }, format="json")
    assert created.status_code == 201, created.json()
    agent = Agent.objects.get(name="triage")
    assert agent.daily_token_alert == 50000 and agent.daily_cost_alert_usd == 2.5
    assert list(agent.tools.values_list("name", flat=True)) == ["get_weather"]
    changed = client.patch(f"/api/v1/agents/{agent.pk}/", {"daily_cost_alert_usd": None, "max_iterations": 3},
                           format="json")
    assert changed.status_code == 200 and changed.json()["daily_cost_alert_usd"] is None
    bad = client.patch(f"/api/v1/agents/{agent.pk}/", {"max_wall_seconds": 0}, format="json")
    assert bad.status_code == 400 and "max_wall_seconds" in bad.json()["errors"]
    assert client.delete(f"/api/v1/agents/{agent.pk}/").status_code == 204


@pytest.mark.parametrize("changes, field", [
    ({"provider_options": {"provider": "a\x00b"}}, "provider_options"),
    ({"daily_token_alert": 0}, "daily_token_alert"),
    ({"daily_cost_alert_usd": -1}, "daily_cost_alert_usd"),
    ({"max_iterations": 2**53}, "max_iterations"),
    ({"verifier": "no_such_verifier"}, "verifier"),
    ({"tools": ["lookup_order"]}, "tools"),
    ({"name": "demo"}, "name"),
    ({"name": "x\x00"}, "name"),
    ({"model_list": ["gpt-a", " "]}, "model_list"),
    ({"base_url": "ftp://llm.example.com/v1"}, "base_url"),
])
def test_bad_agent_values_are_400s_naming_the_field(admin, changes, field):
    # The same rules as the dashboard's editor (test_agents_tools_pages): both call agent_save.
    Tool.objects.filter(name="lookup_order").update(enabled=False)
    before = Agent.objects.count()
    response = api(admin).post("/api/v1/agents/", {"name": "triage", **changes}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"] and response.json()["detail"].startswith(f"{field}:")
    assert Agent.objects.count() == before


def test_an_agent_with_runs_cannot_be_deleted(launch, admin):
    run = launch()
    response = api(admin).delete(f"/api/v1/agents/{run.agent_id}/")
    assert response.status_code == 409 and "has runs" in response.json()["detail"]
    assert Agent.objects.filter(pk=run.agent_id).exists()


def test_tool_schemas_are_checked_when_saved(admin):
    client = api(admin)
    bad = client.post("/api/v1/tools/", {"name": "lookup", "parameters": {"type": "array"}}, format="json")
    assert bad.status_code == 400
    assert bad.json()["detail"] == 'parameters: The root of the schema must have "type": "object".'
    remote = client.post("/api/v1/tools/", {
        "name": "lookup", "parameters": {"type": "object", "properties": {"a": {"$ref": "https://x.test/s.json"}}},
    }, format="json")
    assert remote.status_code == 400 and "Only local $ref" in remote.json()["detail"]
    good = client.post("/api/v1/tools/", {
        "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        "destructive": True,
    }, format="json")
    assert good.status_code == 201, good.json()
    assert any("additionalProperties" in w for w in good.json()["schema_warnings"])
    assert Tool.objects.get(name="lookup").destructive


def test_http_tools_are_registered_with_their_url_and_mcp_tools_only_by_discovery(admin):
    client = api(admin)
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
    missing = client.post("/api/v1/tools/", {"name": "stock", "kind": "http", "parameters": schema}, format="json")
    assert missing.status_code == 400 and "URL" in missing.json()["detail"]
    bad_secret = client.post("/api/v1/tools/", {
        "name": "stock", "kind": "http", "parameters": schema, "url": "https://stock.example.com/check",
        "secret_env": "DJANGO_SECRET_KEY",
    }, format="json")
    assert bad_secret.status_code == 400 and "TOOL_SECRET_" in bad_secret.json()["detail"]
    created = client.post("/api/v1/tools/", {
        "name": "stock", "kind": "http", "parameters": schema, "url": "https://stock.example.com/check",
        "secret_env": "TOOL_SECRET_STOCK",
    }, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["url"] == "https://stock.example.com/check"
    assert Tool.objects.get(name="stock").config == {
        "url": "https://stock.example.com/check", "secret_env": "TOOL_SECRET_STOCK"}
    moved = client.patch(f"/api/v1/tools/{created.json()['id']}/", {"url": "https://stock2.example.com/"}, format="json")
    assert moved.status_code == 200 and Tool.objects.get(name="stock").config["secret_env"] == "TOOL_SECRET_STOCK"
    mcp = client.post("/api/v1/tools/", {"name": "x", "kind": "mcp", "parameters": schema}, format="json")
    assert mcp.status_code == 400 and "discovering" in mcp.json()["detail"]


# --- Metrics and exports ------------------------------------------------------------------------------


def test_metrics_summarise_the_period(launch, alice):
    launch()
    body = api(alice).get("/api/v1/metrics/").json()
    assert body["runs_total"] == 1 and body["succeeded_runs"] == 1 and body["success_rate"] == 1.0
    assert body["tool_errors"][0]["tool"] == "get_weather"
    bad = api(alice).get("/api/v1/metrics/", {"date_from": "not-a-date"})
    assert bad.status_code == 400 and "date_from" in bad.json()["errors"]


@pytest.fixture
def secret_run(launch, script):
    model = script(
        {"tool_calls": [{"name": "create_ticket",
                         "arguments": {"title": "[TEST] Token leaked", "body": SECRET, "priority": "high"}}]},
        {"content": "Filed it."},
    )
    run = launch("File a ticket about the leaked token", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    assert SECRET in run.tool_calls.get().arguments
    return run


def test_jsonl_export_has_hashes_never_arguments_or_results(secret_run, alice):
    response = api(alice).get("/api/v1/runs/export.jsonl", {"status": Run.Status.SUCCEEDED})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/jsonl")
    text = b"".join(response.streaming_content).decode()
    assert SECRET not in text
    (record,) = [json.loads(line) for line in text.splitlines()]
    call = record["steps"][0]["calls"][0]
    assert record["run_id"] == secret_run.pk and call["tool"] == "create_ticket"
    assert call["args_hash"] == secret_run.tool_calls.get().args_hash and len(call["args_hash"]) == 64


def test_csv_export_has_one_row_per_call_and_follows_the_filter(secret_run, launch, alice):
    other = launch(CANCEL_TASK)
    client = api(alice)
    response = client.get("/api/v1/runs/export.csv", {"q": "leaked"})
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    assert SECRET not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["run_id"], r["tool"]) for r in rows] == [(str(secret_run.pk), "create_ticket"), (str(secret_run.pk), "")]
    assert rows[0]["args_hash"] == secret_run.tool_calls.get().args_hash
    everything = list(csv.DictReader(io.StringIO(b"".join(client.get("/api/v1/runs/export.csv").streaming_content).decode())))
    assert {r["run_id"] for r in everything} == {str(secret_run.pk), str(other.pk)}
    assert client.get("/api/v1/runs/export.csv", {"created_to": "nope"}).status_code == 400


def test_the_history_page_export_links_keep_its_filter(client, alice):
    client.force_login(alice)
    html = client.get(
        reverse("run_list"), {"status": Run.Status.SUCCEEDED, "q": "ticket", "page": "2"}
    ).content.decode()
    links = re.findall(r'href="(/api/v1/runs/export\.(?:jsonl|csv))\?([^"]*)"', html)
    assert [path for path, _ in links] == ["/api/v1/runs/export.jsonl", "/api/v1/runs/export.csv"]
    for _, query in links:
        # every page, not page 2
        assert parse_qs(unescape(query)) == {"status": [Run.Status.SUCCEEDED], "q": ["ticket"]}


# --- The OpenAPI document -----------------------------------------------------------------------------


def test_the_schema_is_served_and_generates_without_warnings(demo_data, tmp_path):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.")
    assert {"/api/v1/runs/", "/api/v1/runs/{id}/", "/api/v1/approvals/{id}/approve/", "/api/v1/metrics/",
            "/api/v1/agents/", "/api/v1/tools/{id}/", "/api/v1/runs/export.csv"} <= set(document["paths"])
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    pending = document["components"]["schemas"]["PendingApproval"]["properties"]
    for name in ("arguments", "proposed_arguments"):  # JSON objects, not text
        assert pending[name]["type"] == "object" and pending[name]["nullable"] is True
        assert pending[f"{name}_text"]["type"] == "string"
