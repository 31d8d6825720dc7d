"""A streamed chat completion put back together, chunk by chunk, into the shape of a plain one.

runs/engine/llm/completions.py asks for `stream: true` and feeds each chunk here; once the stream has ended
with a finish reason, `completion()` is the body a plain request would have returned, and from
there the answer is read, validated and decided exactly as a plain answer is. Nothing here is
stored: while the answer is being written, only the run page sees it (runs/engine/streaming.py).
"""
import json
from dataclasses import dataclass, field

from runs.engine.llm.answers import REASONING_FIELDS, provider_error

# "Estimated" usage, for a provider that sends none with the stream: about four characters a token.
CHARS_PER_TOKEN = 4


class StreamCut(Exception):
    """The stream ended before the answer did (no finish reason)."""


class StreamError(Exception):
    """The server sent an error in the middle of the stream ({"error": ...} as a chunk, or vLLM's
    {"object": "error", "message": ...} followed by "[DONE]")."""


def sse_chunks(lines):
    """The JSON chunks of a server-sent event stream given line by line, until "[DONE]"; the lines
    after it are read too (to the body's end) and ignored. Multi-line data fields are joined as
    the SSE format says; comments and other fields are skipped."""
    data: list[str] = []
    done = False
    for line in lines:
        if line == "":
            if data and not done:
                text = "\n".join(data)
                if text.strip() == "[DONE]":
                    done = True
                else:
                    chunk = json.loads(text)
                    if isinstance(chunk, dict) and (chunk.get("error") or chunk.get("object") == "error"):
                        raise StreamError(f"the server sent an error in the stream: {provider_error(chunk) or 'no message'}")
                    yield chunk
            data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if data and not done and "\n".join(data).strip() not in ("", "[DONE]"):
        yield json.loads("\n".join(data))  # a last event without its blank line


@dataclass
class _Call:
    id: str = ""
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)

    def arguments_complete(self) -> bool:
        """Whether the arguments so far are a whole JSON value (so a new name cannot continue them)."""
        text = "".join(self.arguments).strip()
        if not text or text[-1] not in "}]":  # arguments are an object: a piece ending elsewhere is not the end
            return False
        try:
            json.loads(text)
        except (ValueError, RecursionError):  # not JSON yet, or too deep to read (refused later, in words)
            return False
        return True


def starts_new_call(call: _Call, *, call_id: str, name: str) -> bool:
    """Whether a piece carrying `call_id` and `name` (either may be "") begins a call of its own
    rather than continuing `call`, the call in progress at its index (or the last one, for a piece
    without an index). OpenAI sends a call's id and name once, in its first piece, and a new index
    for each call; Ollama sends every parallel call whole at index 0, each with a new id or none;
    mistral.rs and some proxies send no index at all; vllm.rs and vLLM's harmony streaming send a
    new id with every piece of one call, and some servers repeat the name in every piece."""
    named = "".join(call.name)
    id_changed = bool(call_id) and call_id != call.id
    renamed = bool(name) and bool(named)
    if not (id_changed or renamed):
        return False  # most pieces: more of the arguments (nothing here reads them: a long call stays linear)
    if call.arguments_complete():
        # The call is whole: a new id, or a name without the call's own id, begins the next one.
        return id_changed or (renamed and not (call_id and call_id == call.id))
    if "".join(call.arguments).strip():
        # Arguments half written: the piece continues them whatever id it carries, unless it
        # names another tool.
        return renamed and name != named
    # No arguments yet: the name may still be coming in pieces; a new id naming another tool is a
    # call sent without arguments, followed by the next.
    return bool(call.id) and id_changed and renamed and name != named


class StreamedAnswer:
    """The answer so far: the text, reasoning and tool calls of choice 0, and the usage."""

    def __init__(self):
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: list[_Call] = []  # in the order they began
        self._at_index: dict[int, _Call] = {}  # the call in progress at each index
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.model = ""
        self.chunks = 0
        self.failure = None  # a choice that ended with an error: kept as a plain body would carry it

    def add(self, chunk) -> bool:
        """Take one chunk; True when what a person would see (text or calls) changed."""
        self.chunks += 1
        if not isinstance(chunk, dict):
            return False
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return False
        changed = False
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("error") or choice.get("finish_reason") == "error":
                self.failure = choice
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                changed = self._take_delta(delta) or changed
        return changed

    def _take_delta(self, delta: dict) -> bool:
        changed = False
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content.append(delta["content"])
            changed = True
        for name in REASONING_FIELDS:
            if isinstance(delta.get(name), str) and delta[name]:
                self.reasoning.append(delta[name])
                changed = True
        if isinstance(delta.get("refusal"), str) and delta["refusal"]:
            self.refusal.append(delta["refusal"])
        for part in delta.get("tool_calls") or ():
            if isinstance(part, dict):
                self._take_call_piece(part)
                changed = True
        return changed

    def _take_call_piece(self, part: dict) -> None:
        index = part.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            index = None  # a piece without an index continues the call in progress
        call_id = part["id"] if isinstance(part.get("id"), str) else ""
        function = part.get("function") if isinstance(part.get("function"), dict) else {}
        name = function["name"] if isinstance(function.get("name"), str) else ""
        call = self._at_index.get(index) if index is not None else (self.calls[-1] if self.calls else None)
        if call is None or starts_new_call(call, call_id=call_id, name=name):
            call = _Call()
            self.calls.append(call)
        if index is not None:
            self._at_index[index] = call
        if call_id and not call.id:
            call.id = call_id  # the id the call began with (some servers send a new one every piece)
        if name and name != "".join(call.name):
            call.name.append(name)  # (a server that repeats the name in every piece: once)
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments.append(arguments)
        elif arguments is not None:
            call.arguments.append(json.dumps(arguments))

    # --- what the page is shown while it streams ---------------------------------------------

    def text(self) -> str:
        return "".join(self.content)

    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    def calls_so_far(self) -> list[tuple[str, str]]:
        """(tool name, arguments so far) of each call, in order."""
        return [("".join(c.name), "".join(c.arguments)) for c in self.calls]

    # --- the answer, once complete -----------------------------------------------------------

    def completion(self, *, prompt_chars: int) -> tuple[dict, bool]:
        """(the body a plain request would have returned, whether its usage is an estimate).
        Raises StreamCut when the stream ended without a finish reason."""
        if self.failure is not None:
            return {"model": self.model, "choices": [self.failure]}, False
        if self.finish_reason is None:
            raise StreamCut(f"the stream ended before the answer was complete ({self.chunks} chunks)")
        message = {"role": "assistant", "content": self.text()}
        reasoning = self.reasoning_text()
        if reasoning:
            message["reasoning_content"] = reasoning
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": "".join(c.name), "arguments": "".join(c.arguments)}}
                for c in self.calls
            ]
        usage, estimated = self.usage, False
        if not usage or usage.get("completion_tokens") is None:
            out_chars = len(message["content"]) + len(reasoning) + sum(len("".join(c.arguments)) for c in self.calls)
            usage = {"prompt_tokens": prompt_chars // CHARS_PER_TOKEN, "completion_tokens": -(-out_chars // CHARS_PER_TOKEN)}
            estimated = True
        body = {"model": self.model, "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
                "usage": usage}
        return body, estimated
