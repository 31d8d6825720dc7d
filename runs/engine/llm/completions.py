"""The one place that talks to models: OpenAI-compatible chat completions with an ordered fallback.

Requests go through the official `openai` client (its HTTP stack, auth, retries honouring
Retry-After, and error types). The body is serialised once by us and sent as content: with
long histories the client's own per-message request preparation costs far more than the
network, and our messages are plain JSON we already trust.
"""
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import httpx2
import openai
import orjson
from django.conf import settings

from runs.engine.context.window import ContextFull
from runs.engine.llm.answers import Notes, content_and_reasoning, provider_error, safe_text
from runs.engine.llm.clients import Endpoint, ModelError, client_for
from runs.engine.llm.stream import StreamCut, StreamedAnswer, StreamError, sse_chunks
from toolsapp.sensitive import redact

log = logging.getLogger("runs.llm")  # its name from before the move: operators filter on it


class BadResponse(Exception):
    """The server answered, but not with a chat completion we can use."""


class ContextTooLong(ModelError):
    """Every model refused the conversation for its length (after one harder compaction each)."""


# What providers say when a request passes the model's context window: OpenAI's code, and the
# words of llama.cpp, vLLM, Ollama, Anthropic's and Mistral's compatible endpoints.
CONTEXT_WORDS = (
    "context_length_exceeded", "context length", "maximum context", "context window", "context size",
    "too many tokens", "prompt is too long", "exceeds the available context", "input is too long",
)


# (base URL, model) that refused a streamed request and then answered a plain one: asked plainly
# from then on, by this process (a restart tries streaming again).
_plain_only: set[tuple[str, str]] = set()
# Statuses with which a server may refuse "stream": true, saying so (and answer the same request plainly).
STREAM_REFUSED_STATUSES = (400, 404, 405, 415, 422, 500, 501)


@dataclass
class ModelReply:
    model: str
    message: dict  # the assistant message as it will be sent back
    content: str
    tool_calls: list[dict]
    finish_reason: str
    refusal: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: float
    tool_choice: str
    tool_choice_fallback: bool = False
    errors: list[str] = field(default_factory=list)
    reasoning: str = ""  # kept apart from the content: shown, never sent back
    notes: list[str] = field(default_factory=list)  # what reading the answer replaced or left out
    tokens_cached: int = 0  # of tokens_in, read from the provider's prompt cache
    tokens_reasoning: int = 0  # of tokens_out, spent on reasoning
    usage_estimated: bool = False  # the provider sent no usage: the tokens are our estimate


_odd_usage_logged: set[tuple[str, str]] = set()


def _reported(usage: dict, name: str, model: str):
    """A usage figure the provider reported, or 0 when it makes no sense (negative, not a finite
    number): a budget must never be lowered or switched off by what a server says. Tokens are
    whole numbers; the cost stays a float. Each odd figure is logged once per model and name."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        if (model, name) not in _odd_usage_logged:
            _odd_usage_logged.add((model, name))
            log.warning("model %s reported usage.%s = %.60r; counted as 0", model, name, value)
        return 0
    return float(value) if name == "cost" else int(value)


def price(model: str, tokens_in: int, tokens_out: int, cached: int = 0, reasoning: int = 0) -> float:
    """The cost by the price table: [input, output, cached input, reasoning output] per million
    tokens; cached input at the input rate and reasoning at the output rate when not given. The
    cached tokens are part of `tokens_in` and the reasoning tokens of `tokens_out`, as reported."""
    prices = settings.LLM_PRICES
    rates = list(prices.get(model) or prices.get(model.split(":")[0]) or prices.get("*") or [0, 0])
    rate_in, rate_out = rates[0], rates[1]
    rate_cached = rates[2] if len(rates) > 2 else rate_in
    rate_reasoning = rates[3] if len(rates) > 3 else rate_out
    cached, reasoning = min(cached, tokens_in), min(reasoning, tokens_out)
    return ((tokens_in - cached) * rate_in + cached * rate_cached
            + (tokens_out - reasoning) * rate_out + reasoning * rate_reasoning) / 1_000_000


def _detail(usage: dict, part: str, name: str, model: str) -> int:
    """A count inside usage's details (prompt_tokens_details.cached_tokens, ...), or 0."""
    details = usage.get(part)
    return _reported(details, name, model) if isinstance(details, dict) else 0


def _context_too_long(exc: Exception) -> bool:
    """Whether an error answer says the request passed the model's context window."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 413, 422, 500):
        return False
    if getattr(exc, "code", None) == "context_length_exceeded":
        return True
    return any(words in _described(exc, ()).lower() for words in CONTEXT_WORDS)


ERROR_DETAIL_CHARS = 300  # of a server's error message kept in a run's stop detail and the logs


def _describe(exc: Exception, secrets: tuple[str, ...] = ()) -> str:
    """A failure in one bounded line, with every value of `secrets` (the API key, sensitive
    arguments) blanked out: a server's error body may echo the request. Safe to store (a body
    may hold NUL or half a character)."""
    return safe_text(_described(exc, secrets))[0]


def _described(exc: Exception, secrets: tuple[str, ...]) -> str:
    if isinstance(exc, openai.APIStatusError):
        message = exc.message if isinstance(exc.message, str) else str(exc)
        if message.strip() in ("", f"Error code: {exc.status_code}"):
            # Some servers put the reason in a body the client could not parse.
            try:
                message = exc.response.text.strip() or "no error message"
            except Exception:
                message = "no error message"
        return f"HTTP {exc.status_code}: {redact(message, secrets)[:ERROR_DETAIL_CHARS]}"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, StreamCut | StreamError):
        return redact(str(exc), secrets)[:ERROR_DETAIL_CHARS]
    if isinstance(exc, openai.APIConnectionError):
        return redact(f"connection failed: {exc.__cause__ or exc}", secrets)[:ERROR_DETAIL_CHARS]
    return redact(f"{type(exc).__name__}: {exc}", secrets)[:ERROR_DETAIL_CHARS]


def _parse(data, model: str) -> dict:
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        said = provider_error(data)
        raise BadResponse("the response has no choices" + (f"; the provider said: {said}" if said else ""))
    choice = data["choices"][0]
    # OpenRouter answers 200 with finish_reason "error" when the upstream provider failed.
    if isinstance(choice, dict) and (choice.get("finish_reason") == "error" or choice.get("error")):
        raise BadResponse(f"the answer ended with an error: {provider_error(choice) or 'no error message'}")
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise BadResponse("the first choice has no message")
    return choice


def _assistant_message(content: str, tool_calls: list[dict]) -> dict:
    # String content, "" when empty: llama.cpp's server rejects null content on the way back.
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _normalise_tool_calls(raw_calls, notes: Notes) -> list[dict]:
    """Tool calls as we send them back: every call with a unique, non-empty id and string
    arguments, each text safe to store and to send (see answers.py)."""
    calls, seen = [], set()
    for position, raw in enumerate(raw_calls or []):
        if not isinstance(raw, dict):
            continue
        function = raw.get("function") or {}
        call_id = raw.get("id") or ""
        if isinstance(call_id, str):
            call_id = notes.text(call_id, "a call's id")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            call_id = f"call_{len(seen)}_{position}_{int(time.time() * 1000) % 100000}"
        seen.add(call_id)
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments) if arguments is not None else ""
        arguments = notes.json_text(arguments, f"the arguments of call {call_id}")
        name = notes.text(function.get("name") or "", f"the tool name of call {call_id}")
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def _encode(body: dict) -> bytes:
    # orjson is ~10x faster on long histories; it refuses integers beyond 64 bits.
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _streamed(sender: openai.OpenAI, body: dict, stream_to) -> tuple[dict, StreamedAnswer | None, bool]:
    """(the answer as a plain request's body, the stream it was read from, whether the usage is an
    estimate). A server that ignores "stream" and answers with plain JSON is read as such."""
    content = _encode(body)
    chunks = sender.post(
        "/chat/completions",
        cast_to=object,
        content=content,
        options={"headers": {"Content-Type": "application/json"}},
        stream=True,
        stream_cls=openai.Stream[object],
    )
    response = chunks.response
    with chunks:
        try:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                response.read()
                return response.json(), None, False  # parsed as the client parses a plain answer
            answer = StreamedAnswer()
            try:
                # Read by us to the body's end, past "[DONE]": the client's own stream reader
                # stops there and closes the response, and the connection with it (a new TCP
                # connection for every answer).
                for chunk in sse_chunks(response.iter_lines()):
                    if answer.add(chunk):
                        stream_to.update(answer)
                data, estimated = answer.completion(prompt_chars=len(content))
            except Exception as exc:
                exc.streamed_answer = answer  # what was shown so far, to mark discarded
                raise
            return data, answer, estimated
        except httpx2.TimeoutException as exc:
            raise _as_openai(openai.APITimeoutError(request=response.request), exc) from exc
        except httpx2.TransportError as exc:
            raise _as_openai(openai.APIConnectionError(request=response.request), exc) from exc


def _refuses_streams(exc: Exception) -> bool:
    """Whether an error answer to a streamed request says the server does not stream. Only then
    is the request sent again plainly: any other error (a context too long, a crash) would be the
    same without "stream" and is that model's failure as it is."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in STREAM_REFUSED_STATUSES:
        return False
    return "stream" in _described(exc, ()).lower()


def _as_openai(error: openai.APIError, cause: Exception) -> openai.APIError:
    """The client's error for a transport failure while we read the body, keeping what was shown."""
    if hasattr(cause, "streamed_answer"):
        error.streamed_answer = cause.streamed_answer
    error.__cause__ = cause
    return error


def complete(
    *,
    endpoint: Endpoint,
    messages: list[dict],
    tools: list[dict],
    tool_choice: str,
    parallel_tool_calls: bool,
    provider_options: dict | None = None,
    max_output_tokens: int | None = None,
    timeout: float | None = None,
    redacted: Callable[[], Iterable[str]] = tuple,
    stream_to=None,
    shrink: Callable[[], tuple[list[dict], list[dict]]] | None = None,
) -> ModelReply:
    """Ask each model in order until one answers; raise ModelError with every failure otherwise.

    `stream_to` (a runs.engine.streaming.AnswerStream, or None for a plain request): the answer is
    asked for as a stream and its progress handed there while it is written. The answer is read
    and returned only once complete, exactly as a plain one; a stream cut in the middle is that
    model's failure (the next model is asked); a server that refuses to stream is asked again
    plainly, and plainly from then on.

    `redacted`: gives the values (sensitive tool arguments) that must not appear in an error kept
    or logged; called only when there is an error to describe (finding them re-reads every call of
    the conversation). The API keys never appear either.

    `shrink`: gives the messages compacted harder and the tool definitions to send with them,
    called when a model refuses the request for its length; that model is asked once more with
    them (and the next models get them too). It may raise runs.engine.context.window.ContextFull. When
    every model refused for length, ContextTooLong."""

    def secrets() -> tuple[str, ...]:
        return (settings.LLM_API_KEY, *redacted())  # an endpoint's own key is this one or a placeholder

    client = client_for(endpoint.base_url, endpoint.api_key, timeout, guarded=endpoint.guarded)
    errors: list[str] = []
    too_long = 0  # models that refused the conversation for its length
    for model in endpoint.models:
        choice_used, fallback, shrunk = tool_choice, False, False
        streaming = stream_to is not None and (endpoint.base_url, model) not in _plain_only
        stream_refused = ""
        started = time.perf_counter()  # latency includes a refused "required" attempt
        while True:
            body = {"model": model, "messages": messages}
            if tools:
                body["tools"] = tools
                body["tool_choice"] = choice_used
                if parallel_tool_calls is False:
                    body["parallel_tool_calls"] = False
            if max_output_tokens:
                body["max_tokens"] = max_output_tokens
            if provider_options:
                body.update(provider_options)
            if streaming:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            # A server that refuses "required" refuses it every time: do not spend the client's
            # retries on it, ask again with "auto" straight away.
            if choice_used == "required" and tools:
                sender = client_for(endpoint.base_url, endpoint.api_key, timeout, retries=False, guarded=endpoint.guarded)
            else:
                sender = client
            usage_estimated = False
            try:
                if streaming:
                    stream_to.begin(model)
                    data, _answer, usage_estimated = _streamed(sender, body, stream_to)
                else:
                    data = sender.post(
                        "/chat/completions",
                        cast_to=object,
                        content=_encode(body),
                        options={"headers": {"Content-Type": "application/json"}},
                    )
                choice = _parse(data, model)
            except (openai.APIError, BadResponse, ValueError, StreamCut, StreamError, RecursionError) as exc:
                answer = getattr(exc, "streamed_answer", None)
                if isinstance(exc, RecursionError):  # a chunk nested too deeply for Python's json
                    exc = BadResponse("a chunk of the stream is nested too deeply to read")
                if answer is not None and answer.chunks:
                    # Cut (or unreadable) in the middle: the partial answer is discarded, never
                    # used, and the next model is asked.
                    errors.append(f"{model}: the streamed answer was cut off: {_describe(exc, secrets())}; "
                                  "the partial answer was discarded")
                    stream_to.discard(errors[-1], answer)
                    log.warning("model %s failed: %s", model, errors[-1])
                    break
                if streaming and _refuses_streams(exc):
                    # A server that does not stream: the same request, plainly.
                    streaming, stream_refused = False, _describe(exc, secrets())
                    continue
                if _context_too_long(exc):
                    if shrink is not None and not shrunk:
                        shrunk = True
                        try:
                            messages, tools = shrink()
                        except ContextFull as full:
                            errors.append(f"{model}: the conversation is too long for its context "
                                          f"({_describe(exc, secrets())}), and cannot be shortened further ({full})")
                        else:
                            errors.append(f"{model}: the conversation is too long for its context "
                                          f"({_describe(exc, secrets())}); older results summarised harder and asked again")
                            continue
                    else:
                        errors.append(f"{model}: the conversation is too long for its context ({_describe(exc, secrets())})")
                    too_long += 1
                    log.warning("model %s failed: %s", model, errors[-1])
                    break
                refused_required = (
                    choice_used == "required"
                    and not fallback
                    and isinstance(exc, openai.APIStatusError)
                    and exc.status_code in (400, 422, 500)
                )
                if refused_required:
                    # llama.cpp's server answers 500 to tool_choice "required": ask again with "auto".
                    errors.append(
                        f"{model}: tool_choice required refused ({_describe(exc, secrets())}); retried with auto"
                    )
                    choice_used, fallback = "auto", True
                    if stream_refused:  # it was "required" it refused, perhaps not the stream
                        streaming, stream_refused = True, ""
                    continue
                errors.append(f"{model}: {_describe(exc, secrets())}")
                log.warning("model %s failed: %s", model, errors[-1])
                break
            latency_ms = (time.perf_counter() - started) * 1000
            message, notes = choice["message"], Notes()
            if stream_refused:
                _plain_only.add((endpoint.base_url, model))
                notes.lines.append(f"the model refused a streamed request ({stream_refused}); asked without streaming")
            if usage_estimated:
                notes.lines.append("usage estimated (about 4 characters a token): the provider sent none with the stream")
            tool_calls = _normalise_tool_calls(message.get("tool_calls"), notes)
            content, reasoning = content_and_reasoning(message, notes)
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            tokens_in = _reported(usage, "prompt_tokens", model)
            tokens_out = _reported(usage, "completion_tokens", model)
            cached = min(_detail(usage, "prompt_tokens_details", "cached_tokens", model), tokens_in)
            reasoning_tokens = min(_detail(usage, "completion_tokens_details", "reasoning_tokens", model), tokens_out)
            cost = None if usage.get("cost") is None else _reported(usage, "cost", model)
            return ModelReply(
                model=notes.text(data.get("model") or model, "the model's name"),
                message=_assistant_message(content, tool_calls),
                content=content,
                tool_calls=tool_calls,
                finish_reason=notes.text(choice.get("finish_reason") or ("tool_calls" if tool_calls else "stop"),
                                         "the finish reason"),
                refusal=notes.text(message.get("refusal"), "the refusal") or None,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=price(model, tokens_in, tokens_out, cached, reasoning_tokens) if cost is None else cost,
                latency_ms=latency_ms,
                tool_choice=choice_used if tools else "",
                tool_choice_fallback=fallback,
                errors=errors,
                reasoning=reasoning,
                notes=notes.lines,
                tokens_cached=cached,
                tokens_reasoning=reasoning_tokens,
                usage_estimated=usage_estimated,
            )
    if endpoint.models and too_long == len(endpoint.models):
        raise ContextTooLong("; ".join(errors))
    raise ModelError("; ".join(errors) or "no model to ask")
