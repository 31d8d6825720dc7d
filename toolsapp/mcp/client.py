"""Talking to an MCP server from synchronous code: one session per operation.

The SDK is async; callers here are plain threads (tool pool threads, views, commands) that are
never inside a running event loop, so each operation runs its own loop with `anyio.run`.
Opening a session per operation costs a process start (stdio) or a handshake (HTTP) each time,
but keeps no state between calls that could go stale, leak or be shared between threads.
"""
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp.types as mcp_types
from django.conf import settings
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from toolsapp.mcp.services import stdio_start_refusal
from toolsapp.models import McpServer

# A server that keeps answering with a next cursor cannot keep discovery going for ever.
MAX_TOOL_PAGES = 20


class McpFailure(Exception):
    """The server could not be reached or did not answer properly; the message says why."""


def _stdio_env() -> dict[str, str]:
    # Only the variables named in settings: the server must not see the app's secrets.
    names = settings.MCP_STDIO_ENV_PASSTHROUGH
    return {name: os.environ[name] for name in names if name in os.environ}


def _target(server: McpServer, timeout: float):
    """What the SDK's Client connects to, and the HTTP client to close afterwards (or None)."""
    if server.transport == McpServer.Transport.HTTP:
        from toolsapp.net import pinned_async_client

        # Checked before any request (raises toolsapp.net.Blocked, a ValueError), and the SDK's
        # requests can then reach only the checked address: no second DNS answer swaps it.
        http_client = pinned_async_client(server.url, timeout=timeout)
        return streamable_http_client(server.url, http_client=http_client), http_client
    refusal = stdio_start_refusal(server)  # whoever wrote the row: the host's rule decides here
    if refusal:
        raise ValueError(refusal)
    argv = server.argv()
    return StdioServerParameters(command=argv[0], args=argv[1:], env=_stdio_env(), cwd=str(settings.BASE_DIR)), None


def _first_leaf(exc: BaseException) -> BaseException:
    # Task groups inside the SDK wrap failures in exception groups; the first leaf says what happened.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def with_session(server: McpServer, operation: Callable[[Client], Awaitable[Any]], *, timeout: float) -> Any:
    """Open a session to `server`, run `operation(client)` and close it, all within `timeout` seconds.

    The deadline covers connecting too: the caller gives up on a stuck thread but cannot stop
    it, so the thread must stop itself (which also ends a stdio server's process).
    """
    if not server.enabled:
        raise McpFailure(f"MCP server {server.name} is disabled")
    try:
        target, http_client = _target(server, timeout)
    except ValueError as exc:  # a blocked URL or an unusable command: nothing was started or requested
        raise McpFailure(f"MCP server {server.name} refused: {exc}") from exc

    async def main():
        with anyio.fail_after(timeout):
            async with AsyncExitStack() as stack:
                if http_client is not None:  # the SDK leaves a client it was given open
                    await stack.enter_async_context(http_client)
                client = await stack.enter_async_context(Client(target, cache=None))
                return await operation(client)

    try:
        return anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one readable message
        leaf = _first_leaf(exc)
        if isinstance(leaf, KeyboardInterrupt | SystemExit):
            raise
        if isinstance(leaf, TimeoutError):
            raise McpFailure(f"MCP server {server.name} did not answer within {timeout:g} seconds") from None
        raise McpFailure(f"MCP server {server.name} failed: {_describe(leaf)}") from None


def list_tools(server: McpServer, *, timeout: float) -> list[mcp_types.Tool]:
    async def collect(client: Client) -> list[mcp_types.Tool]:
        tools, cursor = [], None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return with_session(server, collect, timeout=timeout)


def call_tool(
    server: McpServer, name: str, arguments: dict, *, meta: dict, timeout: float
) -> mcp_types.CallToolResult:
    async def call(client: Client) -> mcp_types.CallToolResult:
        # The result goes back to the model as data, unchecked against the server's output schema:
        # the SDK would check it with Python's re (a hostile `pattern` could spin this thread past
        # its timeout) after an extra tools/list round trip. An entry of None means "no schema".
        # (A private attribute of mcp 2.3, which requirements.txt pins.)
        client.session._tool_output_schemas[name] = None
        return await client.call_tool(name, arguments, meta=meta)

    return with_session(server, call, timeout=timeout)
