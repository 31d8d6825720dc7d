"""An MCP server (stdio) that misbehaves in ways discovery and the client must survive:
a tool whose schema points at a remote $ref, one that reports its environment, one that hangs,
one whose output schema would hang a client that checked results with Python's re, one whose
result is as large as asked."""
import os

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("odd", log_level="WARNING")


@server.tool()
def env_names() -> list[str]:
    """The names of the environment variables this server was started with."""
    return sorted(os.environ)


@server.tool()
async def hang(seconds: float) -> str:
    """Sleeps."""
    await anyio.sleep(seconds)
    return "woke up"


@server.tool()
def remote_ref(x: str) -> str:
    """Its listed schema fetches a definition from the network."""
    return x


server._tool_manager.get_tool("remote_ref").parameters = {
    "type": "object", "properties": {"x": {"$ref": "https://schemas.example.invalid/x.json"}},
}

@server.tool()
def evil_output() -> dict[str, str]:
    """Its declared output schema has a pattern that takes exponential time in Python's re."""
    return {"name": "a" * 40 + "!"}


server._tool_manager.get_tool("evil_output").output_schema = {
    "type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
}



@server.tool()
def huge(size: int) -> str:
    """A result of `size` characters."""
    return "z" * size


if __name__ == "__main__":
    server.run("stdio")
