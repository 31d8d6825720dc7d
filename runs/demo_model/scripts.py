"""Scripts: exact responses posted by a test, given out in order (plain data, no sockets).

Script entry format (each entry is a dict; keys may be combined)
-----------------------------------------------------------------

``{"content": "text"}``
    Final answer, finish_reason "stop".
``{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}, "id": "call_1"}], "content": "optional"}``
    finish_reason "tool_calls".  ``id`` is optional (default ``call_<12 hex>``,
    unique).  ``arguments`` that is a dict/list is JSON-encoded; a string is
    sent verbatim (e.g. ``"{not json"``).  OpenAI-shaped items
    (``{"id", "type": "function", "function": {"name", "arguments"}}``) work too.
``"finish_reason": "..."``
    Overrides the finish reason, e.g. ``{"content": "partial", "finish_reason":
    "length"}`` or ``{"content": "", "finish_reason": "content_filter"}``.
``{"refusal": "I can't help with that"}``
    ``message.refusal`` set, ``content`` null, finish_reason "stop".
``{"status": 500, "error": "boom", "headers": {"Retry-After": "0.01"}}``
    HTTP error with that status (default 500 when only ``error`` is given),
    OpenAI-style error body, and those headers.  ``error`` may also be a dict,
    merged into the error object (to set ``type``/``code``).
``{"raw": "this is not json", "status": 200}``
    The raw body as-is with content-type application/json (status default 200).
``{"usage": {"prompt_tokens": 1000, "completion_tokens": 500}}``
    Overrides usage (``total_tokens`` computed unless given; the estimate is
    described in :mod:`runs.demo_model.answers`).
``{"latency": 0.2}``
    Sleep this long before answering this entry (instead of the script's
    default latency).  The server-wide ``latency`` is always added.
``{"if_tool_choice": "required", ...}``
    Applies only when the request's ``tool_choice`` equals this raw JSON value
    (``null`` matches a request without tool_choice).  Otherwise the entry is
    consumed anyway and the NEXT entry answers this request.
``{"repeat": true, ...}``
    Not consumed: it answers every later request too (a repeating entry whose
    ``if_tool_choice`` does not match is skipped, not consumed).
``"headers": {...}``
    Extra response headers, for any entry type.
A script made with ``context_window`` (tokens, the estimate below) answers every request
whose prompt is larger with 400 ``context_length_exceeded``, as a provider does, without
consuming an entry.

``{"stream": {"chunk_chars": 4, "chunk_delay": 0.2, "cut_after": 3, "usage": false}, ...}``
    How the entry is streamed when a request asks for a stream (all optional):
    text per chunk (default 12 characters), seconds between chunks (default 0),
    drop the connection after this many chunks (a stream cut mid-answer), and
    no usage chunk even when ``stream_options.include_usage`` asks for one.

An exhausted script answers the plain final text ``"script exhausted"``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

EXHAUSTED = {"content": "script exhausted"}
STREAMING_MODES = ("stream", "refuse", "ignore")


def validate_entries(responses: Any) -> str | None:
    """What is wrong with a list of script entries, or None."""
    if not isinstance(responses, list):
        return "'responses' must be a list of entries"
    for i, e in enumerate(responses):
        where = f"responses[{i}]"
        if not isinstance(e, dict):
            return f"{where} must be an object"
        if "latency" in e and not is_number(e["latency"]):
            return f"{where}.latency must be a number"
        if "status" in e and (not isinstance(e["status"], int) or not 100 <= e["status"] <= 599):
            return f"{where}.status must be an HTTP status code"
        if "headers" in e and not isinstance(e["headers"], dict):
            return f"{where}.headers must be an object"
        if "usage" in e and not isinstance(e["usage"], dict):
            return f"{where}.usage must be an object"
        if "stream" in e and not isinstance(e["stream"], dict):
            return f"{where}.stream must be an object"
        tcs = e.get("tool_calls")
        if tcs is not None and (not isinstance(tcs, list) or not all(isinstance(t, dict) for t in tcs)):
            return f"{where}.tool_calls must be a list of objects"
    return None


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Script:
    __slots__ = ("context_window", "entries", "id", "latency", "record", "requests", "streaming")

    def __init__(self, script_id: str, entries: list, latency: float, record: bool = True, streaming: str = "stream",
                 context_window: int | None = None):
        self.id = script_id
        # Prompt tokens (the demo's own count) beyond which a request is refused as too long.
        self.context_window = context_window
        self.streaming = streaming
        self.entries = list(entries)
        self.latency = latency
        self.record = record
        # Raw request bodies: bytes are not tracked by the garbage collector, so a long
        # benchmark does not slow every later json.loads down with ever larger GC passes.
        self.requests: list[bytes] = []

    def take(self, tool_choice: Any) -> dict:
        """The entry that answers a request with this ``tool_choice``; consumes what it passes."""
        entries = self.entries
        i = 0
        while i < len(entries):
            e = entries[i]
            repeat = bool(e.get("repeat"))
            if "if_tool_choice" in e and e["if_tool_choice"] != tool_choice:
                if repeat:
                    i += 1  # skipped, stays for later requests
                else:
                    del entries[i]  # consumed anyway
                continue
            if not repeat:
                del entries[i]
            return e
        return EXHAUSTED


class ScriptBook:
    """The scripts of one server, safe to use from its connection threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {}

    def add(self, responses: list, latency: float, record: bool = True, streaming: str = "stream",
            context_window: int | None = None) -> str:
        """A new script's id (``responses`` already validated)."""
        with self._lock:
            while True:
                sid = os.urandom(5).hex()
                if sid not in self._scripts:
                    break
            self._scripts[sid] = Script(sid, responses, latency, record, streaming, context_window)
        return sid

    def get(self, sid: str) -> Script | None:
        return self._scripts.get(sid)

    def requests(self, sid: str) -> list[bytes] | None:
        """The raw bodies recorded for a script (None if unknown)."""
        with self._lock:
            s = self._scripts.get(sid)
            return None if s is None else list(s.requests)

    def record(self, sid: str, raw: bytes) -> Script | None:
        """Keep a request body for the script (if it records); the script, or None if unknown."""
        with self._lock:
            s = self._scripts.get(sid)
            if s is not None and s.record:
                s.requests.append(raw)
            return s

    def take(self, script: Script, tool_choice: Any) -> dict:
        with self._lock:
            return script.take(tool_choice)
