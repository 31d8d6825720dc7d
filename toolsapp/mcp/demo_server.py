"""A small MCP server for the demo and the tests.

    python -m toolsapp.mcp.demo_server [--transport stdio|http] [--port N] [--state FILE]

Stock lives in memory, or in --state FILE so that it survives the one-process-per-call stdio
sessions the executor opens. `restock` honours the caller's idempotency key (request `_meta`):
a repeated key returns the first answer and changes nothing.
"""
import argparse
import json
from pathlib import Path
from typing import Annotated, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from toolsapp.mcp import IDEMPOTENCY_META_KEY

INITIAL_STOCK = {"SKU-1": 12, "SKU-2": 0, "SKU-3": 5}

server = MCPServer(
    "agentsite-demo", instructions="A toy warehouse: look up and restock items.", log_level="WARNING"
)
_state_file: Path | None = None
_memory = {"stock": dict(INITIAL_STOCK), "keys": {}}


class Stock(TypedDict):
    sku: str
    quantity: int


class Restocked(TypedDict):
    sku: str
    quantity: int
    added: int


def _load() -> dict:
    if _state_file is not None and _state_file.exists():
        return json.loads(_state_file.read_text())
    return _memory if _state_file is None else {"stock": dict(INITIAL_STOCK), "keys": {}}


def _save(state: dict) -> None:
    if _state_file is not None:
        _state_file.write_text(json.dumps(state))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_stock(sku: Annotated[str, Field(pattern=r"^SKU-\d+$")]) -> Stock:
    """How many units of an item are in stock."""
    stock = _load()["stock"]
    if sku not in stock:
        raise ToolError(f"unknown sku {sku}")
    return Stock(sku=sku, quantity=stock[sku])


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
def restock(sku: str, quantity: Annotated[int, Field(ge=1, le=1000)], ctx: Context) -> Restocked:
    """Add units of an item to the stock."""
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_META_KEY)
    state = _load()
    if key and key in state["keys"]:
        return state["keys"][key]
    state["stock"][sku] = state["stock"].get(sku, 0) + quantity
    answer = Restocked(sku=sku, quantity=state["stock"][sku], added=quantity)
    if key:
        state["keys"][key] = answer
    _save(state)
    return answer


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def flaky(fail: bool) -> str:
    """Fails on purpose when asked to (for trying out error handling)."""
    if fail:
        raise ToolError("the warehouse is on fire (flaky failed on purpose)")
    return "all good"


def main(argv=None) -> None:
    global _state_file
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--state", type=Path, help="keep stock and idempotency keys in this JSON file")
    args = parser.parse_args(argv)
    _state_file = args.state
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
