"""Executes tools of kind "mcp" through the MCP client (one session per call).

The MCP SDK (and the pydantic models under it) is imported on the first MCP call, not with the
registry: it is over a second of CPU and tens of megabytes in every process that sets Django up,
web server, worker and manage.py alike, most of which never call an MCP tool.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.conf import settings

from hosting.text import MAX_JSON_DEPTH, nested_deeper_than
from toolsapp.executors.base import Discovery, Executor, ToolContext, ToolError
from toolsapp.mcp import IDEMPOTENCY_META_KEY

if TYPE_CHECKING:
    import mcp.types as mcp_types


def _blocks(content: list[mcp_types.ContentBlock]):
    """Text blocks as their text (one block: just the string); others as their JSON form."""
    items = [
        block.text if block.type == "text"  # the SDK's discriminator: a TextContent
        else block.model_dump(mode="json", by_alias=True, exclude_none=True)
        for block in content
    ]
    return items[0] if len(items) == 1 else items


def _error_text(result: mcp_types.CallToolResult) -> str:
    texts = [block.text for block in result.content if block.type == "text"]
    return " ".join(texts).strip() or "the MCP tool reported an error"


class McpExecutor(Executor):
    kind, label, order = "mcp", "MCP server", 20
    reaches_outside = True
    discovery = Discovery(
        added="MCP tools are added by discovering an MCP server's tools.",
        keeps_name="An MCP tool keeps the name discovery gave it.",
        no_handler="An MCP tool runs on its server: it has no handler.",
        project="An MCP tool is in its server's project: move the server to move it.",
        not_copied="{tool} comes from an MCP server: add the server to {project} and its tools come with it.",
    )
    detail_template = "toolsapp/kinds/_mcp.html"

    def run(self, tool, arguments: dict, context: ToolContext):
        from toolsapp.mcp.client import McpFailure, call_tool  # the SDK, on the first MCP call

        server = tool.mcp_server
        remote_name = (tool.config or {}).get("remote_name")
        if server is None or not remote_name:
            raise ToolError(f"tool {tool.name} is not linked to an MCP server")
        try:
            result = call_tool(
                server, remote_name, arguments,
                meta={IDEMPOTENCY_META_KEY: context.idempotency_key}, timeout=tool.timeout_seconds,
            )
        except McpFailure as exc:
            raise ToolError(str(exc)) from None
        if result.is_error:
            raise ToolError(_error_text(result))
        value = result.structured_content if result.structured_content is not None else _blocks(result.content)
        return _bounded(value)


def _bounded(value):
    """`value`, or a ToolError when it is larger than MCP_MAX_RESULT_BYTES as JSON (as for HTTP
    tools) or nested deeper than MAX_JSON_DEPTH: the model gets an error, not an unbounded row."""
    if nested_deeper_than(value):
        raise ToolError(f"the MCP tool's result is nested deeper than {MAX_JSON_DEPTH} levels")
    limit = settings.MCP_MAX_RESULT_BYTES
    size = len(json.dumps(value, ensure_ascii=False, default=str).encode())
    if size > limit:
        raise ToolError(f"the MCP tool's result is larger than {limit} bytes ({size} bytes)")
    return value
