"""Text the database cannot store: NUL characters and unpaired surrogates. PostgreSQL refuses
both, in text and in jsonb (SQLite would store them), so they are refused before any query."""
import re

_SURROGATE = re.compile("[\ud800-\udfff]")


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
