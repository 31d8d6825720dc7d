"""Replay one step's request: the conversation as that step's request carried it, sent again to up
to five models at once, answers only (no tool is run, nothing is recorded in the run). For
comparing models on a real request before changing an agent.

The request is rebuilt from the run's rows (the loop records no request bodies): the same
messages, tools and settings, unless the run's tools changed since. In a run that summarised
results to fit its context budget, the summaries are made again for this one request, so they may
differ from those the step sent (the loop's keep from request to request).

A replay adds nothing to the run, but it is spending: it is refused in words when a cost or
tokens budget covering the run is reached (before any model is asked), one person may have
REPLAYS_AT_ONCE replays in flight (a slot in the shared cache, given back however the replay
ends), and each is recorded (StepReplay: who, which models, tokens, cost) with an audit entry.
The budgets count the recorded figures from then on.
"""
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from audit.models import AuditEntry
from audit.record import entry_write
from runs.controls.budgets import replay_reached
from runs.engine.context import window as context
from runs.engine.context.conversation import build_messages
from runs.engine.llm import clients as llm_clients
from runs.engine.llm import completions as llm
from runs.engine.tools.run_tools import RunTools
from runs.lifecycle.archive import masked_arguments
from runs.models import Run, Step, StepReplay
from toolsapp.sensitive import sensitive_values_in_messages

MAX_MODELS = 5
REPLAY_TIMEOUT_SECONDS = 60.0  # each model's answer (a person waits for the page)


class ReplayRefused(ValueError):
    pass


class ReplayOverBudget(ReplayRefused):
    """A budget covering the run is reached: no model was asked."""


class ReplayBusy(ReplayRefused):
    """The person already has REPLAYS_AT_ONCE replays in flight."""


@dataclass
class ReplayDone:
    record: StepReplay
    answers: list["ReplayAnswer"]


@dataclass
class ReplayAnswer:
    model: str
    ok: bool
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments"}: asked for, never run
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    error: str = ""


def step_request(*, run: Run, index: int) -> tuple[list[dict], RunTools, str]:
    """(messages, the run's tools, tool choice) of step `index`'s request, fitted to the run's budget."""
    step = Step.objects.filter(run=run, index=index, kind=Step.Kind.TURN).values("tool_choice").first()
    if step is None:
        raise ReplayRefused(f"run {run.pk} has no step {index} that asked its model with tools")
    config = run.config
    toolbox = RunTools(config.get("tools", []), read_back=config.get("read_back", False))
    history = build_messages(run, before_step=index)
    window = context.Window(config.get("context_budget", 0), read_back=config.get("read_back", False))
    try:
        try:
            fitted = window.fit(history, [], context.definitions_tokens(toolbox.definitions))
        except context.ContextFull:
            fitted = window.fit(history, [], context.definitions_tokens(toolbox.definitions), context.HARDER)
    except context.ContextFull as exc:
        raise ReplayRefused(f"step {index}'s request no longer fits the run's context budget: {exc}") from None
    if fitted.compacted:
        toolbox.offer_read_back()
    # The choice the step's request was sent with ("auto" when a server refused "required").
    return fitted.messages, toolbox, step["tool_choice"] or "auto"


def models_chosen(text: str) -> list[str]:
    """The model names typed (comma or line separated), in order, without repeats."""
    return models_checked([name for part in text.splitlines() for name in part.split(",")])


def models_checked(names: list[str]) -> list[str]:
    """The model names given (the page's text split, or the API's list), in order, without repeats."""
    chosen = list(dict.fromkeys(name.strip() for name in names if name.strip()))
    if not chosen:
        raise ReplayRefused("name at least one model")
    if len(chosen) > MAX_MODELS:
        raise ReplayRefused(f"at most {MAX_MODELS} models at once")
    if any(len(name) > 200 for name in chosen):
        raise ReplayRefused("a model name is longer than 200 characters")
    return chosen


def slot_seconds() -> float:
    """How long a replay can last at most (its models are asked at once, each with the client's
    retries): a slot whose process died is free again after this."""
    return REPLAY_TIMEOUT_SECONDS * (settings.LLM_MAX_RETRIES + 1) + 60


@contextmanager
def replay_slot(user) -> Iterator[None]:
    """One of the person's REPLAYS_AT_ONCE slots, held while the block runs, in the cache every
    web process shares (an atomic add takes a slot, so two requests cannot take the same one)."""
    token = uuid.uuid4().hex
    at_once = max(1, settings.REPLAYS_AT_ONCE)
    for number in range(at_once):
        key = f"step-replay-slot:{user.pk}:{number}"
        if cache.add(key, token, timeout=slot_seconds()):
            break
    else:
        raise ReplayBusy(f"You already have {at_once} replay{'s' if at_once > 1 else ''} in flight, the most one "
                         "person may run at once: wait for one to finish, then replay again.")
    try:
        yield
    finally:
        if cache.get(key) == token:  # not a slot that expired and was taken by another replay since
            cache.delete(key)


def step_replay(*, run: Run, index: int, models: list[str], user) -> ReplayDone:
    """Each model's answer to step `index`'s request, in the order of `models`, as spending: refused
    when a budget covering the run is reached or the person has too many replays in flight;
    recorded with what it spent, which the budgets count from then on."""
    found = replay_reached(run)
    if found is not None:
        raise ReplayOverBudget(f"{found.sentence}. A replay spends from it too, so no model was asked; "
                               "an administrator can raise the budget on the budgets page.")
    with replay_slot(user):
        request = step_request(run=run, index=index)
        # Recorded before any model is asked: who replayed what is kept even if this process dies.
        record = StepReplay.objects.create(run=run, step_index=index, user=user, user_name=user.get_username(),
                                           models_asked=models)
        answers = _answers(run, request, models)
        replay_record(record, answers)
    return ReplayDone(record, answers)


def replay_record(record: StepReplay, answers: list[ReplayAnswer]) -> None:
    """The replay's figures, and the audit log's entry, in one transaction."""
    record.tokens_in = sum(a.tokens_in for a in answers)
    record.tokens_out = sum(a.tokens_out for a in answers)
    record.cost_usd = sum(a.cost_usd for a in answers)
    record.finished_at = timezone.now()
    with transaction.atomic():
        record.save(update_fields=["tokens_in", "tokens_out", "cost_usd", "finished_at"])
        entry_write(
            action=AuditEntry.Action.CREATED, kind="step replay", object_id=record.pk,
            object_repr=f"Run {record.run_id}, step {record.step_index}",
            after={"run": record.run_id, "step": record.step_index, "models": record.models_asked,
                   "answered": [a.model for a in answers if a.ok], "tokens_in": record.tokens_in,
                   "tokens_out": record.tokens_out, "cost_usd": record.cost_usd},
            detail=f"Replayed step {record.step_index} of run {record.run_id} against {', '.join(record.models_asked)}: "
                   f"{record.tokens:,} tokens, ${record.cost_usd:.6f}",
        )


def _answers(run: Run, request: tuple[list[dict], RunTools, str], models: list[str]) -> list[ReplayAnswer]:
    messages, toolbox, tool_choice = request
    config = run.config
    # Arguments a model writes for a tool's sensitive fields are masked, as on the run page.
    sensitive = {name: list(tool.sensitive_fields) for name, tool in toolbox.tools.items() if tool.sensitive_fields}
    endpoint_settings = llm_clients.endpoint_settings(config)

    def ask(model: str) -> ReplayAnswer:
        started = time.perf_counter()
        try:
            endpoint = llm_clients.resolve_endpoint(**{**endpoint_settings, "models": [model]})
            reply = llm.complete(
                endpoint=endpoint, messages=messages, tools=toolbox.definitions, tool_choice=tool_choice,
                parallel_tool_calls=config.get("parallel_tool_calls", True),
                provider_options=config.get("provider_options") or {},
                max_output_tokens=config.get("max_output_tokens") or settings.LLM_MAX_OUTPUT_TOKENS,
                timeout=REPLAY_TIMEOUT_SECONDS,
                # A provider's error may echo the request: sensitive arguments never reach the page.
                redacted=lambda: sensitive_values_in_messages(messages, toolbox.tools),
            )
        except llm.ModelError as exc:
            return ReplayAnswer(model, False, error=str(exc)[:1000],
                                latency_ms=(time.perf_counter() - started) * 1000)
        return ReplayAnswer(
            model, True, content=reply.content,
            tool_calls=[{"name": c["function"]["name"], "arguments": masked_arguments(
                c["function"]["arguments"], sensitive.get(c["function"]["name"], ()))} for c in reply.tool_calls],
            tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost_usd=reply.cost_usd, latency_ms=reply.latency_ms,
        )

    with ThreadPoolExecutor(max_workers=len(models), thread_name_prefix="replay") as pool:
        return list(pool.map(ask, models))


REPLAYS_SHOWN = 20


def replays_of_run(run_id: int) -> list[StepReplay]:
    """The run's latest replays, newest first, for its page."""
    return list(StepReplay.objects.filter(run_id=run_id)[:REPLAYS_SHOWN])
