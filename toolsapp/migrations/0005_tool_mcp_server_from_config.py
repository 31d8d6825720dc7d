"""MCP tools pointed at their server through config["server"] (an id in JSON): move it into the
foreign key. An id whose server is gone leaves the key empty (the tool could not run before
either); the reverse writes the id back into config."""
from django.db import migrations


def config_to_foreign_key(apps, schema_editor):
    Tool = apps.get_model("toolsapp", "Tool")
    McpServer = apps.get_model("toolsapp", "McpServer")
    servers = set(McpServer.objects.values_list("pk", flat=True))
    for tool in Tool.objects.filter(config__has_key="server"):
        config = dict(tool.config)
        server_id = config.pop("server")
        try:
            server_id = int(server_id)
        except (TypeError, ValueError):
            server_id = None
        tool.mcp_server_id = server_id if server_id in servers else None
        tool.config = config
        tool.save(update_fields=["mcp_server", "config"])


def foreign_key_to_config(apps, schema_editor):
    Tool = apps.get_model("toolsapp", "Tool")
    for tool in Tool.objects.filter(mcp_server__isnull=False):
        tool.config = {**tool.config, "server": tool.mcp_server_id}
        tool.mcp_server = None
        tool.save(update_fields=["mcp_server", "config"])


class Migration(migrations.Migration):

    dependencies = [
        ("toolsapp", "0004_tool_mcp_server"),
    ]

    operations = [
        migrations.RunPython(config_to_foreign_key, foreign_key_to_config),
    ]
