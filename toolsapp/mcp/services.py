"""Changes to MCP servers besides discovery (toolsapp.mcp.discovery)."""
from django.db import transaction
from django.utils import timezone

from toolsapp.models import McpServer, Tool


def mcp_server_delete(*, server: McpServer) -> list[str]:
    """Delete a server and disable its enabled tools; the names of the tools it disabled.

    The tools stay: agents list them and past runs name them. Nothing can run them any more, so
    they are disabled (an agent that still lists one cannot start a run until an admin removes
    or replaces it) rather than left to fail on every call.
    """
    with transaction.atomic():
        tools = list(Tool.objects.select_for_update().filter(mcp_server=server, enabled=True).order_by("name"))
        Tool.objects.filter(pk__in=[tool.pk for tool in tools]).update(enabled=False, updated_at=timezone.now())
        server.delete()  # its tools' mcp_server becomes empty (SET_NULL)
    return [tool.name for tool in tools]


def deletion_summary(server_name: str, disabled: list[str]) -> str:
    """What the operator reads after deleting a server."""
    if not disabled:
        return f"MCP server {server_name} deleted; it had no enabled tools."
    count = f"{len(disabled)} tool{'s' if len(disabled) != 1 else ''}"
    return f"MCP server {server_name} deleted; {count} disabled: {', '.join(disabled)}."
