"""A call's sensitive arguments (the tool's `sensitive_fields`, masked in the approvals queue):
finding their values, and blanking them out of text that is recorded, logged or shown to every
viewer (validation messages, a handler's exception, a server's error body).

A field is sensitive at any depth, by name, case-insensitively, as the queue's mask does; items of
a list take the list's name, and everything under a sensitive key is sensitive.
"""
import json
from collections.abc import Iterable, Iterator

MASK = "••••"
# Shorter values cannot be blanked out of free text without blanking ordinary words with them;
# validation messages about sensitive fields never quote a value at all (toolsapp.schemas).
MIN_REDACTED_CHARS = 3


def _names(sensitive_fields: Iterable[str]) -> set[str]:
    return {name.lower() for name in sensitive_fields or () if isinstance(name, str)}


def masked(value, sensitive_fields: Iterable[str]):
    """`value` with every sensitive key's value replaced by MASK, at any depth: the one masking of
    arguments, wherever they are shown (the queue, the run page, e-mails) or kept (the archive)."""
    names = _names(sensitive_fields)

    def mask(node):
        if isinstance(node, dict):
            return {k: MASK if str(k).lower() in names else mask(v) for k, v in node.items()}
        if isinstance(node, list):
            return [mask(v) for v in node]
        return node

    return mask(value)


def sensitive_items(arguments, sensitive_fields: Iterable[str]) -> Iterator[tuple[str, object]]:
    """Each (key, value) of `arguments` whose key is sensitive, at any depth; nothing under such a
    key is looked at again (it is all sensitive)."""
    names = _names(sensitive_fields)

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if str(key).lower() in names:
                    yield str(key), item
                else:
                    yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    if names:
        yield from walk(arguments)


def sensitive_values(arguments, sensitive_fields: Iterable[str]) -> list[str]:
    """Each sensitive value as the texts it may appear as (itself, its JSON and repr forms)."""
    found: list[str] = []

    def scalars(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from scalars(item)
        elif isinstance(value, list):
            for item in value:
                yield from scalars(item)
        elif isinstance(value, str):
            yield from (value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1])
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield from (str(value), json.dumps(value))

    for _key, item in sensitive_items(arguments, sensitive_fields):
        found.extend(scalars(item))
    return sorted({text for text in found if len(text) >= MIN_REDACTED_CHARS}, key=len, reverse=True)


def redact(text: str, values: Iterable[str]) -> str:
    """`text` with each of `values` replaced by the mask, longest first (one may contain another)."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def touches_sensitive(path: Iterable, instance, sensitive_fields: Iterable[str]) -> bool:
    """Whether a place in the arguments (its path of keys and indexes, and the value found there)
    is or holds a sensitive field."""
    names = _names(sensitive_fields)
    if not names:
        return False
    if any(isinstance(part, str) and part.lower() in names for part in path):
        return True

    def holds(value) -> bool:
        if isinstance(value, dict):
            return any(str(key).lower() in names or holds(item) for key, item in value.items())
        if isinstance(value, list):
            return any(holds(item) for item in value)
        return False

    return holds(instance)


def sensitive_values_in_messages(messages: list[dict], tools: dict) -> list[str]:
    """The sensitive argument values of every tool call in a conversation (`tools`: Tool by name),
    which a model server's error body may echo back."""
    by_tool = {name: tool.sensitive_fields for name, tool in tools.items() if tool.sensitive_fields}
    if not by_tool:
        return []
    values: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or () if message.get("role") == "assistant" else ():
            function = call.get("function") or {}
            if function.get("name") not in by_tool:
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                continue
            values.update(sensitive_values(arguments, by_tool[function["name"]]))
    return sorted(values, key=len, reverse=True)
