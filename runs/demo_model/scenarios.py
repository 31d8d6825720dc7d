"""Scenario logic of the offline "demo" model (a script, not a language model).

Every function here is pure: a chat-completions request body (already parsed)
goes in, a *script entry* dict comes out (same format as entries posted to
``POST /v1/scripts``; see :mod:`runs.demo_model.scripts`).  :mod:`runs.demo_model.answers`
turns the entry into an OpenAI-shaped response and fills in tool-call ids.

The model is stateless: the next turn is decided from ``messages`` alone.

Decision order (first match wins):

1. the last message is a user message starting with "Verification failed"
   -> text acknowledging it ("I re-checked: ...");
2. no ``tools`` offered, or ``tool_choice == "none"`` -> plain-text summary of
   the tool calls found in the history;
3. the task (first user message, case-insensitive) contains ...
   - "stuck"                       -> always ``get_ticket({"ticket_id": 999999})``
   - "cancel" and ``ORD-<digits>`` -> lookup_order, cancel_order, final text
   - "ticket"                      -> search_tickets, create_ticket, get_ticket,
                                      final "Created ticket #<id>: <title>"
   - "weather"                     -> parallel get_weather for Lagos/London,
                                      final text built from the results
4. anything else -> help text listing the example tasks.

If a step needs a tool that the request does not offer, the answer is a text
saying which tool would be needed.
"""

from __future__ import annotations

import re
from typing import Any

from .conversation import Conversation, ToolCall, compact

OWNED_BY = "offline demo model (a script, not a language model)"
NAME = "the offline demo model (a script, not a language model)"

EXAMPLE_TASKS = (
    "What's the weather in Lagos and London?",
    "Create a ticket about the login page being slow",
    "Cancel order ORD-1001",
    "stuck",
)

# The launch page offers the examples while the demo model is on, each with what it shows.
DEMO_EXAMPLES = (
    {"task": EXAMPLE_TASKS[0], "shows": "two read-only tool calls, then an answer"},
    {"task": EXAMPLE_TASKS[1], "shows": "a search, a ticket created, then read back"},
    {"task": EXAMPLE_TASKS[2], "shows": "a destructive call that waits for a person in Approvals"},
    {"task": EXAMPLE_TASKS[3], "shows": "the same call again and again, until the repeat guard stops it"},
)

_ORDER_RE = re.compile(r"\bORD-\d+\b", re.IGNORECASE)
_TICKET_TITLE_RE = re.compile(
    r"\bticket\b\s*(?:(?:about|for|on|regarding|saying|that|re)\b)?\s*[:\-]?\s*(.*)",
    re.IGNORECASE | re.DOTALL,
)
_CITIES = ("Lagos", "London")


# --------------------------------------------------------------------------
# Entry builders
# --------------------------------------------------------------------------


def say(text: str) -> dict:
    return {"content": text}


def call(name: str, arguments: dict) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def need_tool(name: str) -> dict:
    return say(
        f"I am {NAME}. For this task I would need the tool `{name}`, "
        "but it was not offered in this request."
    )


def help_text() -> str:
    examples = ", ".join(f'"{t}"' for t in EXAMPLE_TASKS)
    return (
        f"I am {NAME}: I only follow a few scripted example tasks and cannot "
        f"understand anything else. Try one of: {examples}."
    )


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------


def summary(conv: Conversation) -> dict:
    """Plain-text summary of the history (used when no tools may be called)."""
    head = f"Summary from {NAME}"
    if not conv.calls:
        return say(f"{head}: no tool calls were made. {help_text()}")
    counts: dict[str, int] = {}
    for c in conv.calls:
        counts[c.name] = counts.get(c.name, 0) + 1
    n = len(conv.calls)
    parts = ", ".join(f"{k} x{v}" for k, v in counts.items())
    answered = [c for c in conv.calls if c.answered]
    if answered:
        last = answered[-1]
        if last.ok:
            detail = "ok" if last.result is None else f"ok: {compact(last.result)}"
        else:
            detail = f"error: {last.error}"
        last_s = f"; last result ({last.name}): {detail}"
    else:
        last_s = "; no results were received"
    word = "call was" if n == 1 else "calls were"
    return say(f"{head}: {n} tool {word} made ({parts}){last_s}.")


def verification_failed(conv: Conversation) -> dict:
    return say(f"I re-checked: {conv.last_text.strip()}")


def stuck(conv: Conversation) -> dict:
    if not conv.offers("get_ticket"):
        return need_tool("get_ticket")
    return call("get_ticket", {"ticket_id": 999999})


def cancel_order(conv: Conversation, order_id: str) -> dict:
    lookups = conv.calls_named("lookup_order")
    if not lookups:
        if not conv.offers("lookup_order"):
            return need_tool("lookup_order")
        return call("lookup_order", {"order_id": order_id})
    lookup = lookups[-1]
    if not lookup.ok:
        return say(
            f"I could not look up order {order_id} ({lookup.error}), so I did not cancel it."
        )
    cancels = conv.calls_named("cancel_order")
    if not cancels:
        if not conv.offers("cancel_order"):
            return need_tool("cancel_order")
        return call("cancel_order", {"order_id": order_id, "reason": "Customer asked to cancel"})
    cancel = cancels[-1]
    if cancel.ok:
        text = f"Cancelled order {order_id}."
        if cancel.result not in (None, "", {}, []):
            text += f" Result: {compact(cancel.result)}"
        return say(text)
    err = cancel.error or "unknown error"
    if err.lower().startswith("rejected by operator"):
        return say(f"I did not cancel order {order_id}: the operator rejected it ({err}).")
    return say(f'I could not cancel order {order_id}: cancel_order failed with "{err}".')


def ticket_title(task: str) -> str:
    t = " ".join(task.split())
    m = _TICKET_TITLE_RE.search(t)
    s = m.group(1).strip() if m else ""
    if not s:
        s = t
    s = s.strip().rstrip(".!?").strip() or "Ticket"
    s = s[0].upper() + s[1:]
    if len(s) > 60:
        s = s[:57].rstrip() + "..."
    return "[TEST] " + s


def ticket(conv: Conversation) -> dict:
    title = ticket_title(conv.task)
    creates = conv.calls_named("create_ticket")
    if not creates:
        if not conv.calls_named("search_tickets") and conv.offers("search_tickets"):
            query = " ".join(conv.task.split())[:60].strip()
            return call("search_tickets", {"query": query})
        if not conv.offers("create_ticket"):
            return need_tool("create_ticket")
        body = conv.task.strip()
        return call("create_ticket", {"title": title, "body": body, "priority": "low"})
    create = creates[-1]
    title = create.args.get("title") or title
    if not create.ok:
        return say(f'I could not create the ticket "{title}": {create.error}')
    result = create.result
    ticket_id = None
    if isinstance(result, dict):
        ticket_id = result.get("ticket_id", result.get("id"))
    if ticket_id is None:
        return say(f"Created ticket: {title} (the tool did not return a ticket id).")
    already = any(c.args.get("ticket_id") == ticket_id for c in conv.calls_named("get_ticket"))
    if not already and conv.offers("get_ticket"):
        return call("get_ticket", {"ticket_id": ticket_id})
    return say(f"Created ticket #{ticket_id}: {title}")


def _temp(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value}°C"


def weather(conv: Conversation) -> dict:
    calls = conv.calls_named("get_weather")
    if not calls:
        if not conv.offers("get_weather"):
            return need_tool("get_weather")
        found = [(conv.task_lower.find(c.lower()), c) for c in _CITIES]
        cities = [c for pos, c in sorted(found) if pos >= 0] or list(_CITIES)
        return {"tool_calls": [{"name": "get_weather", "arguments": {"city": c}} for c in cities]}
    # The answer is built from the latest batch of get_weather calls (one per city).
    last_batch = calls[-1].batch
    latest: dict[str, ToolCall] = {}
    for c in calls:
        if c.batch != last_batch:
            continue
        city = c.args.get("city")
        latest[str(city) if city is not None else f"#{len(latest)}"] = c
    parts = []
    for city, c in latest.items():
        if not c.ok:
            parts.append(f"{city}: error ({c.error}).")
            continue
        r = c.result
        if isinstance(r, dict):
            name = r.get("city") or city
            bits = []
            if r.get("temperature_c") is not None:
                bits.append(_temp(r["temperature_c"]))
            if r.get("conditions"):
                bits.append(str(r["conditions"]))
            parts.append(f"{name}: {', '.join(bits) or compact(r)}.")
        elif r is None:
            parts.append(f"{city}: the result was not available.")
        else:
            parts.append(f"{city}: {compact(r)}.")
    return say(" ".join(parts))


def respond(request: dict) -> dict:
    """Decide the demo model's next turn; returns a script entry dict."""
    conv = Conversation(request)
    if conv.last_role == "user" and conv.last_text.lstrip().lower().startswith("verification failed"):
        return verification_failed(conv)
    if not conv.tools_offered or conv.tool_choice == "none":
        return summary(conv)
    task = conv.task_lower
    if "stuck" in task:
        return stuck(conv)
    if "cancel" in task:
        m = _ORDER_RE.search(conv.task)
        if m:
            return cancel_order(conv, m.group(0).upper())
    if "ticket" in task:
        return ticket(conv)
    if "weather" in task:
        return weather(conv)
    return say(help_text())
