"""Which value of a call a tool's settings take: paths such as `$.order_id` or `$.items[0].sku`
into a call's arguments, as a state check (Tool.state_check) or a required read
(Tool.requires_read) names them: {"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}.

The tool editor, the loop and the state checks read them here (toolsapp sits below runs); the
approval rules read the same syntax with their own reader (runs/supervision/rules/conditions.py)."""
import json
import re
from typing import Any

_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")
MISSING = object()  # no value at the path
MAX_PATH_CHARS = 300


def path_parts(path: Any) -> list[str | int]:
    """The keys and indexes of a path ("$.items[0].sku" -> ["items", 0, "sku"]); ValueError when
    it is not one."""
    if not isinstance(path, str) or not path.strip().startswith("$") or len(path) > MAX_PATH_CHARS:
        raise ValueError(f"{path!r} is not a JSON path: write $.name (or $.list[0], $[\"odd key\"])")
    rest, parts = path.strip()[1:], []
    while rest:
        match = _PART.match(rest)
        if match is None:
            raise ValueError(f"{path!r} is not a JSON path: write $.name (or $.list[0], $[\"odd key\"])")
        name, index, quoted = match.groups()
        parts.append(int(index) if index is not None else (name if name is not None else quoted))
        rest = rest[match.end():]
    if not parts:
        raise ValueError(f"{path!r} names the whole arguments: write the path of one value, such as $.order_id")
    return parts


def value_at(arguments: Any, path: str) -> Any:
    """The value at `path` in `arguments`, or MISSING."""
    current = arguments
    for part in path_parts(path):
        if isinstance(part, int):
            if not isinstance(current, list) or part >= len(current):
                return MISSING
        elif not isinstance(current, dict) or part not in current:
            return MISSING
        current = current[part]
    return current


def arguments_taken(mapping: dict, arguments: Any) -> tuple[dict, list[str]]:
    """({argument name: the call's value at its path}, the paths the call has no value at)."""
    taken, missing = {}, []
    for name, path in mapping.items():
        value = value_at(arguments, path)
        if value is MISSING:
            missing.append(path)
        else:
            taken[name] = value
    return taken, missing


def same_value(a: Any, b: Any) -> bool:
    """Equal as a person reads them: texts trimmed and compared case-insensitively ("ord-1001 "
    is ORD-1001), a number equal to its text (1001 is "1001"), anything else as JSON."""
    return _comparable(a) == _comparable(b)


def _comparable(value: Any) -> str:
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
