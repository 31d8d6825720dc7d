"""A call's arguments as the queue, the run page and e-mails show them: pretty-printed JSON
lines, sensitive values masked, identifiers the run was never shown flagged (plain data in, plain
data out)."""
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from toolsapp.sensitive import MASK

# One encoder for every value: json.dumps with an argument builds a new JSONEncoder per call, the
# most of this module's time on a page of fifty cards.
_json = json.JSONEncoder(ensure_ascii=False).encode


@dataclass(frozen=True)
class ArgumentLine:
    """One line of pretty-printed JSON arguments, so a template can mark single values."""

    indent: str
    key: str  # JSON-encoded key, or "" for list items and brackets
    text: str  # the JSON value, a bracket, or MASK
    comma: bool = False
    masked: bool = False
    unseen: tuple[str, ...] = ()


def argument_lines(
    arguments: Any, *, sensitive_fields: Iterable[str], unseen: Callable[[str | None, Any], list[str]]
) -> list[ArgumentLine]:
    """Pretty-print `arguments` as JSON lines, masking sensitive keys and flagging unseen ids.

    `unseen(key, value)` returns the unseen identifiers of one scalar value; masked values
    are never passed to it (a flag next to a mask would hint at what it hides).
    """
    sensitive = {f.lower() for f in sensitive_fields}
    lines: list[ArgumentLine] = []

    def emit(value: Any, *, key: str | None, label: str, depth: int, comma: bool) -> None:
        indent = "  " * depth
        if key is not None and label and key.lower() in sensitive:
            lines.append(ArgumentLine(indent, label, MASK, comma, masked=True))
            return
        if isinstance(value, dict) and value:
            lines.append(ArgumentLine(indent, label, "{"))
            items = list(value.items())
            for n, (k, v) in enumerate(items):
                emit(v, key=str(k), label=_json(str(k)), depth=depth + 1, comma=n < len(items) - 1)
            lines.append(ArgumentLine(indent, "", "}", comma))
        elif isinstance(value, list) and value:
            lines.append(ArgumentLine(indent, label, "["))
            for n, v in enumerate(value):
                # Items of a list take the list's name: order_ids: ["ORD-1", ...] holds ids.
                emit(v, key=key, label="", depth=depth + 1, comma=n < len(value) - 1)
            lines.append(ArgumentLine(indent, "", "]", comma))
        else:
            text = _json(value)
            flagged = tuple(unseen(key, value)) if not isinstance(value, (dict, list)) else ()
            lines.append(ArgumentLine(indent, label, text, comma, unseen=flagged))

    emit(arguments, key=None, label="", depth=0, comma=False)
    return lines
