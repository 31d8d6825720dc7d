"""The message history of a run, rebuilt from its rows alone (so a crash loses nothing)."""
from runs.models import Run, Step, ToolCall


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
    results: dict[int, list[tuple[str, str]]] = {}
    for step_id, call_id, content in calls.order_by("step_id", "index").values_list("step_id", "call_id", "result_text"):
        results.setdefault(step_id, []).append((call_id, content))
    for step_id, preamble, message in steps.order_by("index").values_list("pk", "preamble", "message"):
        messages.extend(_step_messages(preamble, message, results.get(step_id, ())))
    if before_step is not None:
        messages.extend(Step.objects.filter(run=run, index=before_step).values_list("preamble", flat=True).first() or [])
        return messages
    messages.extend(run.pending_messages)
    return messages


def step_messages(preamble: list[dict], message: dict, calls: list[ToolCall]) -> list[dict]:
    """What one recorded step adds to the conversation."""
    return _step_messages(preamble, message, [(c.call_id, c.result_text) for c in calls])


def _step_messages(preamble, message, results) -> list[dict]:
    # Results must directly follow their assistant message, one per call id, in call order.
    return [*preamble, message, *({"role": "tool", "tool_call_id": i, "content": text} for i, text in results)]
