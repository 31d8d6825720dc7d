"""The decisions around the loop, as small pure functions over plain data."""
import hashlib
import hmac
import json
import math
from dataclasses import dataclass

from hosting.text import MAX_SAFE_INTEGER, JsonTooDeep
from hosting.text import loads as bounded_loads
from runs.models import Run

StopReason = Run.StopReason

# Limits an agent or a launch may set, with what each must be.
POSITIVE_INT_LIMITS = ("max_iterations", "repeat_limit", "max_tokens")
POSITIVE_NUMBER_LIMITS = ("max_wall_seconds", "max_cost_usd")


class InvalidLimit(ValueError):
    pass


def check_positive_int(name: str, value) -> int:
    """A limit must be a real positive integer: not a bool, not 2.5, not "3", not above 2**53-1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLimit(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise InvalidLimit(f"{name} must be a positive integer, got {value}")
    if value > MAX_SAFE_INTEGER:
        raise InvalidLimit(f"{name} must be at most 2**53-1, got {value}")
    return value


def check_positive_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidLimit(f"{name} must be a positive number, got {value!r}")
    if value <= 0 or value == float("inf"):
        raise InvalidLimit(f"{name} must be a positive, finite number, got {value}")
    return float(value)


def check_limits(config: dict) -> dict:
    for name in POSITIVE_INT_LIMITS:
        check_positive_int(name, config[name])
    for name in POSITIVE_NUMBER_LIMITS:
        check_positive_number(name, config[name])
    return config


# --- Arguments ---------------------------------------------------------------------------------


NOT_FINITE_ERROR = "arguments hold a number that is not finite (NaN, Infinity or too large); send a finite number"


class _NotFinite(ValueError):
    pass


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e999 reads as inf
        raise _NotFinite(text)
    return number


def _no_constant(text: str):
    raise _NotFinite(text)  # NaN, Infinity, -Infinity: Python's json reads them, JSON has no such numbers


def parse_arguments(raw: str) -> tuple[dict | None, str | None]:
    """(arguments, None) or (None, error) for arguments that are not a JSON object.

    A number that is not finite is refused here, for the model's calls and operators' edits alike:
    it passes every schema bound (NaN > 1000 is false) and every rule's comparison."""
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        return {}, None  # some servers send "" for a call without arguments
    try:
        value = bounded_loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except JsonTooDeep as exc:
        return None, f"arguments are nested too deeply (deeper than {exc.limit} levels)"
    except _NotFinite:
        return None, NOT_FINITE_ERROR
    except (TypeError, ValueError) as exc:
        return None, f"arguments are not valid JSON ({exc.__class__.__name__}: {exc})"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def canonical_arguments(raw: str) -> str:
    """Sorted-key compact JSON, so reformatted but equal arguments compare equal."""
    try:
        return json.dumps(bounded_loads(raw), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # unreadable arguments: hashed as sent
        return raw if isinstance(raw, str) else ""


def args_hash(raw: str, key: str) -> str:
    return hmac.new(key.encode(), canonical_arguments(raw).encode(), hashlib.sha256).hexdigest()


def idempotency_key(run_id: int, step_index: int, call_index: int) -> str:
    """One key per call of a run: its place in the run, never the model's id for it (some servers
    number calls per answer, so `call_0` comes back in every answer)."""
    return hashlib.sha256(f"run:{run_id}:step:{step_index}:call:{call_index}".encode()).hexdigest()[:40]


# --- Per-response decisions ----------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedCall:
    index: int
    call_id: str
    tool_name: str
    arguments: str
    args_hash: str


def repeated_call(calls: list[PlannedCall], seen: dict[tuple[str, str], int], limits: dict[str, int]) -> PlannedCall | None:
    """The first call whose fingerprint (tool + canonical args) reaches its repeat limit, if any.

    `seen` counts each fingerprint's earlier calls in the run; calls in this response count too.
    """
    counts = dict(seen)
    for call in calls:
        key = (call.tool_name, call.args_hash)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= limits.get(call.tool_name, limits["*"]):
            return call
    return None


def tool_choice_for(iteration: int, config: dict) -> str:
    return config["first_tool_choice"] if iteration == 1 else config["later_tool_choice"]


def budget_exceeded(*, config: dict, tokens: int, cost: float, elapsed: float) -> str | None:
    """The stop reason of the first budget used up, or None."""
    if elapsed >= config["max_wall_seconds"]:
        return StopReason.TIME_BUDGET
    if tokens >= config["max_tokens"]:
        return StopReason.TOKEN_BUDGET
    if cost >= config["max_cost_usd"]:
        return StopReason.COST_BUDGET
    return None


def tool_result_content(payload: dict, *, max_chars: int, preview_chars: int) -> tuple[str, bool]:
    """The tool message content for the model, and whether it had to be truncated.

    An oversized result is replaced by valid JSON holding a preview and the original size.
    """
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) <= max_chars:
        return text, False
    short = {"ok": payload.get("ok"), "truncated": True, "original_size": len(text), "preview": text[:preview_chars]}
    return json.dumps(short, ensure_ascii=False, separators=(",", ":")), True


def stop_message(reason: str, config: dict, detail: str = "") -> str:
    """Why the run ended, in words an operator understands at a glance."""
    texts = {
        StopReason.FINAL_ANSWER: "The model gave its final answer.",
        StopReason.ITERATION_LIMIT: f"Stopped after {config.get('max_iterations')} iterations, the agent's limit; "
        "the model still wanted to call tools, and those calls were not run.",
        StopReason.REPEATED_CALL: "Stopped because the model kept making the same call with the same arguments "
        f"({detail}); that call was not run again.",
        StopReason.MODEL_ERROR: f"Every model failed to answer: {detail}",
        StopReason.MAX_TOKENS: "The model's answer was cut off at its output token limit.",
        StopReason.CONTENT_FILTER: f"The model refused or its answer was filtered. {detail}".strip(),
        StopReason.TIME_BUDGET: f"Stopped at the time budget of {config.get('max_wall_seconds')} seconds.",
        StopReason.TOKEN_BUDGET: f"Stopped at the token budget of {config.get('max_tokens')} tokens.",
        StopReason.COST_BUDGET: f"Stopped at the cost budget of ${config.get('max_cost_usd')}.",
        StopReason.VERIFICATION_FAILED: f"The final answer failed verification twice: {detail}",
        StopReason.CANCELLED: detail or "Cancelled by an operator.",
        StopReason.WORKER_LOST: f"The worker running this run was lost too many times. {detail}".strip(),
        StopReason.INTERNAL_ERROR: f"The run failed on an internal error: {detail}",
        StopReason.CONTEXT_FULL: (
            "The conversation no longer fits the model's context, even with older results summarised: "
            if config.get("context_budget") else
            "The conversation no longer fits the model's context (summarising older results is off for this agent): "
        ) + detail,
    }
    return texts.get(reason, detail or reason)
