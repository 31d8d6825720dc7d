"""What the offline demo model answers: one request in, one :class:`~.answers.Reply` out.

This is NOT a language model: it is a script.  It answers the OpenAI chat
completions API either from a *script* posted by a test (exact responses, in
order; the entry format is in :mod:`runs.demo_model.scripts`) or from the
built-in "demo" model (a few keyword scenarios, see :mod:`runs.demo_model.scenarios`).
No sockets here: :mod:`runs.demo_model.server` is the HTTP layer.

Endpoints (all JSON; errors use OpenAI's ``{"error": {"message", "type",
"param", "code"}}`` shape with the HTTP status):

``POST /v1/chat/completions``
    ``model`` ``script:<id>`` is answered from that script (unknown id -> 404
    "model not found"); any other model name is the stateless demo model.
    ``"stream": true`` is answered as OpenAI streams (server-sent events, the
    usage in a last chunk when ``stream_options.include_usage``), unless the
    script says otherwise (``streaming`` below); the demo model's realistic
    pace spreads the chunks over the answer's time.
``GET /v1/models``, ``GET /v1/models/<id>``
    Lists the ``demo`` model (owned_by says it is a script).
``POST /v1/scripts``  body ``{"responses": [entry, ...], "latency": 0.0, "record": true, "streaming": "stream"}``
    -> ``{"id": "<hex>", "model": "script:<id>"}``.  ``latency`` (optional) is
    the default delay, in seconds, of every entry of that script.  ``streaming``
    (optional): "stream" (default), "refuse" (``"stream": true`` -> 400, as a
    server that cannot stream; consumes no entry) or "ignore" (a plain JSON
    answer to a streamed request).  Every
    chat request to the script is kept (as its raw bytes) for ``/requests``;
    long benchmarks can pass ``"record": false`` to keep memory flat.
``GET /v1/scripts/<id>/requests``
    -> list of the full request bodies received for that script, in order
    (including requests answered 400 for ``stream`` by a "refuse" script).
"""

from __future__ import annotations

import json
import zlib

from hosting.text import loads as bounded_loads

from . import scenarios
from .answers import Reply, answer, error_reply, json_reply, stream_reply, usage_of
from .scripts import STREAMING_MODES, ScriptBook, is_number, validate_entries

OWNED_BY = scenarios.OWNED_BY

_MODEL_OBJECT = {"id": "demo", "object": "model", "created": 0, "owned_by": OWNED_BY}
_MODELS_BODY = json.dumps({"object": "list", "data": [_MODEL_OBJECT]}).encode()
_NO_STREAMING = (
    "streaming is switched off for this script of the offline demo model (a script, not a language model); "
    "send \"stream\": false"
)
# Of a realistic pace's time, this share passes before the first chunk (the model "reads" the
# conversation); the rest is spread over the chunks.
FIRST_CHUNK_SHARE = 0.35


class DemoModel:
    """The demo model and the scripts posted to it. ``latency`` (seconds) is added to the
    delay of every chat reply. ``pace``: "instant", or "realistic" (the example tasks' answers
    take 0.4 to 2.5 s each, as a hosted model's would, so a newcomer sees the live page work;
    scripts keep their own latency)."""

    def __init__(self, latency: float = 0.0, pace: str = "instant"):
        self.latency = float(latency)
        self.pace = pace
        self.scripts = ScriptBook()

    def _paced(self, messages: list) -> float:
        if self.pace != "realistic":
            return 0.0
        # Varied but repeatable: the same conversation takes as long each time.
        spread = zlib.crc32(repr(len(messages)).encode() + repr(messages[-1:]).encode()) % 1000 / 1000
        return round(0.4 + 2.1 * spread, 2)

    # -- scripts (also usable directly from Python) -------------------------

    def create_script(self, responses: list, latency: float = 0.0, record: bool = True,
                      streaming: str = "stream", context_window: int | None = None) -> dict:
        """Same as ``POST /v1/scripts``; returns ``{"id": ..., "model": "script:<id>"}``."""
        problem = validate_entries(responses)
        if problem is None and streaming not in STREAMING_MODES:
            problem = f"'streaming' must be one of {', '.join(STREAMING_MODES)}"
        if problem is None and context_window is not None and not (isinstance(context_window, int) and context_window > 0):
            problem = "'context_window' must be a positive whole number"
        if problem:
            raise ValueError(problem)
        sid = self.scripts.add(responses, float(latency), record, streaming, context_window)
        return {"id": sid, "model": f"script:{sid}"}

    def script_requests(self, script_id: str) -> list:
        """Same as ``GET /v1/scripts/<id>/requests``, parsed (KeyError if unknown)."""
        reqs = self.scripts.requests(script_id)
        if reqs is None:
            raise KeyError(script_id)
        return [json.loads(r) for r in reqs]

    # -- HTTP requests --------------------------------------------------------

    def handle(self, method: str, target: str, raw: bytes = b"") -> Reply:
        """The reply to one HTTP request (``target`` as in the request line, ``raw`` its body)."""
        path = target.split("?", 1)[0].rstrip("/")
        try:
            if method == "GET":
                return self._get(path)
            if method != "POST":
                return error_reply(501, f"unsupported method: {method}", "not_implemented")
            if path not in ("/v1/chat/completions", "/v1/scripts"):
                return error_reply(404, f"unknown endpoint: POST {path}", "not_found")
            try:
                body = bounded_loads(raw)
            except ValueError as exc:
                return error_reply(400, f"request body is not valid JSON: {exc}")
            if not isinstance(body, dict):
                return error_reply(400, "request body must be a JSON object")
            if path == "/v1/chat/completions":
                return self.chat(body, raw)
            return self._post_script(body)
        except Exception as exc:  # noqa: BLE001 - answer 500 instead of dropping the connection
            return error_reply(500, f"demo model server error: {exc!r}")

    def _get(self, path: str) -> Reply:
        if path == "/v1/models":
            return Reply(200, _MODELS_BODY)
        if path.startswith("/v1/models/"):
            model = path[len("/v1/models/"):]
            if model.startswith("script:") and self.scripts.get(model[7:]) is None:
                return error_reply(404, f"model not found: {model}", "model_not_found")
            return json_reply(200, dict(_MODEL_OBJECT, id=model))
        if path.startswith("/v1/scripts/") and path.endswith("/requests"):
            sid = path[len("/v1/scripts/"): -len("/requests")]
            reqs = self.scripts.requests(sid)
            if reqs is None:
                return error_reply(404, f"script not found: {sid}", "script_not_found")
            return Reply(200, b"[" + b",".join(reqs) + b"]")
        return error_reply(404, f"unknown endpoint: GET {path}", "not_found")

    def _post_script(self, body: dict) -> Reply:
        responses = body.get("responses")
        problem = validate_entries(responses)
        latency = body.get("latency", 0.0)
        streaming = body.get("streaming", "stream")
        if problem is None and not is_number(latency):
            problem = "'latency' must be a number"
        window = body.get("context_window")
        if problem is None and streaming not in STREAMING_MODES:
            problem = f"'streaming' must be one of {', '.join(STREAMING_MODES)}"
        if problem is None and window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
            problem = "'context_window' must be a positive whole number"
        if problem:
            return error_reply(400, problem)
        sid = self.scripts.add(responses, float(latency), bool(body.get("record", True)), streaming, window)
        return json_reply(200, {"id": sid, "model": f"script:{sid}"})

    def chat(self, body: dict, raw: bytes = b"") -> Reply:
        """``POST /v1/chat/completions`` with this (parsed) body; ``raw`` is what a script records."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            model = "demo"
        messages = body.get("messages")
        if not isinstance(messages, list):
            return error_reply(400, "'messages' must be a list", type_="invalid_request_error")
        script = None
        if model.startswith("script:"):
            script = self.scripts.record(model[7:], raw)
            if script is None:
                return error_reply(404, f"model not found: {model} (unknown script id)", "model_not_found")
        streamed = body.get("stream") is True
        mode = script.streaming if script is not None else "stream"
        if streamed and mode == "refuse":
            return error_reply(400, _NO_STREAMING, "unsupported_parameter")
        spread = 0.0
        if script is not None and script.context_window:
            prompt = usage_of({}, messages, None, None)["prompt_tokens"]
            if prompt > script.context_window:
                return error_reply(
                    400, f"This model's maximum context length is {script.context_window} tokens. However, your "
                    f"messages resulted in {prompt} tokens. Please reduce the length of the messages.",
                    "context_length_exceeded", type_="invalid_request_error")
        if script is not None:
            entry, delay = self.scripts.take(script, body.get("tool_choice")), script.latency
        else:
            # A latency set by hand replaces the pace (DEMO_MODEL_LATENCY=10: every answer 10 s).
            entry, delay = scenarios.respond(body), 0.0 if self.latency else self._paced(messages)
            if streamed:  # the first words come soon, the rest as they are "written"
                delay, spread = delay * FIRST_CHUNK_SHARE, delay * (1 - FIRST_CHUNK_SHARE)
        reply = answer(entry, model, messages)
        if streamed and mode == "stream" and reply.status == 200 and "raw" not in entry:
            options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
            entry_options = entry.get("stream") if isinstance(entry.get("stream"), dict) else {}
            reply = stream_reply(json.loads(reply.body), include_usage=options.get("include_usage") is True,
                                 options=entry_options, spread=spread)
        reply.delay = self.latency + entry.get("latency", delay)
        return reply
