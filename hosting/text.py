"""Text and JSON the system refuses before using it.

Text the database cannot store: NUL characters and unpaired surrogates. PostgreSQL refuses
both, in text and in jsonb (SQLite would store them), so they are refused before any query.

JSON nested too deeply: Python's json parser recurses once per level and raises RecursionError
(not ValueError) past about a thousand, and every recursive walk after it (rendering, schema
checks, the database's jsonb) has its own limit. JSON from outside (a model's arguments and
answers, schemas, provider options, API bodies, websocket frames) is read with `loads`, which
refuses more than MAX_JSON_DEPTH levels with a ValueError that says so.
"""
import json
import re

_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_JSON_DEPTH = 64
# The largest integer JSON readers agree on (a double's exact range): the bound of every count people type.
MAX_SAFE_INTEGER = 2**53 - 1
# Strings first (a bracket inside a string does not nest), then the brackets that are left.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")
_STRING_B = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET_B = re.compile(rb"[\[\]{}]")


class JsonTooDeep(ValueError):
    """JSON nested deeper than allowed. A ValueError, so every `except ValueError` around a
    json.loads already reports it as unreadable input."""

    def __init__(self, limit: int = MAX_JSON_DEPTH):
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


def storable_text(text: str) -> bool:
    """False for NUL and lone surrogates."""
    return "\x00" not in text and not _SURROGATE.search(text)


def storable_json(value) -> bool:
    """False when a string anywhere in `value` (dict keys too) cannot be stored."""
    pending = [value]  # a loop, not recursion: the value may be nested thousands of levels deep
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not storable_text(item):
                return False
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return True


def text_nested_deeper_than(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text `text` opens more than `limit` brackets at once (read without parsing)."""
    string, bracket = (_STRING_B, _BRACKET_B) if isinstance(text, bytes) else (_STRING, _BRACKET)
    opening = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    depth = 0
    for match in bracket.finditer(string.sub(b"" if isinstance(text, bytes) else "", text)):
        if match.group() in opening:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def nested_deeper_than(value, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when a parsed value (dicts, lists) nests more than `limit` levels (a loop, not recursion)."""
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list | tuple):
            if depth + 1 > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, **kwargs):
    """json.loads that refuses JSON nested deeper than `max_depth` (JsonTooDeep, a ValueError)."""
    if text_nested_deeper_than(text, max_depth):
        raise JsonTooDeep(max_depth)
    try:
        return json.loads(text, **kwargs)
    except RecursionError:  # not reached after the scan above; kept so no caller ever sees one
        raise JsonTooDeep(max_depth) from None
