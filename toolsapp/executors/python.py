"""Python tools: functions registered by name in this process (built-in, or from the modules of toolsapp/plugins.py)."""
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from toolsapp.executors.base import Executor, ToolContext, ToolError

Handler = Callable[[dict, ToolContext], Any]

PYTHON_HANDLERS: dict[str, Handler] = {}
READ_ONLY_HANDLERS: set[str] = set()
HANDLER_MODULES: dict[str, str] = {}  # name -> the module that registered it


def claim_name(kind: str, name: str, fn: Callable, owners: dict[str, str]) -> None:
    """Record that fn's module registers `name`; a name two modules register is an error.

    The same module may register a name again (a reload, a test); two packages that both ship a
    `lookup` would otherwise have one silently replace the other, in an order nobody chose.
    """
    module = getattr(fn, "__module__", None) or "?"
    first = owners.setdefault(name, module)
    if first != module:
        raise ImproperlyConfigured(f"{kind} {name!r} is registered by both {first} and {module}; rename one of them")


def python_handler(name: str, *, read_only: bool = False):
    """Register a handler for Python tools named `name` (or whose handler field says so).

    read_only=True promises that the handler changes nothing anywhere (a lookup): the loop may
    then run its calls before it records the step that asked for them, in one commit with their
    results. A handler with any effect, idempotent or not, must not say so: after a crash before
    that commit the model is asked again and answers with a new call id, hence a new
    idempotency key, and the effect would happen twice.
    """

    def register(fn: Handler) -> Handler:
        claim_name("Python tool handler", name, fn, HANDLER_MODULES)
        PYTHON_HANDLERS[name] = fn
        if read_only:
            READ_ONLY_HANDLERS.add(name)
        else:
            READ_ONLY_HANDLERS.discard(name)
        return fn

    return register


class PythonExecutor(Executor):
    kind, label, order = "python", "Python handler", 0
    detail_template = "toolsapp/kinds/_handler.html"

    def notices(self, tool) -> list[str]:
        if (tool.handler or tool.name) not in PYTHON_HANDLERS:
            return [f"No Python handler named {tool.handler or tool.name!r} is registered."]
        return []

    def run(self, tool, arguments, context):
        handler = PYTHON_HANDLERS.get(tool.handler or tool.name)
        if handler is None:
            raise ToolError(f"no Python handler named {tool.handler or tool.name!r} is registered")
        return handler(arguments, context)
