"""Tools and MCP servers per project, as the people of two teams see them: an admin of project Alpha
sees Alpha's tools and servers and those the site shares, and none of Beta's, in every list; a new
tool or server of hers goes to Alpha (never to Beta, nor shared by the site); she cannot change a
shared one, even where the route's own check is missing. A site admin (in the "admins" group)
sees every project's, and may put a tool in any project or share it. Tools discovered on a server
are its project's."""
import html
import json
import re

import mcp.types as mcp_types
import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from projects import routes
from runs.lifecycle.agents import agent_save
from runs.roles import ensure_roles
from tests.projects import member, project
from tests.support.approval_fixtures import make_user
from toolsapp.mcp import discovery
from toolsapp.models import McpServer, Tool

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}


def options(page: str, name: str) -> list[str]:
    """The choices a person sees in the form's <select name=...>, by their words (the page's own
    form, in <main>: the header's project switch is a <select name="project"> too)."""
    select = re.search(rf'<select name="{re.escape(name)}"[^>]*>(.*?)</select>', page.split("<main>", 1)[-1], re.S)
    assert select, f"no <select name={name!r}> on the page"
    return [html.unescape(text).strip() for text in re.findall(r"<option[^>]*>(.*?)</option>", select.group(1), re.S)]


def rows(page: str, table_id: str) -> dict[str, list[str]]:
    """{name: the row's other cells' words} of a list page's table."""
    table = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert table, f"no table {table_id!r}"
    found = {}
    for row in re.findall(r"<tr [^>]*>(.*?)</tr>", table.group(1), re.S):
        cells = [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split())
                 for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        found[cells[0]] = cells[1:]
    # The demo tools the migrations install (shared by the site) are left out: the world's only.
    return {name: cells for name, cells in found.items() if name in OURS}


OURS = {"shared_lookup", "alpha_lookup", "beta_lookup", "alpha-mcp__search", "site-mcp__search",
        "site-mcp", "alpha-mcp", "beta-mcp"}


def form_post(name: str, **changes) -> dict:
    data = {"name": name, "description": "", "parameters": json.dumps(SCHEMA), "timeout_seconds": "5",
            "sensitive_fields": "", "kind": "python", "handler": "get_weather", "enabled": "on",
            "in_experiments": "auto"}
    data.update(changes)
    return data


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


class World:
    """Two teams with a tool, an MCP server and an agent each, and a tool and a server the site shares."""


@pytest.fixture
def world(db):
    ensure_roles(Group, Permission)
    w = World()
    w.alpha, w.beta = project("Alpha"), project("Beta")
    w.shared = Tool.objects.create(name="shared_lookup", parameters=SCHEMA, handler="get_weather")
    w.alpha_tool = Tool.objects.create(name="alpha_lookup", parameters=SCHEMA, handler="get_weather", project=w.alpha)
    w.beta_tool = Tool.objects.create(name="beta_lookup", parameters=SCHEMA, handler="get_weather", project=w.beta)
    w.alpha_bot = agent_save(agent=None, data={"name": "alpha-bot", "tools": [w.shared, w.alpha_tool]},
                             project=w.alpha)
    w.beta_bot = agent_save(agent=None, data={"name": "beta-bot", "tools": [w.shared, w.beta_tool]}, project=w.beta)
    w.shared_server = McpServer.objects.create(name="site-mcp", transport="http", url="https://mcp.example.com/mcp")
    w.alpha_server = McpServer.objects.create(name="alpha-mcp", transport="http", url="https://a.example.com/mcp",
                                              project=w.alpha)
    w.beta_server = McpServer.objects.create(name="beta-mcp", transport="http", url="https://b.example.com/mcp",
                                             project=w.beta)
    w.ann = member("ann", w.alpha, role="admins")  # an admin of Alpha only
    w.root = make_user("root", "admins")  # an admin of every project
    return w


# --- The lists ------------------------------------------------------------------------------------


def test_the_tools_page_lists_the_shared_tools_and_the_persons_projects_with_their_project(world):
    ann = rows(signed_in(world.ann).get(reverse("tool_list")).content.decode(), "tool-table")
    assert set(ann) == {"alpha_lookup", "shared_lookup"}
    assert ann["alpha_lookup"][0] == "Alpha" and ann["shared_lookup"][0] == "Shared by the site"
    # The shared tool's agents she sees: Alpha's only (the column before "Enabled").
    assert ann["shared_lookup"][-2] == "1"
    # A site admin sees every project's, and every agent of the shared one.
    root = rows(signed_in(world.root).get(reverse("tool_list")).content.decode(), "tool-table")
    assert {name: (cells[0], cells[-2]) for name, cells in root.items()} == {
        "alpha_lookup": ("Alpha", "1"), "beta_lookup": ("Beta", "1"), "shared_lookup": ("Shared by the site", "2")}


def test_a_shared_tools_page_names_only_the_agents_the_person_sees(world):
    page = signed_in(world.ann).get(reverse("tool_detail", args=[world.shared.pk])).content.decode()
    assert "alpha-bot" in page and "beta-bot" not in page
    assert re.search(r'id="tool-project">Shared by the site', page)
    page = signed_in(world.root).get(reverse("tool_detail", args=[world.beta_tool.pk])).content.decode()
    assert "beta-bot" in page and re.search(r'id="tool-project">Beta<', page)


def test_a_shared_tools_page_offers_its_edit_button_to_site_admins_only(world):
    # On a shared thing's page a project's admin has her view rights only (the route's SHARED
    # scope): no button leading to a form she would be refused.
    ann = signed_in(world.ann)
    assert 'id="tool-edit"' not in ann.get(reverse("tool_detail", args=[world.shared.pk])).content.decode()
    assert 'id="tool-edit"' in ann.get(reverse("tool_detail", args=[world.alpha_tool.pk])).content.decode()
    assert 'id="tool-edit"' in signed_in(world.root).get(reverse("tool_detail", args=[world.shared.pk])).content.decode()


def test_the_api_lists_the_shared_tools_and_the_callers_projects(world):
    answer = api(world.ann).get("/api/v1/tools/")
    found = {row["name"]: (row["project"], row["project_name"]) for row in answer.json()["results"] if row["name"] in OURS}
    assert found == {"alpha_lookup": ("alpha", "Alpha"), "shared_lookup": (None, None)}
    found = {row["name"]: row["project"] for row in api(world.root).get("/api/v1/tools/").json()["results"]
             if row["name"] in OURS}
    assert found == {"alpha_lookup": "alpha", "beta_lookup": "beta", "shared_lookup": None}


def test_the_mcp_servers_page_lists_the_shared_servers_and_the_persons_projects(world):
    page = signed_in(world.ann).get(reverse("mcp_server_list")).content.decode()
    ann = rows(page, "mcp-server-table")
    assert {name: cells[0] for name, cells in ann.items()} == {"alpha-mcp": "Alpha", "site-mcp": "Shared by the site"}
    # Her own server's page is linked; the shared one's (which she may not change) is not.
    assert (reverse("mcp_server_detail", args=[world.alpha_server.pk]) in page
            and reverse("mcp_server_detail", args=[world.shared_server.pk]) not in page)
    root = rows(signed_in(world.root).get(reverse("mcp_server_list")).content.decode(), "mcp-server-table")
    assert {name: cells[0] for name, cells in root.items()} == {
        "alpha-mcp": "Alpha", "beta-mcp": "Beta", "site-mcp": "Shared by the site"}


# --- A new tool's project -------------------------------------------------------------------------


def test_a_project_admin_makes_tools_in_her_project_only_on_the_page(world):
    ann = signed_in(world.ann)
    page = ann.get(reverse("tool_create")).content.decode()
    # Alpha only, chosen already: neither Beta nor "Shared by the site" is offered.
    assert options(page, "project") == ["Alpha"]
    refused = ann.post(reverse("tool_create"), form_post("sneaky", project=world.beta.pk))
    assert "Choose one of the projects where you may add tools: Alpha." in refused.context["form"].errors["project"]
    shared = ann.post(reverse("tool_create"), form_post("sneaky", project=""))
    assert "Only an admin of every project may share a tool" in shared.context["form"].errors["project"][0]
    assert [refused.status_code, shared.status_code, Tool.objects.filter(name="sneaky").count()] == [200, 200, 0]
    made = ann.post(reverse("tool_create"), form_post("alpha_more", project=world.alpha.pk))
    assert made.status_code == 302 and Tool.objects.get(name="alpha_more").project == world.alpha


def test_a_project_admin_makes_tools_in_her_project_only_in_the_api(world):
    client = api(world.ann)
    body = {"name": "sneaky", "parameters": SCHEMA}
    # Beta, by id or slug: as if it did not exist.
    refused = client.post("/api/v1/tools/", {**body, "project": world.beta.pk}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"]["project"] == [f"No project {world.beta.pk}."]
    refused = client.post("/api/v1/tools/", {**body, "project": "beta"}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"]["project"] == ["No project 'beta'."]
    shared = client.post("/api/v1/tools/", {**body, "project": None}, format="json")
    assert shared.status_code == 400 and shared.json()["errors"]["project"][0].startswith(
        "Only an admin of every project may share a tool")
    # Not named: her one project.
    made = client.post("/api/v1/tools/", {"name": "alpha_more", "parameters": SCHEMA}, format="json")
    assert made.status_code == 201 and made.json()["project"] == "alpha", made.content
    assert Tool.objects.get(name="alpha_more").project == world.alpha


def test_a_project_admin_cannot_move_her_tool_to_another_project(world):
    ann = signed_in(world.ann)
    url = reverse("tool_edit", args=[world.alpha_tool.pk])
    assert options(ann.get(url).content.decode(), "project") == ["Alpha"]
    refused = ann.post(url, form_post("alpha_lookup", project=world.beta.pk))
    assert refused.status_code == 200 and refused.context["form"].errors["project"]
    refused = api(world.ann).patch(f"/api/v1/tools/{world.alpha_tool.pk}/", {"project": "beta"}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"]["project"] == ["No project 'beta'."]
    refused = api(world.ann).patch(f"/api/v1/tools/{world.alpha_tool.pk}/", {"project": None}, format="json")
    assert refused.status_code == 400 and "Only an admin of every project" in refused.json()["errors"]["project"][0]
    # A change that leaves it where it is goes through, the project sent back as read.
    kept = api(world.ann).patch(f"/api/v1/tools/{world.alpha_tool.pk}/",
                                {"project": "alpha", "timeout_seconds": 9}, format="json")
    world.alpha_tool.refresh_from_db()
    assert kept.status_code == 200, kept.content
    assert world.alpha_tool.timeout_seconds == 9 and world.alpha_tool.project == world.alpha


@pytest.fixture
def without_route_scope(monkeypatch):
    """The tools' routes without their project check (projects/routes.py): the views and the API
    must refuse on their own."""
    for name in ("tool_edit", "api-tool-detail", "mcp_server_edit", "mcp_server_delete", "mcp_server_discover",
                 "mcp_server_detail"):
        monkeypatch.delitem(routes.OBJECT_ROUTES, name)


def test_a_project_admin_cannot_change_a_shared_tool_or_server(world, without_route_scope):
    # With the routes' check (projects/routes.py) these are refused before the view already
    # (tests/projects' route tests): here the views and the API refuse on their own.
    ann, client = signed_in(world.ann), api(world.ann)
    server = world.shared_server
    assert ann.get(reverse("mcp_server_edit", args=[server.pk])).status_code == 403
    assert ann.post(reverse("mcp_server_edit", args=[server.pk]), {
        "name": "mine-now", "transport": "http", "url": server.url, "enabled": "on", "project": world.alpha.pk,
    }).status_code == 403
    server.refresh_from_db()
    assert server.name == "site-mcp" and server.project is None
    assert ann.post(reverse("mcp_server_delete", args=[server.pk])).status_code == 403
    assert McpServer.objects.filter(pk=server.pk).exists()
    url = reverse("tool_edit", args=[world.shared.pk])
    assert ann.get(url).status_code == 403
    assert ann.post(url, form_post("shared_lookup", timeout_seconds="9", project=world.alpha.pk)).status_code == 403
    assert client.patch(f"/api/v1/tools/{world.shared.pk}/", {"timeout_seconds": 9}, format="json").status_code == 403
    assert client.patch(f"/api/v1/tools/{world.shared.pk}/", {"project": world.alpha.pk},
                        format="json").status_code == 403
    world.shared.refresh_from_db()
    assert world.shared.timeout_seconds == 30 and world.shared.project is None
    assert client.delete(f"/api/v1/tools/{world.shared.pk}/").status_code == 403
    assert Tool.objects.filter(pk=world.shared.pk).exists()


def test_a_project_admin_cannot_reach_another_projects_tool_without_the_route_check(world, without_route_scope):
    ann = signed_in(world.ann)
    assert ann.get(reverse("tool_edit", args=[world.beta_tool.pk])).status_code == 404
    assert ann.post(reverse("tool_edit", args=[world.beta_tool.pk]),
                    form_post("beta_lookup", enabled="", project=world.beta.pk)).status_code == 404
    assert ann.get(reverse("mcp_server_edit", args=[world.beta_server.pk])).status_code == 404
    world.beta_tool.refresh_from_db()
    assert world.beta_tool.enabled


def test_a_site_admin_puts_tools_in_any_project_or_shares_them(world):
    root = signed_in(world.root)
    page = root.get(reverse("tool_create")).content.decode()
    assert options(page, "project") == ["Shared by the site", "Alpha", "Beta", "Default"]
    made = root.post(reverse("tool_create"), form_post("beta_more", project=world.beta.pk))
    assert made.status_code == 302 and Tool.objects.get(name="beta_more").project == world.beta
    made = api(world.root).post("/api/v1/tools/", {"name": "beta_api", "parameters": SCHEMA, "project": "beta"},
                                format="json")
    assert made.status_code == 201, made.content
    assert made.json()["project_name"] == "Beta" and Tool.objects.get(name="beta_api").project == world.beta
    # Not named: shared by the site, as every tool was before projects.
    made = api(world.root).post("/api/v1/tools/", {"name": "site_api", "parameters": SCHEMA}, format="json")
    assert made.status_code == 201 and made.json()["project"] is None
    # The shared tool is hers to change, and to give to one project.
    moved = root.post(reverse("tool_edit", args=[world.shared.pk]),
                      form_post("shared_lookup", timeout_seconds="9", project=world.alpha.pk))
    world.shared.refresh_from_db()
    assert moved.status_code == 302 and world.shared.timeout_seconds == 9 and world.shared.project == world.alpha
    back = api(world.root).patch(f"/api/v1/tools/{world.shared.pk}/", {"project": None}, format="json")
    world.shared.refresh_from_db()
    assert back.status_code == 200 and back.json()["project"] is None and world.shared.project is None, back.content


# --- MCP servers and their tools ------------------------------------------------------------------


def test_a_project_admin_registers_mcp_servers_in_her_project_only(world):
    ann = signed_in(world.ann)
    assert options(ann.get(reverse("mcp_server_create")).content.decode(), "project") == ["Alpha"]
    fields = {"transport": "http", "url": "https://new.example.com/mcp", "enabled": "on"}
    refused = ann.post(reverse("mcp_server_create"), {"name": "sneaky", **fields, "project": world.beta.pk})
    assert refused.status_code == 200 and refused.context["form"].errors["project"]
    refused = ann.post(reverse("mcp_server_create"), {"name": "sneaky", **fields, "project": ""})
    assert refused.status_code == 200 and "Only an admin of every project" in refused.context["form"].errors["project"][0]
    assert not McpServer.objects.filter(name="sneaky").exists()
    made = ann.post(reverse("mcp_server_create"), {"name": "alpha-two", **fields, "project": world.alpha.pk})
    assert made.status_code == 302 and McpServer.objects.get(name="alpha-two").project == world.alpha


@pytest.fixture
def remote_tools(monkeypatch):
    """What an MCP server lists, without starting one."""
    listed = [mcp_types.Tool(name="search", description="Search.", inputSchema=SCHEMA,
                             annotations=mcp_types.ToolAnnotations(readOnlyHint=True))]
    monkeypatch.setattr(discovery, "list_tools", lambda server, timeout: listed)
    return listed


def test_tools_discovered_on_a_server_are_its_projects_and_follow_it(world, remote_tools):
    answer = signed_in(world.ann).post(reverse("mcp_server_discover", args=[world.alpha_server.pk]))
    tool = Tool.objects.get(name="alpha-mcp__search")
    assert answer.status_code == 302 and tool.project == world.alpha and tool.mcp_server == world.alpha_server
    # Hers to see in the list; not Beta's admin's.
    bea = member("bea", world.beta, role="admins")
    assert ("alpha-mcp__search" in rows(signed_in(world.ann).get(reverse("tool_list")).content.decode(), "tool-table")
            and "alpha-mcp__search" not in rows(signed_in(bea).get(reverse("tool_list")).content.decode(),
                                                "tool-table"))
    # An MCP tool is in its server's project: not moved by itself...
    refused = api(world.root).patch(f"/api/v1/tools/{tool.pk}/", {"project": world.beta.pk}, format="json")
    assert refused.status_code == 400 and "its server's project" in refused.json()["errors"]["project"][0]
    # ...but with its server, by one who may.
    moved = signed_in(world.root).post(reverse("mcp_server_edit", args=[world.alpha_server.pk]), {
        "name": "alpha-mcp", "transport": "http", "url": world.alpha_server.url, "enabled": "on",
        "project": world.beta.pk,
    })
    tool.refresh_from_db()
    assert moved.status_code == 302 and tool.project == world.beta
    # A server shared by the site gives tools shared by the site, which every project's admin sees.
    signed_in(world.root).post(reverse("mcp_server_discover", args=[world.shared_server.pk]))
    ann = rows(signed_in(world.ann).get(reverse("tool_list")).content.decode(), "tool-table")
    assert ann["site-mcp__search"][0] == "Shared by the site" and "alpha-mcp__search" not in ann
