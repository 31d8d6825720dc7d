"""The names this module used to define, kept importable for code written against it.

New code imports from where they live: `toolsapp.executors` (executor_for, ToolContext,
ToolError), `toolsapp.executors.python` (python_handler, READ_ONLY_HANDLERS) and
`toolsapp.verifiers` (verifier, VERIFIERS). Kept for TOOL_MODULES written before the move;
nothing in the project imports it, so it cannot close an import cycle.
"""
from toolsapp.executors import EXECUTORS, executor_for
from toolsapp.executors.base import Executor, ToolContext, ToolError
from toolsapp.executors.python import PYTHON_HANDLERS, READ_ONLY_HANDLERS, python_handler
from toolsapp.verifiers import VERIFIERS, verifier

__all__ = [
    "EXECUTORS", "PYTHON_HANDLERS", "READ_ONLY_HANDLERS", "VERIFIERS", "Executor", "ToolContext", "ToolError",
    "executor_for", "python_handler", "verifier",
]
