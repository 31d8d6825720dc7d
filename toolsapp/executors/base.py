"""What every executor shares: the base class, the context of a call and the expected error."""
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from toolsapp.sensitive import redact, sensitive_values

log = logging.getLogger(__name__)


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
    """One source kind of tools. `call` returns the result or raises ToolError; each kind
    implements `run`."""

    def call(self, tool, arguments: dict, context: ToolContext) -> Any:
        """Run the call. When the tool has sensitive fields, no failure leaves here holding their
        values: a handler's or a server's error text may quote the arguments, and it is recorded,
        shown to every viewer and logged."""
        secrets = sensitive_values(arguments, tool.sensitive_fields)
        if not secrets:
            return self.run(tool, arguments, context)
        try:
            return self.run(tool, arguments, context)
        except ToolError as exc:
            raise ToolError(redact(str(exc), secrets)) from None
        except Exception as exc:  # noqa: BLE001 - logged here, redacted, instead of by the caller
            text = redact("".join(traceback.format_exception(exc)), secrets)
            log.warning("tool %s raised %s (sensitive arguments blanked)\n%s", tool.name, type(exc).__name__, text)
            if isinstance(exc, DatabaseError):  # the caller drops the broken connection
                raise DatabaseError(f"{type(exc).__name__} (details logged, sensitive arguments blanked)") from None
            raise ToolError(f"the tool failed with an unexpected {type(exc).__name__}") from None

    def run(self, tool, arguments: dict, context: ToolContext) -> Any:
        raise NotImplementedError
