"""Discovery: list an MCP server's tools and keep its Tool rows in step with them.

The server owns a tool's description and schema; the admin owns its flags. So re-discovery
updates the first and never touches `destructive`, `idempotent`, `parallel_safe` or an admin's
`enabled`. A tool the server no longer lists (or now lists with a schema we refuse) is
disabled, not deleted: past runs still point at it, and it comes back when the server fixes it.
"""
import re
from dataclasses import dataclass, field

import mcp.types as mcp_types
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from toolsapp.mcp.client import McpFailure, list_tools
from toolsapp.mcp.services import tools_follow_server
from toolsapp.models import McpServer, Tool
from toolsapp.schemas import InvalidSchema, check_tool_schema

MAX_TOOLS = 500
MAX_DESCRIPTION_CHARS = 4000
NAME_SEPARATOR = "__"


@dataclass
class DiscoveryResult:
    server: McpServer
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (the server's tool name, why)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def summary(self) -> str:
        if self.error:
            return f"Discovery of {self.server.name} failed: {self.error}"
        parts = [f"{len(self.added)} added", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged",
                 f"{len(self.disabled)} disabled", f"{len(self.refused)} refused"]
        return f"Discovered the tools of {self.server.name}: {', '.join(parts)}."


def tool_name_for(server_name: str, remote_name: str, taken: set[str]) -> str:
    """A chat-completions function name (^[A-Za-z0-9_-]{1,64}$) not in `taken`."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server_name}{NAME_SEPARATOR}{remote_name}")[:64]
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: 64 - len(suffix)] + suffix
    return name


def _flags_for_new_tool(annotations: mcp_types.ToolAnnotations | None) -> dict:
    # Hints are the server's claims; when in doubt, a person approves. MCP's own default for a
    # tool that is not read-only is destructiveHint=true, so only an explicit "no" lifts it.
    hints = annotations or mcp_types.ToolAnnotations()
    read_only = hints.read_only_hint is True
    return {
        "destructive": not (read_only or hints.destructive_hint is False),
        "idempotent": read_only or hints.idempotent_hint is True,
        "parallel_safe": read_only,
    }


def mcp_server_discover(*, server: McpServer) -> DiscoveryResult:
    result = DiscoveryResult(server=server)
    timeout = settings.MCP_DISCOVERY_TIMEOUT_SECONDS
    try:
        listed = list_tools(server, timeout=timeout)
    except McpFailure as exc:
        result.error = str(exc)
        McpServer.objects.filter(pk=server.pk).update(last_error=result.error, updated_at=timezone.now())
        server.last_error = result.error
        return result
    if len(listed) > MAX_TOOLS:
        result.refused.extend((t.name, f"more than {MAX_TOOLS} tools") for t in listed[MAX_TOOLS:])
        listed = listed[:MAX_TOOLS]

    with transaction.atomic():
        # One discovery of a server at a time: two at once would both add the same new tools.
        locked = McpServer.objects.select_for_update().filter(pk=server.pk).first()
        if locked is not None:
            server.project_id = locked.project_id  # its tools are in its project as it is now
        tools_follow_server(server)
        existing = {
            tool.config.get("remote_name"): tool
            for tool in Tool.objects.select_for_update().filter(kind=Tool.Kind.MCP, mcp_server=server)
        }
        taken = set(Tool.objects.values_list("name", flat=True))
        seen: set[str] = set()
        for remote in listed:
            if remote.name in seen:
                continue  # a server listing a name twice: the first one counts
            seen.add(remote.name)
            _store(server, remote, existing.get(remote.name), taken, result)
        for remote_name, tool in existing.items():
            if remote_name not in seen and tool.enabled:
                _disable(tool)
                result.disabled.append(tool.name)
        server.last_discovered_at = timezone.now()
        server.last_error = ""
        McpServer.objects.filter(pk=server.pk).update(
            last_discovered_at=server.last_discovered_at, last_error="", updated_at=timezone.now()
        )
    return result


def _store(server: McpServer, remote: mcp_types.Tool, tool: Tool | None, taken: set[str], result: DiscoveryResult):
    schema = remote.input_schema
    try:
        check_tool_schema(schema)
    except InvalidSchema as exc:
        result.refused.append((remote.name, str(exc)))
        if tool is not None and tool.enabled:
            _disable(tool)  # its stored schema no longer describes what the server expects
            result.disabled.append(tool.name)
        return
    description = (remote.description or remote.title or "")[:MAX_DESCRIPTION_CHARS]
    if tool is None:
        name = tool_name_for(server.name, remote.name, taken)
        taken.add(name)
        Tool.objects.create(
            name=name, kind=Tool.Kind.MCP, description=description, parameters=schema, project_id=server.project_id,
            mcp_server=server, config={"remote_name": remote.name}, **_flags_for_new_tool(remote.annotations),
        )
        result.added.append(name)
        return
    # Only a tool that discovery itself disabled comes back; one an admin disabled stays off.
    revived = not tool.enabled and tool.config.get("disabled_by_discovery")
    if tool.description == description and tool.parameters == schema and not revived:
        result.unchanged.append(tool.name)
        return
    tool.description, tool.parameters = description, schema
    if revived:
        tool.enabled = True
        tool.config = {key: value for key, value in tool.config.items() if key != "disabled_by_discovery"}
    tool.save(update_fields=["description", "parameters", "enabled", "config", "updated_at"])
    result.updated.append(tool.name)


def _disable(tool: Tool) -> None:
    tool.enabled = False
    tool.config = {**tool.config, "disabled_by_discovery": True}
    tool.save(update_fields=["enabled", "config", "updated_at"])
