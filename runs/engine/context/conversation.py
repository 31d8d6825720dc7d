"""The message history of a run, rebuilt from its rows alone (so a crash loses nothing)."""
from typing import NamedTuple

from runs.engine.context.window import refused_arguments
from runs.models import Run, Step, ToolCall


class _Answered(NamedTuple):
    """One call's result message, and what its arguments are sent back as."""

    call_id: str
    content: str
    refused: tuple[str, str] | None  # (args hash, error) of a call refused before it ran


def _answered(call_id: str, content: str, status: str, latency_ms: float | None, args_hash: str,
              error: str) -> _Answered:
    # A failed call never handed to its tool has no latency: refused by the decision (unknown tool,
    # not JSON, against its schema) or by the gate (its tool disabled meanwhile).
    refused = status == ToolCall.Status.FAILED and latency_ms is None
    return _Answered(call_id, content, (args_hash, error) if refused else None)


def build_messages(run: Run, *, before_step: int | None = None) -> list[dict]:
    """System prompt, task, then per step: its preamble, the assistant message, one result per call.

    `before_step`: the conversation as the request of that step carried it (the steps before it,
    then its own preamble), instead of the whole run with what waits for the next request."""
    messages = [
        {"role": "system", "content": run.config["system_prompt"]},
        {"role": "user", "content": run.task},
    ]
    if run.iterations == 0:
        # Steps and calls are committed together with the iteration count: a run that has not
        # had an iteration has none to read.
        return messages + list(run.pending_messages)
    steps, calls = Step.objects.filter(run=run), ToolCall.objects.filter(run=run)
    if before_step is not None:
        steps, calls = steps.filter(index__lt=before_step), calls.filter(step__index__lt=before_step)
    results: dict[int, list[_Answered]] = {}
    rows = calls.order_by("step_id", "index").values_list(
        "step_id", "call_id", "result_text", "status", "latency_ms", "args_hash", "error")
    for step_id, *row in rows:
        results.setdefault(step_id, []).append(_answered(*row))
    for step_id, preamble, message in steps.order_by("index").values_list("pk", "preamble", "message"):
        messages.extend(_step_messages(preamble, message, results.get(step_id, ())))
    if before_step is not None:
        messages.extend(Step.objects.filter(run=run, index=before_step).values_list("preamble", flat=True).first() or [])
        return messages
    messages.extend(run.pending_messages)
    return messages


def step_messages(preamble: list[dict], message: dict, calls: list[ToolCall]) -> list[dict]:
    """What one recorded step adds to the conversation."""
    return _step_messages(preamble, message, [
        _answered(c.call_id, c.result_text, c.status, c.latency_ms, c.args_hash, c.error) for c in calls])


def _step_messages(preamble, message, results) -> list[dict]:
    # Results must directly follow their assistant message, one per call id, in call order.
    return [*preamble, _as_sent_again(message, results),
            *({"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results)]


def _as_sent_again(message: dict, results) -> dict:
    """The assistant message with each refused call's long arguments as a note of them
    (context.refused_arguments); the step's row keeps the message as the model sent it."""
    if not any(r.refused for r in results):
        return message
    tool_calls = list(message.get("tool_calls") or ())
    for index, (result, sent) in enumerate(zip(results, tool_calls)):  # a call's index is its place
        function = sent.get("function") or {}
        if result.refused and sent.get("id") == result.call_id:
            arguments_hash, error = result.refused
            kept = refused_arguments(function.get("arguments"), arguments_hash=arguments_hash, error=error)
            tool_calls[index] = {**sent, "function": {**function, "arguments": kept}}
    return {**message, "tool_calls": tool_calls}
