"""What every executor shares: the base class, the context of a call and the expected error."""
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


class Executor:
    """One source kind of tools. `call` returns the result or raises ToolError."""

    def call(self, tool, arguments: dict, context: ToolContext) -> Any:
        raise NotImplementedError
