"""One name for a call, the same on every page that lists calls (the run page, the fork form, the
compare page): its tool, its arguments in short, and its step, as `get_weather(city="Lagos") · step 2`.

Made from the arguments as pages show them (sensitive fields already masked): a label never holds
more than the page it is on. static/js/call_label.js writes the same for the live run page.
"""
import json

ARGUMENTS_CHARS = 60  # the arguments part, at most (then "…")
VALUE_CHARS = 24  # one value of it, at most


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value_in_short(value) -> str:
    if isinstance(value, dict):
        return "{…}" if value else "{}"
    if isinstance(value, list):
        return "[…]" if value else "[]"
    if isinstance(value, str):
        return json.dumps(_cut(value, VALUE_CHARS), ensure_ascii=False)
    return _cut(json.dumps(value), VALUE_CHARS)


def arguments_in_short(arguments) -> str:
    """`city="Lagos", days=3` for {"city": "Lagos", "days": 3}; "…" when they cannot be read
    (not JSON, or cut because they were too long to show)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return "…"
    if isinstance(arguments, dict):
        text = ", ".join(f"{key}={_value_in_short(value)}" for key, value in arguments.items())
    else:
        text = _value_in_short(arguments)
    return _cut(text, ARGUMENTS_CHARS)


def call_label(*, tool: str, arguments, step: int | None) -> dict:
    """{"tool", "arguments" (in short, in brackets), "step" ("step 2" or ""), "text" (all of it)}.
    `arguments`: the masked JSON text a page shows (or its parsed value)."""
    short = f"({arguments_in_short(arguments)})"
    where = f"step {step}" if step is not None else ""
    return {"tool": tool, "arguments": short, "step": where,
            "text": f"{tool}{short}" + (f" · {where}" if where else "")}
