"""What the model reads with the result of a call an operator edited before approving it: a
note and each changed value by JSON path. The model sees its own call in the conversation and must
not take this result for that call's."""
from typing import Any

from toolsapp.sensitive import MASK

EDIT_NOTE = "An operator changed the arguments before approving; the call ran with the changed arguments."


def operator_edit(original: Any, executed: Any, *, sensitive_fields=()) -> dict:
    """What the model reads with the result of a call an operator edited: a note and each changed
    value by JSON path ({"$.reason": {"from": "x", "to": "y"}}; "from" is left out for an added
    value and "to" for a removed one). A sensitive field's values show as the mask."""
    sensitive = {f.lower() for f in sensitive_fields}
    changed: dict[str, dict] = {}

    def walk(before: Any, after: Any, path: str, key: str | None) -> None:
        if key is not None and key.lower() in sensitive:
            if before is _ABSENT or after is _ABSENT or _differ(before, after):  # that it changed, not to what
                changed[path] = _change(MASK if before is not _ABSENT else before, MASK if after is not _ABSENT else after)
            return
        if isinstance(before, dict) and isinstance(after, dict):
            for name in [*before, *(k for k in after if k not in before)]:
                walk(before.get(name, _ABSENT), after.get(name, _ABSENT), _child(path, name), str(name))
            return
        if before is _ABSENT or after is _ABSENT or _differ(before, after):
            changed[path] = _change(before, after)

    walk(original, executed, "$", None)
    return {"note": EDIT_NOTE, "changed": changed}


_ABSENT = object()


def _differ(before: Any, after: Any) -> bool:
    # 1 and true are different arguments to a tool, though equal in Python.
    return type(before) is not type(after) or before != after


def _child(path: str, name: str) -> str:
    plain = name.replace("_", "a").replace("-", "a").isalnum() and not name[:1].isdigit()
    return f"{path}.{name}" if plain else f'{path}["{name}"]'


def _change(before: Any, after: Any) -> dict:
    change = {}
    if before is not _ABSENT:
        change["from"] = before
    if after is not _ABSENT:
        change["to"] = after
    return change
