"""The plain values of a run's trace: its ids (keyed hashes of the run's id, the same in every
process of a site), the model's call ids as they may leave, times, result hashes and the kinds of
model errors (runs/observability/tracing/run_spans.py)."""

import hashlib
import hmac
import json
import re
from functools import lru_cache
from urllib.parse import urlsplit

import orjson
from django.conf import settings

from runs.models import Run

ERROR_TYPES = [  # (pattern at the start of a model error's text, its error.type)
    (re.compile(r"tool_choice required refused"), "tool_choice_refused"),
    (re.compile(r"HTTP (\d{3})"), None),  # the status code itself
    (re.compile(r"timed out"), "timeout"),
    (re.compile(r"connection failed"), "connection_error"),
    (re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,60}): "), None),  # an exception's class name
]


# What providers send as a call id ("call_Xy12...", "toolu_01...", "chatcmpl-tool-..."): anything
# else is the model's own text, of any length, which may repeat what a tool marks sensitive.
PLAIN_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
CALL_ID_HASH = "hmac-sha256:"
CALL_ID_HASH_CHARS = 32  # 128 bits: enough to tell a run's calls apart, and a bounded attribute


@lru_cache(maxsize=4)
def _ids_key(key: str) -> bytes:
    """The key of the ids, derived from ARGS_HASH_KEY (BLAKE2 takes at most 64 bytes of key)."""
    return hashlib.sha256(b"agentsite traces:" + key.encode()).digest()


def _keyed(key: str, size: int, *parts) -> int:
    # Keyed BLAKE2b: an HMAC's strength at a fraction of its cost (one per span).
    message = ":".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(message, digest_size=size, key=_ids_key(key)).digest(), "big") or 1


@lru_cache(maxsize=4096)  # every span of a run needs both: computed once per run and process
def _run_ids(key: str, run_id: int) -> tuple[int, int]:
    return _keyed(key, 16, "run", run_id), _keyed(key, 8, "run", run_id, "agent")


@lru_cache(maxsize=4)
def installation_id(key: str | None = None) -> str:
    """This installation in its exported ids: 16 hex digits of a keyed hash of a constant under
    ARGS_HASH_KEY, so the same in every process of a site (as the trace ids are), different
    between sites, and telling nothing of the key."""
    return f"{_keyed(key or settings.ARGS_HASH_KEY, 8, 'installation'):016x}"


def conversation_id(run_id: int, key: str | None = None) -> str:
    """The run as `gen_ai.conversation.id`: its id on this installation. A bare database id would
    merge the runs of two installations that export to one collector (both have a run 7)."""
    return f"{installation_id(key)}-{run_id}"


def trace_id(run_id: int, key: str | None = None) -> int:
    """The run's trace: the same in every process of this site, unguessable and distinct elsewhere."""
    return _run_ids(key or settings.ARGS_HASH_KEY, run_id)[0]


def run_span_id(run_id: int, key: str | None = None) -> int:
    return _run_ids(key or settings.ARGS_HASH_KEY, run_id)[1]


def span_id(run_id: int, *parts, key: str | None = None) -> int:
    return _keyed(key or settings.ARGS_HASH_KEY, 8, "run", run_id, *parts)


@lru_cache(maxsize=256)
def url_host(url: str) -> str | None:
    return urlsplit(url).hostname


def unix_ns(moment) -> int:
    return int(moment.timestamp() * 1_000_000) * 1000


def result_hash(result, key: str | None = None) -> str:
    """A result as the arguments are hashed: HMAC-SHA256 (ARGS_HASH_KEY) of sorted-key compact JSON."""
    try:
        canonical = orjson.dumps(result, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson refuses (an integer beyond 64 bits): the standard library's form
        canonical = json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hmac.digest((key or settings.ARGS_HASH_KEY).encode(), canonical, "sha256").hex()


def call_id_value(call_id: str, key: str | None = None) -> str:
    """A model's call id as a span carries it: as sent when it looks like a provider's id (at most
    64 ASCII letters, digits and "_.:-"), else "hmac-sha256:" and 32 hex digits of its HMAC
    (ARGS_HASH_KEY), so neither a long id nor model text leaves the process, and whoever holds the
    key can still find the call the span names."""
    if PLAIN_CALL_ID.fullmatch(call_id):
        return call_id
    digest = hmac.digest((key or settings.ARGS_HASH_KEY).encode(), call_id.encode("utf-8", "surrogatepass"), "sha256")
    return CALL_ID_HASH + digest.hex()[:CALL_ID_HASH_CHARS]


def models_asked(run: Run) -> list[str]:
    return list(run.config.get("models") or settings.LLM_MODELS) or ["demo"]


def model_failures(errors: list[str], models: list[str]) -> list[tuple[str, str]]:
    """(model, error.type) of each failure text "model: what happened" (the text itself stays)."""
    failures = []
    for text in errors:
        model = next((m for m in sorted(models, key=len, reverse=True) if text.startswith(f"{m}: ")), None)
        rest = text[len(model) + 2 :] if model else (text.partition(": ")[2] or text)
        failures.append((model or "unknown", error_type(rest)))
    return failures


# The model-error texts of runs/engine/llm/completions.py after which it asks the SAME model again (with
# tool_choice "auto", or with older results summarised harder): that model may then answer.
ASKED_AGAIN = ("; retried with auto", "; older results summarised harder and asked again")


def model_answering(errors: list[str], models: list[str]) -> str | None:
    """The model of the run's list that was asked for the answer that followed `errors` (the
    failures before it, "model: what happened"). Models are asked in order, each until it answers
    or fails for good, so it is the first model, the one that failed last when that failure was
    one it is asked again after, or else the one after it. None when the texts do not say."""
    if not models:
        return None
    if not errors:
        return models[0]
    last, _kind = model_failures(errors[-1:], models)[0]
    if last not in models:
        return None
    if errors[-1].endswith(ASKED_AGAIN):
        return last
    following = models.index(last) + 1
    return models[following] if following < len(models) else None


# What a failed tool call's span says of why (its status message): our own words, picked by
# the start of the error text, which itself never leaves (a tool's error may repeat arguments
# or results, a model's text an unknown tool's name).
TOOL_FAILURES = [
    (re.compile(r"unknown tool"), "no tool of the run by that name"),
    (re.compile(r"invalid arguments"), "arguments refused by the tool's schema"),
    (re.compile(r"the tool (timed out|could not start within)"), "timed out"),
    (re.compile(r"outcome unknown"), "it may have taken effect"),
    (re.compile(r"the tool failed with an unexpected ([A-Za-z_][A-Za-z0-9_]{0,60})"), "the tool raised {0}"),
    (re.compile(r"the tool returned a result that is not JSON"), "its result is not JSON"),
    (re.compile(r"tool .{0,250} is not answering"), "the tool is not answering"),
]


def tool_failure(text: str) -> str:
    """Why a tool call failed, in a few words of ours (see TOOL_FAILURES)."""
    for pattern, words in TOOL_FAILURES:
        match = pattern.match(text)
        if match:
            return words.format(*match.groups())
    return "the tool reported an error"


def error_type(text: str) -> str:
    for pattern, kind in ERROR_TYPES:
        match = pattern.match(text)
        if match:
            return kind or match.group(1)
    return "error"
