"""One write path for tools: the dashboard form, the admin and the API refuse the same values
with the same messages, because toolsapp.services owns the rules."""
import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from tests.support.approval_fixtures import make_user
from toolsapp.models import McpServer, Tool
from toolsapp.services import ToolInvalid, tool_save, tool_validate

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"],
          "additionalProperties": False}


def form_post(**changes) -> dict:
    data = {"name": "check_stock", "description": "Stock level.", "parameters": json.dumps(SCHEMA),
            "timeout_seconds": "5", "sensitive_fields": "", "kind": "python", "handler": "get_weather",
            "enabled": "on"}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def ada_user(demo_data):
    return make_user("ada", "admins")


@pytest.fixture
def ada(ada_user, client):
    client.force_login(ada_user)
    return client


@pytest.fixture
def api(ada_user):
    client = APIClient()
    client.force_authenticate(ada_user)
    return client


# Text typed into the form as JSON can carry escapes of characters no database column takes.
UNSTORABLE = [
    pytest.param('{"type": "object", "description": "a\\u0000b"}', id="nul"),
    pytest.param('{"type": "object", "properties": {"\\ud800": {"type": "string"}}}', id="lone-surrogate"),
]


@pytest.mark.parametrize("text", UNSTORABLE)
def test_the_form_refuses_a_schema_with_unstorable_text_as_the_api_does(ada, api, text):
    response = ada.post(reverse("tool_create"), form_post(parameters=text))
    assert response.status_code == 200
    message = "parameters contains a NUL or an unpaired surrogate character."
    assert response.context["form"].errors["parameters"] == [message]
    body = json.dumps({"name": "check_stock", "parameters": json.loads(text)})  # ASCII: escapes stay escapes
    bad = api.post("/api/v1/tools/", body, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["errors"] == {"parameters": [message]}
    assert not Tool.objects.filter(name="check_stock").exists()


def test_the_form_refuses_a_sensitive_field_name_longer_than_the_api_takes(ada):
    response = ada.post(reverse("tool_create"), form_post(sensitive_fields="sku, " + "x" * 201))
    assert "sensitive_fields" in response.context["form"].errors
    assert not Tool.objects.filter(name="check_stock").exists()


def test_an_http_tool_made_python_in_the_form_forgets_its_url_as_in_the_api(ada, api):
    tool = Tool.objects.create(name="stock", kind="http", parameters=SCHEMA,
                               config={"url": "https://stock.example.com/", "secret_env": "TOOL_SECRET_S"})
    response = ada.post(reverse("tool_edit", args=[tool.pk]), form_post(name="stock", kind="python", url="x.example"))
    assert response.status_code == 302
    tool.refresh_from_db()
    assert (tool.kind, tool.config) == ("python", {})


@pytest.fixture
def mcp_tool(demo_data):
    server = McpServer.objects.create(name="wh", command="demo-mcp")
    return Tool.objects.create(name="wh__add", kind="mcp", mcp_server=server, parameters=SCHEMA,
                               config={"remote_name": "add"})


def test_an_mcp_tool_keeps_its_handler_in_the_api_as_in_the_form(api, ada, mcp_tool):
    bad = api.patch(f"/api/v1/tools/{mcp_tool.pk}/", {"handler": "get_weather"}, format="json")
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["handler"]
    page = ada.post(reverse("tool_edit", args=[mcp_tool.pk]), form_post(name="other", handler="get_weather",
                                                                         kind="python", destructive="on"))
    assert page.status_code == 302  # the form's disabled fields keep discovery's values
    mcp_tool.refresh_from_db()
    assert (mcp_tool.name, mcp_tool.handler, mcp_tool.kind, mcp_tool.destructive) == ("wh__add", "", "mcp", True)
    assert mcp_tool.config == {"remote_name": "add"} and mcp_tool.mcp_server.name == "wh"


@pytest.mark.parametrize("changes, field", [
    ({"name": "has space"}, "name"),
    ({"name": "get_weather"}, "name"),
    ({"parameters": {"type": "array"}}, "parameters"),
    ({"kind": "http"}, "url"),
    ({"kind": "http", "url": "https://x.example/", "secret_env": "DJANGO_SECRET_KEY"}, "secret_env"),
])
def test_the_form_and_the_api_give_the_same_message(ada, api, changes, field):
    api_data = {"name": "check_stock", "parameters": SCHEMA, **changes}
    bad = api.post("/api/v1/tools/", api_data, format="json")
    assert bad.status_code == 400
    form_changes = {k: json.dumps(v) if k == "parameters" else v for k, v in changes.items()}
    response = ada.post(reverse("tool_create"), form_post(**form_changes))
    assert bad.json()["errors"][field] == response.context["form"].errors[field]


def test_the_admin_goes_through_the_same_rules(demo_data, client):
    client.force_login(User.objects.create_superuser("root", password="pw-root"))
    tool = Tool.objects.get(name="get_weather")
    response = client.post(reverse("admin:toolsapp_tool_change", args=[tool.pk]),
                           form_post(name="get_weather", parameters='{"type": "object", "description": "\\u0000"}'))
    assert response.status_code == 200 and "contains a NUL" in response.content.decode()
    response = client.post(reverse("admin:toolsapp_tool_change", args=[tool.pk]),
                           form_post(name="get_weather", timeout_seconds="7"))
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.timeout_seconds == 7 and tool.handler == "get_weather"


# --- the service itself ---------------------------------------------------------------------------


def test_a_new_tool_needs_a_name_and_a_schema(db):
    with pytest.raises(ToolInvalid) as caught:
        tool_validate(tool=None, data={"description": "x"})
    assert set(caught.value.errors) == {"name", "parameters"}


def test_unstorable_text_is_refused_before_any_other_rule_or_query(db, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(ToolInvalid) as caught:
        tool_validate(tool=None, data={"name": "a\x00b", "parameters": SCHEMA, "description": "\ud800"})
    assert caught.value.errors == {
        "name": ["name contains a NUL or an unpaired surrogate character."],
        "description": ["description contains a NUL or an unpaired surrogate character."],
    }


def test_a_partial_change_keeps_the_rest_and_an_http_tool_its_secret(db):
    tool = tool_save(data={"name": "stock", "kind": "http", "parameters": SCHEMA, "url": "https://a.example/",
                           "secret_env": "TOOL_SECRET_A", "timeout_seconds": 3.0})
    tool_save(tool=Tool.objects.get(pk=tool.pk), data={"url": "https://b.example/"})
    tool.refresh_from_db()
    assert tool.config == {"url": "https://b.example/", "secret_env": "TOOL_SECRET_A"}
    assert (tool.timeout_seconds, tool.parameters) == (3.0, SCHEMA)


@pytest.mark.parametrize("changes, field", [
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"timeout_seconds": float("inf")}, "timeout_seconds"),
    ({"timeout_seconds": 24 * 3600 + 1}, "timeout_seconds"),
    ({"repeat_limit": 0}, "repeat_limit"),
    ({"repeat_limit": 2**53}, "repeat_limit"),
    ({"kind": "mcp"}, "kind"),
    ({"kind": "shell"}, "kind"),
    ({"sensitive_fields": ["x" * 201]}, "sensitive_fields"),
    ({"handler": "h" * 201}, "handler"),
])
def test_each_rule_names_its_field(db, changes, field):
    with pytest.raises(ToolInvalid) as caught:
        tool_validate(tool=None, data={"name": "t", "parameters": SCHEMA, **changes})
    assert list(caught.value.errors) == [field]
