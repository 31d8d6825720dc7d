"""What the demo model sends back: a script entry (or an error) turned into a :class:`Reply`.

Pure functions over plain data, no sockets: the HTTP layer (:mod:`runs.demo_model.server`)
only waits ``Reply.delay`` seconds and writes ``status``, ``headers`` and ``body``.

Usage estimate: prompt_tokens = characters of message contents // 4 + 10 per message;
completion_tokens = (len(content) + len(all arguments)) // 4 + 1.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from .conversation import text_of

REASONS = {s.value: s.phrase for s in HTTPStatus}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass
class Reply:
    """One HTTP answer: ``headers`` are the extra response headers (a ``Content-Type`` there
    replaces ``application/json``); ``delay`` is how long to wait before sending it.

    A streamed answer has ``parts``: (seconds to wait, bytes) sent one after the other as chunks
    of a chunked body (``body`` is then unused); ``cut``: the connection is dropped after the
    last part, without ending the body, as a server that died mid-answer would."""

    status: int
    body: bytes
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    parts: list | None = None
    cut: bool = False


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, type_: str | None = None, code: Any = None) -> dict:
    return {"error": {"message": message, "type": type_ or _error_type(status), "param": None, "code": code}}


def json_reply(status: int, obj: Any, headers: dict | None = None) -> Reply:
    return Reply(status, json.dumps(obj, ensure_ascii=False).encode(), headers or {})


def error_reply(status: int, message: str, code: Any = None, type_: str | None = None) -> Reply:
    return json_reply(status, error_body(status, message, type_, code))


def new_call_id() -> str:
    return "call_" + os.urandom(6).hex()


def answer(entry: dict, model: str, messages: list) -> Reply:
    """The reply to a chat request that ``entry`` (a script entry) answers."""
    headers = entry.get("headers") or {}
    if "raw" in entry:
        raw = entry["raw"]
        if isinstance(raw, str):
            data = raw.encode()
        elif isinstance(raw, (bytes, bytearray)):
            data = bytes(raw)
        else:
            data = json.dumps(raw).encode()
        return Reply(entry.get("status", 200), data, headers)

    status = entry.get("status", 500 if "error" in entry else 200)
    if "error" in entry or status >= 400:
        err = entry.get("error")
        obj = error_body(status, REASONS.get(status, "error"))
        if isinstance(err, dict):
            obj["error"].update(err)
        elif err is not None:
            obj["error"]["message"] = str(err)
        return json_reply(status, obj, headers)
    return json_reply(status, completion(entry, model, messages), headers)


def tool_calls_of(entry: dict) -> list | None:
    """The entry's tool calls in OpenAI's shape (ids filled in, arguments JSON-encoded)."""
    tcs = entry.get("tool_calls")
    if not tcs:
        return None
    calls = []
    for tc in tcs:
        fn = tc.get("function")
        if not isinstance(fn, dict):
            fn = tc
        args = fn.get("arguments", {})
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        function = {"name": fn.get("name"), "arguments": args}
        calls.append({"id": tc.get("id") or new_call_id(), "type": "function", "function": function})
    return calls


def usage_of(entry: dict, messages: list, content: Any, tool_calls: list | None) -> dict:
    """The estimate above, overridden by the entry's ``usage`` (``total_tokens`` computed unless given)."""
    chars = sum(len(text_of(m.get("content"))) for m in messages if isinstance(m, dict))
    out_chars = sum(len(c["function"]["arguments"]) for c in tool_calls or ())
    if isinstance(content, str):
        out_chars += len(content)
    usage = {"prompt_tokens": chars // 4 + 10 * len(messages), "completion_tokens": out_chars // 4 + 1}
    override = entry.get("usage")
    if override:
        usage.update(override)
    usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
    return usage


def completion(entry: dict, model: str, messages: list) -> dict:
    """The ``chat.completion`` object for a successful entry."""
    content = entry.get("content")
    refusal = entry.get("refusal")
    tool_calls = tool_calls_of(entry)
    if content is None and tool_calls is None and refusal is None:
        content = ""
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    message["refusal"] = refusal
    return {
        "id": "chatcmpl-" + os.urandom(12).hex(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": entry.get("finish_reason") or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage_of(entry, messages, content, tool_calls),
    }


STREAM_CHUNK_CHARS = 12  # of text or arguments a chunk carries, unless the entry says otherwise


def _sse(obj) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or []


def stream_reply(done: dict, *, include_usage: bool, options: dict, spread: float = 0.0) -> Reply:
    """The chat completion ``done`` sent as server-sent events, the way OpenAI streams: a first
    chunk with the role, the text and each call's arguments in pieces, a chunk with the finish
    reason, one with the usage when asked (``stream_options.include_usage``), then ``[DONE]``.

    ``options`` (a script entry's ``stream``): ``chunk_chars`` (text per chunk), ``chunk_delay``
    (seconds between chunks), ``cut_after`` (drop the connection after this many chunks),
    ``usage`` (false: no usage chunk even when asked). ``spread``: seconds to spread the chunks
    over when no ``chunk_delay`` is given (the demo model's realistic pace)."""
    size = max(1, int(options.get("chunk_chars") or STREAM_CHUNK_CHARS))
    head = {k: done[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice, message = done["choices"][0], done["choices"][0]["message"]

    def chunk(delta: dict, finish=None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(message.get("content") or "", size):
        events.append(chunk({"content": piece}))
    if message.get("refusal"):
        events.append(chunk({"refusal": message["refusal"]}))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": function["name"], "arguments": ""}}]}))
        for piece in _pieces(function["arguments"], size):
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage and options.get("usage", True) is not False:
        events.append({**head, "choices": [], "usage": done["usage"]})
    parts = [_sse(event) for event in events] + [b"data: [DONE]\n\n"]
    gap = options.get("chunk_delay")
    if gap is None:
        gap = spread / max(1, len(parts) - 1)
    cut_after = options.get("cut_after")
    cut = isinstance(cut_after, int) and not isinstance(cut_after, bool) and 0 <= cut_after < len(parts)
    if cut:
        parts = parts[:cut_after]
    timed = [(0.0 if i == 0 else float(gap), part) for i, part in enumerate(parts)]
    return Reply(200, b"", {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}, parts=timed, cut=cut)
