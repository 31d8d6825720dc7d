"""Which project each of the tools app's routes is about (projects/routes.py); a tool or server
of no project is shared by the site."""
from projects.routes import register, values
from toolsapp.models import McpServer, Tool

tool = values(Tool, "project_id", pk="pk")
server = values(McpServer, "project_id", pk="pk")


def register_routes() -> None:
    register({
        **dict.fromkeys(["tool_detail", "tool_edit", "api-tool-detail"], tool),
        **dict.fromkeys(["mcp_server_detail", "mcp_server_edit", "mcp_server_delete", "mcp_server_discover"], server),
    })
