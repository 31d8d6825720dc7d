"""Who may make this host run a command: a stdio MCP server's command runs on the web server and
every worker. Only a superuser registers any command; others only what MCP_STDIO_COMMANDS lists;
and a process starts a command only if it is listed or a superuser saved it (so a row written by
other means runs nothing). Real subprocesses; a command that would leave a file proves nothing ran."""
import json
import sys

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.support.approval_fixtures import make_user
from toolsapp.mcp.discovery import mcp_server_discover
from toolsapp.models import McpServer

DEMO = [sys.executable, "-m", "toolsapp.mcp.demo_server"]


@pytest.fixture
def nothing_listed(settings):
    settings.MCP_STDIO_COMMANDS = []


@pytest.fixture
def superuser(demo_data):
    return User.objects.create_superuser("root", "root@localhost", "pw-root")


def marker_command(tmp_path) -> tuple[str, object]:
    marker = tmp_path / "ran"
    return json.dumps([sys.executable, "-c", f"open({str(marker)!r}, 'w')"]), marker


def create(client, **fields):
    return client.post(reverse("mcp_server_create"), {"transport": "stdio", "enabled": "on", **fields})


def test_the_admins_role_cannot_register_a_command_the_operator_did_not_list(demo_data, client, nothing_listed, tmp_path):
    command, marker = marker_command(tmp_path)
    client.force_login(make_user("ada", "admins"))
    response = create(client, name="evil", command=command)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Only a superuser may register the command" in page and "MCP_STDIO_COMMANDS" in page
    assert not McpServer.objects.filter(name="evil").exists() and not marker.exists()


def test_the_admins_role_may_register_a_listed_command(demo_data, client, settings, tmp_path):
    settings.MCP_STDIO_COMMANDS = [sys.executable]
    client.force_login(make_user("ada", "admins"))
    response = create(client, name="demo", command=json.dumps([*DEMO, "--state", str(tmp_path / "s.json")]))
    assert response.status_code == 302
    assert mcp_server_discover(server=McpServer.objects.get(name="demo")).ok


def test_a_superuser_registers_any_command_and_it_runs(superuser, client, nothing_listed, tmp_path):
    client.force_login(superuser)
    response = create(client, name="demo", command=json.dumps([*DEMO, "--state", str(tmp_path / "s.json")]))
    assert response.status_code == 302
    result = mcp_server_discover(server=McpServer.objects.get(name="demo"))
    assert result.ok, result.error
    assert "demo__restock" in result.added


def test_a_row_written_by_other_means_starts_nothing(demo_data, nothing_listed, tmp_path):
    command, marker = marker_command(tmp_path)
    server = McpServer.objects.create(name="planted", command=command)
    result = mcp_server_discover(server=server)
    assert not result.ok and "not in MCP_STDIO_COMMANDS" in result.error and "nothing was started" in result.error
    assert not marker.exists()


def test_a_command_changed_after_a_superuser_saved_it_starts_nothing(superuser, client, nothing_listed, tmp_path):
    client.force_login(superuser)
    create(client, name="demo", command=json.dumps(DEMO))
    command, marker = marker_command(tmp_path)
    McpServer.objects.filter(name="demo").update(command=command)  # e.g. straight in the database
    result = mcp_server_discover(server=McpServer.objects.get(name="demo"))
    assert not result.ok and "not in MCP_STDIO_COMMANDS" in result.error
    assert not marker.exists()


def test_the_admins_role_may_rename_but_not_recommand_a_superusers_server(superuser, client, nothing_listed, tmp_path):
    client.force_login(superuser)
    create(client, name="demo", command=json.dumps([*DEMO, "--state", str(tmp_path / "s.json")]))
    server = McpServer.objects.get(name="demo")
    client.force_login(make_user("ada", "admins"))
    edit = reverse("mcp_server_edit", args=[server.pk])
    command, marker = marker_command(tmp_path)
    refused = client.post(edit, {"name": "demo", "transport": "stdio", "command": command, "enabled": "on"})
    assert refused.status_code == 200 and "Only a superuser may register" in refused.content.decode()
    renamed = client.post(edit, {"name": "stock", "transport": "stdio", "command": server.command, "enabled": "on"})
    assert renamed.status_code == 302
    assert mcp_server_discover(server=McpServer.objects.get(pk=server.pk)).ok  # still approved
    assert not marker.exists()


def test_the_django_admin_applies_the_same_rule(demo_data, client, nothing_listed, tmp_path):
    staff = make_user("sam", "admins")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["add_mcpserver", "change_mcpserver"]))
    client.force_login(staff)
    command, marker = marker_command(tmp_path)
    response = client.post(reverse("admin:toolsapp_mcpserver_add"), {"name": "evil", "transport": "stdio",
                                                                      "command": command, "url": "", "enabled": "on"})
    assert response.status_code == 200 and "Only a superuser may register" in response.content.decode()
    assert not McpServer.objects.filter(name="evil").exists()
