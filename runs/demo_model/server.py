"""Offline, scripted, OpenAI-compatible chat completions server (standard library only).

This is NOT a language model: it is a script.  It answers the OpenAI chat
completions API either from a *script* posted by a test (exact responses, in
order) or from the built-in "demo" model (a few keyword scenarios, see
:mod:`runs.demo_model.scenarios`).

Endpoints (all JSON; errors use OpenAI's ``{"error": {"message", "type",
"param", "code"}}`` shape with the HTTP status):

``POST /v1/chat/completions``
    Non-streaming only (``"stream": true`` -> 400).  ``model`` ``script:<id>``
    is answered from that script (unknown id -> 404 "model not found"); any
    other model name is the stateless demo model.
``GET /v1/models``, ``GET /v1/models/<id>``
    Lists the ``demo`` model (owned_by says it is a script).
``POST /v1/scripts``  body ``{"responses": [entry, ...], "latency": 0.0, "record": true}``
    -> ``{"id": "<hex>", "model": "script:<id>"}``.  ``latency`` (optional) is
    the default delay, in seconds, of every entry of that script.  Every
    chat request to the script is kept (as its raw bytes) for ``/requests``;
    long benchmarks can pass ``"record": false`` to keep memory flat.
``GET /v1/scripts/<id>/requests``
    -> list of the full request bodies received for that script, in order
    (including requests answered 400 for ``stream``, which consume no entry).

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
    Overrides usage (``total_tokens`` computed unless given).
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

An exhausted script answers the plain final text ``"script exhausted"``.

Usage estimate: prompt_tokens = characters of message contents // 4 + 10 per
message; completion_tokens = (len(content) + len(all arguments)) // 4 + 1.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import sys
import threading
import time
from http import HTTPStatus
from typing import Any, Self

from . import scenarios

OWNED_BY = scenarios.OWNED_BY

_REASONS = {s.value: s.phrase for s in HTTPStatus}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
_MODEL_OBJECT = {"id": "demo", "object": "model", "created": 0, "owned_by": OWNED_BY}
_MODELS_BODY = json.dumps({"object": "list", "data": [_MODEL_OBJECT]}).encode()
_EXHAUSTED = {"content": "script exhausted"}


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, type_: str | None = None, code: Any = None) -> dict:
    return {"error": {"message": message, "type": type_ or _error_type(status), "param": None, "code": code}}


def _new_call_id() -> str:
    return "call_" + os.urandom(6).hex()


class _Script:
    __slots__ = ("entries", "id", "latency", "record", "requests")

    def __init__(self, script_id: str, entries: list, latency: float, record: bool = True):
        self.id = script_id
        self.entries = list(entries)
        self.latency = latency
        self.record = record
        # Raw request bodies: bytes are not tracked by the garbage collector, so a long
        # benchmark does not slow every later json.loads down with ever larger GC passes.
        self.requests: list[bytes] = []


def _validate_entries(responses: Any) -> str | None:
    if not isinstance(responses, list):
        return "'responses' must be a list of entries"
    for i, e in enumerate(responses):
        where = f"responses[{i}]"
        if not isinstance(e, dict):
            return f"{where} must be an object"
        if "latency" in e and (not isinstance(e["latency"], (int, float)) or isinstance(e["latency"], bool)):
            return f"{where}.latency must be a number"
        if "status" in e and (not isinstance(e["status"], int) or not 100 <= e["status"] <= 599):
            return f"{where}.status must be an HTTP status code"
        if "headers" in e and not isinstance(e["headers"], dict):
            return f"{where}.headers must be an object"
        if "usage" in e and not isinstance(e["usage"], dict):
            return f"{where}.usage must be an object"
        tcs = e.get("tool_calls")
        if tcs is not None and (not isinstance(tcs, list) or not all(isinstance(t, dict) for t in tcs)):
            return f"{where}.tool_calls must be a list of objects"
    return None


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() closes the live keep-alive connections itself
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, handler, owner: DemoModelServer):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.owner = owner
        self.conns: set = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, handler)

    def handle_error(self, request, client_address):  # quiet on client disconnects
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "demo-model"
    disable_nagle_algorithm = True
    server: _HTTPServer

    # -- plumbing ---------------------------------------------------------

    def log_message(self, format, *args):
        pass

    def setup(self):
        super().setup()
        with self.server.conns_lock:
            self.server.conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.conns_lock:
                self.server.conns.discard(self.connection)

    def _send(self, status: int, data: bytes, headers: dict | None = None) -> None:
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"]
        ctype = "application/json"
        if headers:
            for k, v in headers.items():
                k = str(k).replace("\r", "").replace("\n", "")
                lk = k.lower()
                if lk == "content-length":
                    continue
                v = str(v).replace("\r", " ").replace("\n", " ")
                if lk == "content-type":
                    ctype = v
                    continue
                head.append(f"{k}: {v}\r\n")
        head.append(f"Content-Type: {ctype}\r\nContent-Length: {len(data)}\r\n")
        if self.close_connection:
            head.append("Connection: close\r\n")
        head.append("\r\n")
        self.wfile.write("".join(head).encode("latin-1") + data)

    def _send_json(self, status: int, obj: Any, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode(), headers)

    def _send_error(self, status: int, message: str, code: Any = None, type_: str | None = None) -> None:
        self._send_json(status, error_body(status, message, type_, code))

    def _read_body(self) -> bytes | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self.close_connection = True
                    self._send_error(400, "malformed chunked body")
                    return None
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = self.headers.get("Content-Length")
        try:
            n = int(length) if length else 0
            if n < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            self._send_error(400, "invalid Content-Length")
            return None
        return self.rfile.read(n) if n else b""

    # -- routing ----------------------------------------------------------

    def do_GET(self):
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/v1/models":
                self._send(200, _MODELS_BODY)
            elif path.startswith("/v1/models/"):
                model = path[len("/v1/models/"):]
                if model.startswith("script:"):
                    if self.server.owner._get_script(model[7:]) is None:
                        return self._send_error(404, f"model not found: {model}", "model_not_found")
                    self._send_json(200, dict(_MODEL_OBJECT, id=model))
                else:
                    self._send_json(200, dict(_MODEL_OBJECT, id=model))
            elif path.startswith("/v1/scripts/") and path.endswith("/requests"):
                sid = path[len("/v1/scripts/"): -len("/requests")]
                reqs = self.server.owner._script_requests(sid)
                if reqs is None:
                    return self._send_error(404, f"script not found: {sid}", "script_not_found")
                self._send(200, b"[" + b",".join(reqs) + b"]")
            else:
                self._send_error(404, f"unknown endpoint: GET {path}", "not_found")
        except Exception as exc:  # noqa: BLE001 - answer 500 instead of dropping the connection
            self._send_error(500, f"demo model server error: {exc!r}")

    def do_POST(self):
        raw = self._read_body()
        if raw is None:
            return
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path not in ("/v1/chat/completions", "/v1/scripts"):
                return self._send_error(404, f"unknown endpoint: POST {path}", "not_found")
            try:
                body = json.loads(raw)
            except ValueError as exc:
                return self._send_error(400, f"request body is not valid JSON: {exc}")
            if not isinstance(body, dict):
                return self._send_error(400, "request body must be a JSON object")
            if path == "/v1/chat/completions":
                self._chat(body, raw)
            else:
                self._create_script(body)
        except Exception as exc:  # noqa: BLE001 - answer 500 instead of dropping the connection
            self._send_error(500, f"demo model server error: {exc!r}")

    # -- endpoints --------------------------------------------------------

    def _create_script(self, body: dict) -> None:
        responses = body.get("responses")
        problem = _validate_entries(responses)
        latency = body.get("latency", 0.0)
        if problem is None and (not isinstance(latency, (int, float)) or isinstance(latency, bool)):
            problem = "'latency' must be a number"
        if problem:
            return self._send_error(400, problem)
        sid = self.server.owner._add_script(responses, float(latency), bool(body.get("record", True)))
        self._send_json(200, {"id": sid, "model": f"script:{sid}"})

    def _chat(self, body: dict, raw: bytes) -> None:
        owner = self.server.owner
        model = body.get("model")
        if not isinstance(model, str) or not model:
            model = "demo"
        messages = body.get("messages")
        if not isinstance(messages, list):
            return self._send_error(400, "'messages' must be a list", type_="invalid_request_error")
        script = None
        if model.startswith("script:"):
            script = owner._record(model[7:], raw)
            if script is None:
                return self._send_error(404, f"model not found: {model} (unknown script id)", "model_not_found")
        if body.get("stream"):
            return self._send_error(
                400,
                "streaming is not supported by the offline demo model (a script, not a language model); "
                "send \"stream\": false",
                "unsupported_parameter",
            )
        if script is not None:
            entry, delay = owner._take(script, body)
        else:
            entry, delay = scenarios.respond(body), 0.0
        delay = owner.latency + entry.get("latency", delay)
        if delay > 0:
            time.sleep(delay)
        self._answer(entry, model, messages)

    def _answer(self, entry: dict, model: str, messages: list) -> None:
        headers = entry.get("headers")
        if "raw" in entry:
            raw = entry["raw"]
            if isinstance(raw, str):
                data = raw.encode()
            elif isinstance(raw, (bytes, bytearray)):
                data = bytes(raw)
            else:
                data = json.dumps(raw).encode()
            return self._send(entry.get("status", 200), data, headers)

        status = entry.get("status", 500 if "error" in entry else 200)
        if "error" in entry or status >= 400:
            err = entry.get("error")
            obj = error_body(status, _REASONS.get(status, "error"))
            if isinstance(err, dict):
                obj["error"].update(err)
            elif err is not None:
                obj["error"]["message"] = str(err)
            return self._send_json(status, obj, headers)

        content = entry.get("content")
        refusal = entry.get("refusal")
        out_chars = 0
        tool_calls = None
        tcs = entry.get("tool_calls")
        if tcs:
            tool_calls = []
            for tc in tcs:
                fn = tc.get("function")
                if not isinstance(fn, dict):
                    fn = tc
                args = fn.get("arguments", {})
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
                out_chars += len(args)
                tool_calls.append(
                    {
                        "id": tc.get("id") or _new_call_id(),
                        "type": "function",
                        "function": {"name": fn.get("name"), "arguments": args},
                    }
                )
        if content is None and tool_calls is None and refusal is None:
            content = ""
        message: dict = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        message["refusal"] = refusal
        if isinstance(content, str):
            out_chars += len(content)

        chars = 0
        for m in messages:
            if isinstance(m, dict):
                c = m.get("content")
                if isinstance(c, str):
                    chars += len(c)
                elif isinstance(c, list):
                    for p in c:
                        if isinstance(p, dict) and isinstance(p.get("text"), str):
                            chars += len(p["text"])
        prompt_tokens = chars // 4 + 10 * len(messages)
        completion_tokens = out_chars // 4 + 1
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        override = entry.get("usage")
        if override:
            usage.update(override)
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))

        resp = {
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
            "usage": usage,
        }
        self._send_json(status, resp, headers)


class DemoModelServer:
    """A running (or ready to run) offline demo model server.

    Attributes: ``url`` (base URL ending in ``/v1``), ``host``, ``port``,
    ``latency`` (seconds added before every chat response; settable).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0):
        self.latency = float(latency)
        self._lock = threading.Lock()
        self._scripts: dict[str, _Script] = {}
        self._httpd = _HTTPServer((host, port), _Handler, owner=self)
        self.host = host
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    def start(self) -> DemoModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                name=f"demo-model:{self.port}", daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until stop() (or KeyboardInterrupt)."""
        self._httpd.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        with self._httpd.conns_lock:
            conns = list(self._httpd.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<DemoModelServer {self.url}>"

    # -- scripts (also usable directly from Python) -------------------------

    def create_script(self, responses: list, latency: float = 0.0, record: bool = True) -> dict:
        """Same as ``POST /v1/scripts``; returns ``{"id": ..., "model": "script:<id>"}``."""
        problem = _validate_entries(responses)
        if problem:
            raise ValueError(problem)
        sid = self._add_script(responses, float(latency), record)
        return {"id": sid, "model": f"script:{sid}"}

    def script_requests(self, script_id: str) -> list:
        """Same as ``GET /v1/scripts/<id>/requests``, parsed (KeyError if unknown)."""
        reqs = self._script_requests(script_id)
        if reqs is None:
            raise KeyError(script_id)
        return [json.loads(r) for r in reqs]

    def _add_script(self, responses: list, latency: float, record: bool = True) -> str:
        with self._lock:
            while True:
                sid = os.urandom(5).hex()
                if sid not in self._scripts:
                    break
            self._scripts[sid] = _Script(sid, responses, latency, record)
        return sid

    def _get_script(self, sid: str) -> _Script | None:
        return self._scripts.get(sid)

    def _script_requests(self, sid: str) -> list | None:
        with self._lock:
            s = self._scripts.get(sid)
            return None if s is None else list(s.requests)

    def _record(self, sid: str, raw: bytes) -> _Script | None:
        with self._lock:
            s = self._scripts.get(sid)
            if s is not None and s.record:
                s.requests.append(raw)
            return s

    def _take(self, script: _Script, body: dict) -> tuple[dict, float]:
        tool_choice = body.get("tool_choice")
        with self._lock:
            entries = script.entries
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
                return e, script.latency
            return _EXHAUSTED, script.latency


def start_server(host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> DemoModelServer:
    """Start the offline demo model server in a daemon thread and return it."""
    return DemoModelServer(host, port, latency).start()
