"""How tools are executed: a registry of source kinds, and of named Python handlers and verifiers."""
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ToolError(Exception):
    """A handler's own, expected failure; its message goes back to the model."""


@dataclass(frozen=True)
class ToolContext:
    run_id: int
    call_id: str
    idempotency_key: str
    customer: str = ""
    extra: dict = field(default_factory=dict)


Handler = Callable[[dict, ToolContext], Any]
Verifier = Callable[..., "tuple[bool, str]"]

PYTHON_HANDLERS: dict[str, Handler] = {}
READ_ONLY_HANDLERS: set[str] = set()
VERIFIERS: dict[str, Verifier] = {}


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


def verifier(name: str):
    """A verifier checks the system's real state when the model gives its final answer.

    It is called as fn(run_id=..., answer=..., customer=...) and returns (ok, reason).
    """

    def register(fn: Verifier) -> Verifier:
        VERIFIERS[name] = fn
        return fn

    return register


class Executor:
    """One source kind of tools. `call` returns the result or raises ToolError."""

    def call(self, tool, arguments: dict, context: ToolContext) -> Any:
        raise NotImplementedError


class PythonExecutor(Executor):
    def call(self, tool, arguments, context):
        handler = PYTHON_HANDLERS.get(tool.handler or tool.name)
        if handler is None:
            raise ToolError(f"no Python handler named {tool.handler or tool.name!r} is registered")
        return handler(arguments, context)


EXECUTORS: dict[str, Executor] = {"python": PythonExecutor()}


def register_executors() -> None:
    """Add the remote sources (called once the app is ready: their modules import this one)."""
    from toolsapp.http_tools import HttpExecutor
    from toolsapp.mcp.executor import McpExecutor

    EXECUTORS.setdefault("http", HttpExecutor())
    EXECUTORS.setdefault("mcp", McpExecutor())


def executor_for(kind: str) -> Executor:
    try:
        return EXECUTORS[kind]
    except KeyError:
        raise ToolError(f"tools of kind {kind!r} cannot be executed by this installation") from None
