"""What changed inside two values, for pages that put two runs side by side: the words of a text
that were removed and added, and the keys of a JSON object that were added, removed or changed.

Plain functions over plain data; the compare pages mark the result (runs/templatetags/compare_display.py).
"""
import difflib
import json
import re

from hosting.text import loads as bounded_loads
from runs.lifecycle.call_arguments import value_leaves

# Words and runs of marks, each with the spaces after it, so a change reads as whole words (a
# lone matching space between two changes would cut one change in two) and keeps the spacing.
TOKENS = re.compile(r"\w+\s*|[^\w\s]+\s*|\s+")
# Past this many tokens a side, the texts are marked as replaced whole: the comparison is
# quadratic in the worst case and a page must not wait for it.
MAX_TOKENS = 4000
KEY_CHANGES_SHOWN = 50


def word_changes(old: str, new: str) -> dict[str, list[tuple[str, str]]]:
    """{"old": [(kind, text)], "new": [(kind, text)]}: each side's text in pieces, a piece "same",
    "removed" (only in old) or "added" (only in new). Joined, each side is its text again."""
    old, new = old or "", new or ""
    a, b = TOKENS.findall(old), TOKENS.findall(new)
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        return {"old": [("removed", old)] if old else [], "new": [("added", new)] if new else []}
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            _add(left, "same", "".join(a[i1:i2]))
            _add(right, "same", "".join(b[j1:j2]))
            continue
        if i2 > i1:
            _add_change(left, "removed", "".join(a[i1:i2]))
        if j2 > j1:
            _add_change(right, "added", "".join(b[j1:j2]))
    return {"old": left, "new": right}


def _add_change(pieces: list[tuple[str, str]], kind: str, text: str) -> None:
    """A changed piece without its trailing spaces (they stay unmarked): the mark ends with the word."""
    word = text.rstrip()
    _add(pieces, kind, word)
    if len(word) < len(text):
        _add(pieces, "same", text[len(word):])


def _add(pieces: list[tuple[str, str]], kind: str, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1][0] == kind:
        pieces[-1] = (kind, pieces[-1][1] + text)
    else:
        pieces.append((kind, text))


def json_object(text: str):
    """The JSON object `text` holds, or None (not JSON, not an object, or cut)."""
    try:
        value = bounded_loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def key_changes(old: dict, new: dict) -> list[dict]:
    """The keys (by path, at any depth) whose value differs: {"path", "change": "added" | "removed" |
    "changed", "old", "new"} with the values as JSON text ("" where there is none); old's order,
    then the added ones; at most KEY_CHANGES_SHOWN."""
    before, after = value_leaves(old, root=""), value_leaves(new, root="")
    changes = []
    for path in [*before, *(p for p in after if p not in before)]:
        if path in before and path in after:
            if before[path] == after[path]:
                continue
            change = "changed"
        else:
            change = "removed" if path in before else "added"
        changes.append({
            "path": path, "change": change,
            "old": json.dumps(before[path], ensure_ascii=False) if path in before else "",
            "new": json.dumps(after[path], ensure_ascii=False) if path in after else "",
        })
    return changes[:KEY_CHANGES_SHOWN]
