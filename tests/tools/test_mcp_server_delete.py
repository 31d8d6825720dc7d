"""Deleting an MCP server keeps its tools (agents and past runs name them) but disables them,
and says so on the page, in the admin and in the API's view of the tools."""
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from runs.models import Agent
from tests.support.approval_fixtures import make_user
from toolsapp.executors import ToolContext, ToolError
from toolsapp.executors.mcp import McpExecutor
from toolsapp.mcp.services import mcp_server_delete
from toolsapp.models import McpServer, Tool


@pytest.fixture
def server(demo_data):
    server = McpServer.objects.create(name="wh", command="demo-mcp --stdio")
    for remote in ("add", "lookup", "restock"):
        Tool.objects.create(name=f"wh__{remote}", kind="mcp", mcp_server=server, config={"remote_name": remote},
                            parameters={"type": "object"})
    Tool.objects.filter(name="wh__restock").update(enabled=False)  # an admin's choice, already off
    Agent.objects.get(name="demo").tools.add(Tool.objects.get(name="wh__lookup"))
    return server


def test_the_service_disables_the_servers_enabled_tools_and_keeps_them(server):
    assert mcp_server_delete(server=server) == ["wh__add", "wh__lookup"]
    assert not McpServer.objects.filter(name="wh").exists()
    tools = Tool.objects.filter(name__startswith="wh__")
    assert [(t.name, t.enabled, t.mcp_server_id) for t in tools] == [
        ("wh__add", False, None), ("wh__lookup", False, None), ("wh__restock", False, None)]
    assert "wh__lookup" in Agent.objects.get(name="demo").tools.values_list("name", flat=True)
    with pytest.raises(ToolError, match="not linked to an MCP server"):
        McpExecutor().call(tools[0], {}, ToolContext(run_id=1, call_id="c", idempotency_key="k"))


def test_the_page_asks_first_lists_the_tools_and_says_what_it_disabled(server, client):
    client.force_login(make_user("ada", "admins"))
    detail = client.get(reverse("mcp_server_detail", args=[server.pk])).content.decode()
    assert reverse("mcp_server_delete", args=[server.pk]) in detail
    confirm = client.get(reverse("mcp_server_delete", args=[server.pk])).content.decode()
    assert "2 tools will be disabled" in confirm and "wh__lookup" in confirm and "wh__restock" not in confirm
    assert McpServer.objects.filter(pk=server.pk).exists()  # asking changed nothing

    response = client.post(reverse("mcp_server_delete", args=[server.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("mcp_server_list")
    assert "MCP server wh deleted; 2 tools disabled: wh__add, wh__lookup." in response.content.decode()
    tool = Tool.objects.get(name="wh__lookup")
    page = client.get(reverse("tool_detail", args=[tool.pk])).content.decode()
    assert "its server was deleted, so this tool cannot run" in page


def test_viewers_and_operators_cannot_delete_a_server(server, client):
    for user in (make_user("victor", "viewers"), make_user("otto", "operators")):
        client.force_login(user)
        assert client.post(reverse("mcp_server_delete", args=[server.pk])).status_code == 403
    assert McpServer.objects.filter(pk=server.pk).exists()
    assert Tool.objects.get(name="wh__add").enabled


def test_the_api_shows_the_tools_disabled_and_without_a_server(server):
    client = APIClient()
    client.force_authenticate(make_user("ada", "admins"))
    before = {t["name"]: t for t in client.get("/api/v1/tools/").json()["results"] if t["name"].startswith("wh__")}
    assert before["wh__add"]["mcp_server"] == "wh" and before["wh__add"]["enabled"] is True
    mcp_server_delete(server=server)
    after = {t["name"]: t for t in client.get("/api/v1/tools/").json()["results"] if t["name"].startswith("wh__")}
    assert {(t["mcp_server"], t["enabled"]) for t in after.values()} == {(None, False)}


def test_the_admin_deletes_the_same_way_and_says_so(server, client):
    client.force_login(User.objects.create_superuser("root", password="pw-root"))
    url = reverse("admin:toolsapp_mcpserver_delete", args=[server.pk])
    response = client.post(url, {"post": "yes"}, follow=True)
    assert "MCP server wh deleted; 2 tools disabled: wh__add, wh__lookup." in response.content.decode()
    assert not Tool.objects.filter(name__startswith="wh__", enabled=True).exists()


def test_the_admin_bulk_delete_disables_the_tools_too(server, client):
    client.force_login(User.objects.create_superuser("root", password="pw-root"))
    other = McpServer.objects.create(name="other", command="x")
    Tool.objects.create(name="other__x", kind="mcp", mcp_server=other, config={"remote_name": "x"},
                        parameters={"type": "object"})
    response = client.post(reverse("admin:toolsapp_mcpserver_changelist"), {
        "action": "delete_selected", "_selected_action": [server.pk, other.pk], "post": "yes"}, follow=True)
    assert "1 tool disabled: other__x" in response.content.decode()
    assert not McpServer.objects.exists() and not Tool.objects.filter(kind="mcp", enabled=True).exists()


def test_the_api_reads_the_servers_of_many_tools_in_one_query(server):
    client = APIClient()
    client.force_authenticate(make_user("ada", "admins"))
    client.get("/api/v1/tools/")  # the user's permissions are read once
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/tools/")
    for n in range(5):
        Tool.objects.create(name=f"wh__more{n}", kind="mcp", mcp_server=server, config={"remote_name": f"more{n}"},
                            parameters={"type": "object"})
    with CaptureQueriesContext(connection) as many:
        client.get("/api/v1/tools/")
    assert len(many.captured_queries) == len(few.captured_queries)
