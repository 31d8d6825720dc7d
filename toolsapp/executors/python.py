"""Python tools: functions registered by name in this process (built-in or from TOOL_MODULES)."""
from collections.abc import Callable
from typing import Any

from toolsapp.executors.base import Executor, ToolContext, ToolError

Handler = Callable[[dict, ToolContext], Any]

PYTHON_HANDLERS: dict[str, Handler] = {}
READ_ONLY_HANDLERS: set[str] = set()


def python_handler(name: str, *, read_only: bool = False):
    """Register a handler for Python tools named `name` (or whose handler field says so).

    read_only=True promises that the handler changes nothing anywhere (a lookup): the loop may
    then run its calls before it records the step that asked for them, in one commit with their
    results. A handler with any effect, idempotent or not, must not say so: after a crash before
    that commit the model is asked again and answers with a new call id, hence a new
    idempotency key, and the effect would happen twice.
    """

    def register(fn: Handler) -> Handler:
        PYTHON_HANDLERS[name] = fn
        if read_only:
            READ_ONLY_HANDLERS.add(name)
        else:
            READ_ONLY_HANDLERS.discard(name)
        return fn

    return register


class PythonExecutor(Executor):
    def run(self, tool, arguments, context):
        handler = PYTHON_HANDLERS.get(tool.handler or tool.name)
        if handler is None:
            raise ToolError(f"no Python handler named {tool.handler or tool.name!r} is registered")
        return handler(arguments, context)
