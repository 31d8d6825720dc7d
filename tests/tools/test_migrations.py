"""The data migration that moved an MCP tool's server from config["server"] into the foreign key."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("toolsapp", "0004_tool_mcp_server")]
AFTER = [("toolsapp", "0005_tool_mcp_server_from_config")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()  # the graph as the database has it now
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # back to the latest schema


def test_the_server_id_moves_from_config_into_the_foreign_key_and_back(old_apps):
    McpServer, Tool = old_apps.get_model("toolsapp", "McpServer"), old_apps.get_model("toolsapp", "Tool")
    server = McpServer.objects.create(name="wh", command="demo-mcp")
    Tool.objects.create(name="wh__add", kind="mcp", parameters={"type": "object"},
                        config={"server": server.pk, "remote_name": "add", "disabled_by_discovery": True})
    Tool.objects.create(name="gone__x", kind="mcp", parameters={"type": "object"},
                        config={"server": server.pk + 1000, "remote_name": "x"})
    Tool.objects.create(name="http_tool", kind="http", parameters={"type": "object"},
                        config={"url": "https://example.com/"})

    new_apps = migrate(AFTER)
    Tool = new_apps.get_model("toolsapp", "Tool")
    linked = Tool.objects.get(name="wh__add")
    assert linked.mcp_server_id == server.pk
    assert linked.config == {"remote_name": "add", "disabled_by_discovery": True}
    orphan = Tool.objects.get(name="gone__x")  # its server was deleted before the migration
    assert orphan.mcp_server_id is None and orphan.config == {"remote_name": "x"}
    http = Tool.objects.get(name="http_tool")
    assert http.mcp_server_id is None and http.config == {"url": "https://example.com/"}

    Tool = migrate(BEFORE).get_model("toolsapp", "Tool")
    assert Tool.objects.get(name="wh__add").config == {
        "remote_name": "add", "disabled_by_discovery": True, "server": server.pk}
    assert Tool.objects.get(name="gone__x").config == {"remote_name": "x"}
