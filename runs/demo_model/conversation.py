"""How the demo model reads a chat request: the task, the offered tools and the tool history.

Plain data in, plain objects out; used by :mod:`runs.demo_model.scenarios` (and
:func:`text_of` by the usage estimate in :mod:`runs.demo_model.answers`).
"""

from __future__ import annotations

import json
from typing import Any

_MISSING = object()


def text_of(content: Any) -> str:
    """Text of a message ``content`` (a string, a list of parts, or null)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def compact(value: Any, limit: int = 200) -> str:
    """``value`` as short text for an answer (JSON unless a string), cut at ``limit`` characters."""
    if isinstance(value, str):
        s = value
    else:
        try:
            s = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError):
            s = repr(value)
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return s


class ToolCall:
    """One tool call found in the history, with its (lazily parsed) result."""

    __slots__ = ("_args", "_outcome", "batch", "id", "name", "raw_arguments", "raw_result")

    def __init__(self, call_id: str | None, name: str, raw_arguments: Any, batch: int = 0):
        self.batch = batch  # index of the assistant message that made the call
        self.id = call_id
        self.name = name
        self.raw_arguments = raw_arguments
        self.raw_result: Any = _MISSING
        self._args: Any = _MISSING
        self._outcome: tuple | None = None

    @property
    def args(self) -> dict:
        if self._args is _MISSING:
            a = self.raw_arguments
            if isinstance(a, str):
                try:
                    a = json.loads(a)
                except ValueError:
                    a = None
            self._args = a if isinstance(a, dict) else {}
        return self._args

    def _parse(self) -> tuple:
        # -> (answered, ok, result, error)
        if self._outcome is None:
            raw = self.raw_result
            if raw is _MISSING:
                self._outcome = (False, False, None, "no result was received")
            else:
                text = text_of(raw) if not isinstance(raw, (dict, list)) else raw
                data: Any = text
                if isinstance(text, str):
                    try:
                        data = json.loads(text)
                    except ValueError:
                        data = text
                if isinstance(data, dict) and "ok" in data:
                    if data.get("ok"):
                        self._outcome = (True, True, data.get("result"), None)
                    else:
                        err = data.get("error")
                        self._outcome = (True, False, None, err if isinstance(err, str) else compact(err))
                elif isinstance(data, dict) and data.get("truncated"):
                    self._outcome = (True, True, None, None)  # ok, result unknown
                else:
                    self._outcome = (True, True, data, None)
        return self._outcome

    @property
    def answered(self) -> bool:
        return self._parse()[0]

    @property
    def ok(self) -> bool:
        return self._parse()[1]

    @property
    def result(self) -> Any:
        return self._parse()[2]

    @property
    def error(self) -> str | None:
        return self._parse()[3]


class Conversation:
    """What the demo model looks at: task, offered tools, and tool history."""

    def __init__(self, request: dict):
        messages = request.get("messages")
        if not isinstance(messages, list):
            messages = []
        self.messages = messages
        self.tool_choice = request.get("tool_choice")

        tools = request.get("tools")
        names = set()
        if isinstance(tools, list):
            for t in tools:
                if isinstance(t, dict):
                    fn = t.get("function")
                    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                        names.add(fn["name"])
        self.tools_offered = bool(isinstance(tools, list) and tools)
        self.tool_names = names

        self.task = ""
        self.calls: list[ToolCall] = []
        by_id: dict[str, ToolCall] = {}
        pending: list[ToolCall] = []  # calls of the latest assistant turn, for id-less tool messages
        found_task = False
        batch = 0
        for m in messages:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role == "user":
                if not found_task:
                    self.task = text_of(m.get("content"))
                    found_task = True
            elif role == "assistant":
                tcs = m.get("tool_calls")
                if isinstance(tcs, list) and tcs:
                    batch += 1
                    pending = []
                    for tc in tcs:
                        if not isinstance(tc, dict):
                            continue
                        fn = tc.get("function")
                        if not isinstance(fn, dict):
                            fn = tc
                        call = ToolCall(tc.get("id"), str(fn.get("name") or ""), fn.get("arguments"), batch)
                        self.calls.append(call)
                        pending.append(call)
                        if isinstance(call.id, str):
                            by_id[call.id] = call
            elif role == "tool":
                call = by_id.get(m.get("tool_call_id"))  # type: ignore[arg-type]
                if call is None:
                    call = next((c for c in pending if c.raw_result is _MISSING), None)
                if call is not None and call.raw_result is _MISSING:
                    call.raw_result = m.get("content")
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        self.last_role = last.get("role")
        self.last_text = text_of(last.get("content"))
        self.task_lower = self.task.lower()

    def calls_named(self, name: str) -> list[ToolCall]:
        return [c for c in self.calls if c.name == name]

    def offers(self, name: str) -> bool:
        return name in self.tool_names
