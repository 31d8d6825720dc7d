"""Agent and tool pages: who may read and edit, and what the editors accept."""
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import WARNING
from django.test import Client
from django.urls import reverse

from runs.engine.guards import MAX_SAFE_INTEGER
from runs.models import Agent
from tests.lifecycle.test_history import make_run, user_in
from toolsapp.models import Tool

pytestmark = pytest.mark.django_db

STRICT_SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
    "additionalProperties": False,
}


def logged_in(group: str | None, name: str) -> Client:
    client = Client()
    client.force_login(user_in(group, name))
    return client


@pytest.fixture
def viewer():
    return logged_in("viewers", "vera")


@pytest.fixture
def operator():
    return logged_in("operators", "otto")


@pytest.fixture
def admin():
    return logged_in("admins", "ada")


def agent_post(**changes) -> dict:
    data = {
        "name": "billing",
        "description": "Answers billing questions.",
        "system_prompt": "Be brief.",
        "model_list": " gpt-a , gpt-b,, ",
        "base_url": "https://llm.example.com/v1",
        "tools": [Tool.objects.get(name="get_weather").pk, Tool.objects.get(name="lookup_order").pk],
        "max_iterations": "12",
        "repeat_limit": "2",
        "max_wall_seconds": "90.5",
        "max_tokens": "50000",
        "max_cost_usd": "0.5",
        "max_output_tokens": "",
        "first_tool_choice": "required",
        "later_tool_choice": "auto",
        "parallel_tool_calls": "on",
        "provider_options": '{"provider": {"order": ["x"]}}',
        "verifier": "orders_cancelled",
        "summarize_on_stop": "on",
        "approval_timeout_seconds": "600",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def tool_post(**changes) -> dict:
    data = {
        "name": "check_stock",
        "description": "Stock level of one product.",
        "parameters": json.dumps(STRICT_SCHEMA),
        "parallel_safe": "on",
        "idempotent": "on",
        "timeout_seconds": "5",
        "repeat_limit": "",
        "sensitive_fields": "sku, , token ",
        "kind": "python",
        "handler": "get_weather",
        "enabled": "on",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def pages() -> list[str]:
    agent, tool = Agent.objects.get(name="demo"), Tool.objects.get(name="cancel_order")
    return [reverse("agent_list"), reverse("agent_detail", args=[agent.pk]),
            reverse("tool_list"), reverse("tool_detail", args=[tool.pk])]


def editors() -> list[str]:
    agent, tool = Agent.objects.get(name="demo"), Tool.objects.get(name="cancel_order")
    return [reverse("agent_create"), reverse("agent_edit", args=[agent.pk]),
            reverse("tool_create"), reverse("tool_edit", args=[tool.pk])]


# --- Permissions ---------------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(client):
    for url in pages() + editors():
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(reverse("login")), url


def test_viewers_and_operators_read_everything_but_cannot_edit(viewer, operator):
    for client in (viewer, operator):
        for url in pages():
            assert client.get(url).status_code == 200, url
        for url in editors():
            assert client.get(url).status_code == 403, url
            assert client.post(url, {"name": "sneaky"}).status_code == 403, url
    assert not Agent.objects.filter(name="sneaky").exists() and not Tool.objects.filter(name="sneaky").exists()
    html = viewer.get(reverse("tool_list")).content.decode()
    assert reverse("tool_create") not in html


def test_changing_is_not_creating():
    user = User.objects.create_user("editor")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_tool", "change_tool", "view_agent",
                                                                       "change_agent"]))
    client = Client()
    client.force_login(user)
    assert client.get(reverse("tool_create")).status_code == 403
    assert client.get(reverse("agent_create")).status_code == 403
    assert client.get(reverse("tool_edit", args=[Tool.objects.get(name="get_weather").pk])).status_code == 200


def test_posts_need_the_csrf_token():
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_in("admins", "ada"))
    assert client.post(reverse("tool_create"), tool_post()).status_code == 403
    assert not Tool.objects.filter(name="check_stock").exists()


# --- Agents --------------------------------------------------------------------------------------


def test_admin_creates_an_agent(admin):
    form_page = admin.get(reverse("agent_create")).content.decode()
    assert 'id="agent-form"' in form_page and 'type="checkbox" name="tools"' in form_page
    assert 'value="orders_cancelled"' in form_page and 'value="ticket_exists"' in form_page
    response = admin.post(reverse("agent_create"), agent_post())
    agent = Agent.objects.get(name="billing")
    assert response.status_code == 302 and response.url == reverse("agent_detail", args=[agent.pk])
    assert agent.model_list == ["gpt-a", "gpt-b"]
    assert sorted(agent.tools.values_list("name", flat=True)) == ["get_weather", "lookup_order"]
    assert (agent.max_iterations, agent.repeat_limit, agent.max_wall_seconds) == (12, 2, 90.5)
    assert (agent.max_tokens, agent.max_cost_usd, agent.max_output_tokens) == (50000, 0.5, None)
    assert (agent.first_tool_choice, agent.later_tool_choice, agent.parallel_tool_calls) == ("required", "auto", True)
    assert agent.provider_options == {"provider": {"order": ["x"]}}
    assert (agent.verifier, agent.summarize_on_stop, agent.approval_timeout_seconds) == ("orders_cancelled", True, 600)


def test_the_context_budget_and_compaction_are_set_on_the_agent_form_and_frozen_into_runs(launch, admin):
    page = admin.get(reverse("agent_create")).content.decode()
    assert 'name="compact_context"' in page and 'name="context_budget_tokens"' in page
    admin.post(reverse("agent_create"), agent_post(compact_context="on", context_budget_tokens="6000", base_url=""))
    agent = Agent.objects.get(name="billing")
    assert (agent.compact_context, agent.context_budget_tokens) == (True, 6000)
    assert "6000 tokens; older tool results are summarised beyond it" in admin.get(
        reverse("agent_detail", args=[agent.pk])).content.decode()
    run = launch("hi", agent="billing", models=["script:none"])
    assert (run.config["context_budget"], run.config["read_back"]) == (6000, True)
    admin.post(reverse("agent_edit", args=[agent.pk]), agent_post(context_budget_tokens="", base_url=""))
    agent.refresh_from_db()
    assert (agent.compact_context, agent.context_budget_tokens) == (False, None)  # unchecked: off
    assert launch("hi", agent="billing", models=["script:none"]).config["context_budget"] == 0


def test_admin_edits_an_agent(admin):
    agent = Agent.objects.get(name="demo")
    page = admin.get(reverse("agent_edit", args=[agent.pk])).content.decode()
    assert "demo" in page
    response = admin.post(reverse("agent_edit", args=[agent.pk]), agent_post(
        name="demo", model_list="", base_url="", tools=[], verifier="", parallel_tool_calls=None,
        provider_options="", max_output_tokens="256"))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.model_list == [] and agent.base_url == "" and agent.tools.count() == 0
    assert agent.parallel_tool_calls is False and agent.provider_options == {} and agent.max_output_tokens == 256


def test_the_editor_says_which_tools_are_disabled(admin):
    Tool.objects.filter(name="search_tickets").update(enabled=False)
    page = admin.get(reverse("agent_edit", args=[Agent.objects.get(name="demo").pk])).content.decode()
    assert "search_tickets (disabled)" in page
    assert "lookup_order (disabled)" not in page and "lookup_order" in page


@pytest.mark.parametrize("changes, field", [
    ({"base_url": "ftp://llm.example.com/v1"}, "base_url"),
    ({"base_url": "javascript:alert(1)"}, "base_url"),
    ({"max_iterations": "0"}, "max_iterations"),
    ({"max_iterations": str(MAX_SAFE_INTEGER + 1)}, "max_iterations"),
    ({"max_iterations": "2.5"}, "max_iterations"),
    ({"repeat_limit": "-1"}, "repeat_limit"),
    ({"max_tokens": ""}, "max_tokens"),
    ({"max_wall_seconds": "0"}, "max_wall_seconds"),
    ({"max_cost_usd": "-0.01"}, "max_cost_usd"),
    ({"max_cost_usd": "inf"}, "max_cost_usd"),
    ({"max_output_tokens": "0"}, "max_output_tokens"),
    ({"approval_timeout_seconds": "0"}, "approval_timeout_seconds"),
    ({"provider_options": "[1, 2]"}, "provider_options"),
    ({"provider_options": "{oops"}, "provider_options"),
    ({"provider_options": '{"provider": "a\\u0000b"}'}, "provider_options"),
    ({"provider_options": '{"\\ud800": 1}'}, "provider_options"),
    ({"model_list": "gpt-a, " + "m" * 201}, "model_list"),
    ({"daily_token_alert": "0"}, "daily_token_alert"),
    ({"context_budget_tokens": "0"}, "context_budget_tokens"),
    ({"context_budget_tokens": "2.5"}, "context_budget_tokens"),
    ({"daily_cost_alert_usd": "-1"}, "daily_cost_alert_usd"),
    ({"verifier": "no_such_verifier"}, "verifier"),
    ({"first_tool_choice": "sometimes"}, "first_tool_choice"),
    ({"name": "demo"}, "name"),
    ({"name": ""}, "name"),
])
def test_bad_agent_values_are_form_errors_and_nothing_is_saved(admin, changes, field):
    before = Agent.objects.count()
    response = admin.post(reverse("agent_create"), agent_post(**changes))
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert 'class="errorlist' in response.content.decode()
    assert Agent.objects.count() == before


def test_disabled_tools_are_refused(admin):
    Tool.objects.filter(name="lookup_order").update(enabled=False)
    response = admin.post(reverse("agent_create"), agent_post())
    assert "disabled: lookup_order" in str(response.context["form"].errors["tools"])
    assert not Agent.objects.filter(name="billing").exists()


def test_agent_detail_shows_fields_and_last_twenty_runs(viewer):
    agent = Agent.objects.get(name="demo")
    other = Agent.objects.create(name="other")
    base = datetime(2026, 3, 1, tzinfo=UTC)
    runs = [make_run(agent, f"task {i}", created=base + timedelta(minutes=i)) for i in range(25)]
    make_run(other, "not mine", created=base + timedelta(days=1))
    html = viewer.get(reverse("agent_detail", args=[agent.pk])).content.decode()
    shown = [int(x) for x in re.findall(r'data-run-id="(\d+)"', html)]
    assert shown == [r.pk for r in reversed(runs)][:20]
    assert "not mine" not in html
    assert agent.system_prompt[:40] in html and "cancel_order" in html
    assert reverse("agent_edit", args=[agent.pk]) not in html  # a viewer gets no edit link


# --- Tools ---------------------------------------------------------------------------------------


def test_admin_creates_a_strict_tool_without_warnings(admin):
    page = admin.get(reverse("tool_create")).content.decode()
    assert 'id="tool-form"' in page and 'name="kind"' in page
    response = admin.post(reverse("tool_create"), tool_post(), follow=True)
    tool = Tool.objects.get(name="check_stock")
    assert response.redirect_chain[-1][0] == reverse("tool_detail", args=[tool.pk])
    assert tool.parameters == STRICT_SCHEMA
    assert tool.sensitive_fields == ["sku", "token"]
    assert (tool.destructive, tool.parallel_safe, tool.idempotent, tool.enabled) == (False, True, True, True)
    assert (tool.timeout_seconds, tool.repeat_limit, tool.kind, tool.handler) == (5.0, None, "python", "get_weather")
    assert [m.level for m in response.context["messages"]] == [25]  # success only
    html = response.content.decode()
    assert '&quot;additionalProperties&quot;: false' in html  # pretty-printed schema
    assert '\n  &quot;type&quot;: &quot;object&quot;' in html


def test_strict_mode_warnings_are_shown_after_saving(admin):
    loose = {"type": "object", "properties": {"sku": {"type": "string"}}}
    response = admin.post(reverse("tool_create"), tool_post(parameters=json.dumps(loose), handler=""), follow=True)
    tool = Tool.objects.get(name="check_stock")
    assert tool.parameters == loose
    warnings = [str(m) for m in response.context["messages"] if m.level == WARNING]
    assert any("additionalProperties" in w for w in warnings)
    assert any("sku" in w and "required" in w for w in warnings)
    assert any("No Python handler named 'check_stock'" in w for w in warnings)
    assert "msg-warning" in response.content.decode()


def test_admin_edits_a_tool(admin):
    tool = Tool.objects.get(name="cancel_order")
    page = admin.get(reverse("tool_edit", args=[tool.pk])).content.decode()
    assert "&quot;pattern&quot;" in page  # the schema is in the textarea, as JSON
    response = admin.post(reverse("tool_edit", args=[tool.pk]), tool_post(
        name="cancel_order", destructive="on", parallel_safe=None, handler="cancel_order", repeat_limit="1",
        sensitive_fields="reason", timeout_seconds="12.5"))
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.parameters == STRICT_SCHEMA and tool.destructive and not tool.parallel_safe
    assert (tool.repeat_limit, tool.sensitive_fields, tool.timeout_seconds) == (1, ["reason"], 12.5)


BAD_SCHEMAS = [
    pytest.param('["not", "an", "object"]', "must be a JSON object", id="array-root"),
    pytest.param('{"type": "string"}', '"type": "object"', id="string-root"),
    pytest.param(json.dumps({"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}}),
                 "Only local $ref", id="remote-ref"),
    pytest.param('{"type": "object", "properties": {', "Not valid JSON", id="invalid-json"),
    pytest.param('{"type": "object", "properties": {"a": {"type": 12}}}', "Draft 2020-12", id="invalid-schema"),
    pytest.param("", "required", id="empty"),
]


@pytest.mark.parametrize("text, message", BAD_SCHEMAS)
def test_bad_schema_on_create_is_a_form_error_and_nothing_is_saved(admin, text, message):
    before = list(Tool.objects.order_by("pk").values())
    response = admin.post(reverse("tool_create"), tool_post(parameters=text))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == ["parameters"] and message in errors["parameters"][0]
    html = response.content.decode()
    assert 'id="tool-form"' in html and 'class="errorlist' in html
    assert list(Tool.objects.order_by("pk").values()) == before


@pytest.mark.parametrize("text, message", BAD_SCHEMAS)
def test_bad_schema_on_edit_changes_nothing(admin, text, message):
    tool = Tool.objects.get(name="get_weather")
    before = list(Tool.objects.order_by("pk").values())
    response = admin.post(reverse("tool_edit", args=[tool.pk]), tool_post(
        name="get_weather", description="changed", destructive="on", parameters=text))
    assert response.status_code == 200 and message in response.context["form"].errors["parameters"][0]
    assert list(Tool.objects.order_by("pk").values()) == before


@pytest.mark.parametrize("changes, field", [
    ({"name": "has space"}, "name"),
    ({"name": "get_weather"}, "name"),
    ({"timeout_seconds": "0"}, "timeout_seconds"),
    ({"repeat_limit": "0"}, "repeat_limit"),
    ({"kind": "shell"}, "kind"),
])
def test_other_bad_tool_values(admin, changes, field):
    before = Tool.objects.count()
    response = admin.post(reverse("tool_create"), tool_post(**changes))
    assert field in response.context["form"].errors
    assert Tool.objects.count() == before


def test_http_tool_needs_a_url_and_keeps_it_in_its_config(admin):
    response = admin.post(reverse("tool_create"), tool_post(kind="http", handler=""))
    assert "url" in response.context["form"].errors
    assert not Tool.objects.filter(name="check_stock").exists()

    admin.post(reverse("tool_create"), tool_post(
        kind="http", handler="", url="https://stock.example.com/check", secret_env="TOOL_SECRET_STOCK"))
    tool = Tool.objects.get(name="check_stock")
    assert tool.kind == "http"
    assert tool.config == {"url": "https://stock.example.com/check", "secret_env": "TOOL_SECRET_STOCK"}


def test_http_tool_secret_must_name_a_tool_secret_variable(admin):
    response = admin.post(reverse("tool_create"), tool_post(
        kind="http", handler="", url="https://stock.example.com/check", secret_env="DJANGO_SECRET_KEY"))
    assert "secret_env" in response.context["form"].errors
    assert not Tool.objects.filter(name="check_stock").exists()


def test_mcp_tools_cannot_be_made_by_hand(admin):
    response = admin.post(reverse("tool_create"), tool_post(kind="mcp"))
    assert "kind" in response.context["form"].errors
    assert not Tool.objects.filter(name="check_stock").exists()
