"""How tools are executed: one executor per source kind (Python, HTTP, MCP), side by side.

`executor_for(tool.kind)` is the only lookup the loop needs; each executor's module holds what
is particular to its kind (the handler registry, the HTTP config rules, the MCP result shapes).
"""
from toolsapp.executors.base import Executor, ToolContext, ToolError
from toolsapp.executors.http import HttpExecutor
from toolsapp.executors.mcp import McpExecutor
from toolsapp.executors.python import PythonExecutor
from toolsapp.models import Tool

__all__ = ["EXECUTORS", "Executor", "ToolContext", "ToolError", "executor_for"]

EXECUTORS: dict[str, Executor] = {
    Tool.Kind.PYTHON: PythonExecutor(),
    Tool.Kind.HTTP: HttpExecutor(),
    Tool.Kind.MCP: McpExecutor(),
}


def executor_for(kind: str) -> Executor:
    try:
        return EXECUTORS[kind]
    except KeyError:
        raise ToolError(f"tools of kind {kind!r} cannot be executed by this installation") from None
