"""What the loop does with a model's answer, decided over plain data.

`decide_answer` is the heart of the loop's contract: given the answer, the run's counters and
config, the calls seen so far and what the loop knows of each tool, it says whether the run
stops (and why), and for each call whether it runs now, waits for a person, or is refused with
an error the model reads. `stop_before_request` is the same kind of decision taken before a
model request. Neither touches the database or the network.
"""
from dataclasses import dataclass, field

from runs.engine import guards
from runs.models import Run, ToolCall

StopReason = Run.StopReason

# Limits after which the opt-in summary call is made.
SUMMARY_REASONS = (StopReason.ITERATION_LIMIT, StopReason.REPEATED_CALL, StopReason.TIME_BUDGET)
# ... and after which it is made whatever the agent's setting: the operator asked for it.
FORCED_SUMMARY_REASONS = (StopReason.OPERATOR_STOP,)


@dataclass(frozen=True)
class ToolFacts:
    """What the loop's decisions need to know of a tool, read from its row before each call."""

    name: str
    destructive: bool = False
    idempotent: bool = True
    parallel_safe: bool = True
    read_only: bool = False  # a registered read-only handler nobody marked otherwise
    repeat_limit: int | None = None
    simulated: bool = False  # an experiment's run: its calls are answered without running (engine/simulation.py)


@dataclass(frozen=True)
class Counters:
    """Where the run stands before this answer is counted."""

    iterations: int  # completed iterations
    tokens: int
    cost: float
    elapsed: float


@dataclass(frozen=True)
class Answer:
    finish_reason: str
    refusal: str | None
    tokens: int
    cost: float
    calls: list[guards.PlannedCall] = field(default_factory=list)
    # Per call (same order): the error that refuses it before it runs (unknown tool, bad JSON,
    # schema), or None when its arguments are valid.
    call_errors: list[str | None] = field(default_factory=list)


@dataclass(frozen=True)
class Refusal:
    status: str  # ToolCall.Status: SKIPPED (not run because the run stops) or FAILED (bad call)
    error: str


@dataclass(frozen=True)
class Decision:
    stop: str | None = None  # a StopReason
    detail: str = ""
    verify: bool = False  # a final answer that the agent's verifier must check first
    run: tuple[int, ...] = ()  # call indexes that run now, in order
    ask: tuple[int, ...] = ()  # call indexes that wait for a person (destructive tools)
    simulate: tuple[int, ...] = ()  # call indexes an experiment answers without running them
    refused: dict[int, Refusal] = field(default_factory=dict)
    reads_first: bool = False  # every runnable call only reads: run them before recording the step
    parallel: bool = False  # the runnable calls may run at the same time


def stop_before_request(
    *, config: dict, counters: Counters, cancel_requested: bool, stop_requested: bool = False
) -> str | None:
    """The reason the run must stop before asking the model again, or None. An operator's stop
    with a summary comes after a cancel (which asks for nothing more) and before the limits."""
    if cancel_requested:
        return StopReason.CANCELLED
    if stop_requested:
        return StopReason.OPERATOR_STOP
    budget = _budget_used_up(config, counters)
    if budget:
        return budget
    if counters.iterations >= config["max_iterations"]:
        return StopReason.ITERATION_LIMIT
    return None


def _budget_used_up(config: dict, counters: Counters) -> str | None:
    return guards.budget_exceeded(config=config, tokens=counters.tokens, cost=counters.cost, elapsed=counters.elapsed)


def decide_answer(
    *,
    answer: Answer,
    config: dict,
    counters: Counters,
    seen: dict[tuple[str, str], int],
    tools: dict[str, ToolFacts],
) -> Decision:
    """What happens to one model answer (the answer of iteration counters.iterations + 1)."""
    if answer.finish_reason == "length":
        return _stop_all(answer, StopReason.MAX_TOKENS, "", "the answer was cut off")
    if answer.finish_reason == "content_filter" or answer.refusal:
        return _stop_all(answer, StopReason.CONTENT_FILTER, answer.refusal or "", "the answer was filtered")
    if not answer.calls:
        if config.get("verifier"):
            return Decision(verify=True)
        return Decision(stop=StopReason.FINAL_ANSWER)
    # The cap is checked before any tool runs: the last allowed iteration runs none.
    if counters.iterations + 1 >= config["max_iterations"]:
        return _stop_all(answer, StopReason.ITERATION_LIMIT, "", "the iteration limit was reached")
    after = Counters(counters.iterations, counters.tokens + answer.tokens, counters.cost + answer.cost, counters.elapsed)
    budget = _budget_used_up(config, after)
    if budget:
        return _stop_all(answer, budget, "", "the run's budget was used up")
    limits = {"*": config["repeat_limit"], **{t.name: t.repeat_limit for t in tools.values() if t.repeat_limit}}
    repeated = guards.repeated_call(answer.calls, seen, limits)
    if repeated:
        detail = f"{repeated.tool_name} with arguments hash {repeated.args_hash[:12]}"
        return _stop_all(answer, StopReason.REPEATED_CALL, detail, "the same call was repeated too often")
    refused = {
        call.index: Refusal(ToolCall.Status.FAILED, error)  # errors are data: the model may correct itself
        for call, error in zip(answer.calls, answer.call_errors)
        if error
    }
    valid = [call for call in answer.calls if call.index not in refused]
    # In an experiment nothing that would change something runs, so nothing waits for a person either.
    simulate = tuple(c.index for c in valid if tools[c.tool_name].simulated)
    valid = [c for c in valid if c.index not in simulate]
    ask = tuple(c.index for c in valid if tools[c.tool_name].destructive)
    run = tuple(c.index for c in valid if not tools[c.tool_name].destructive)
    parallel = may_run_together([c.tool_name for c in answer.calls], tools)
    runnable = [c for c in valid if c.index in run]
    reads_first = bool(runnable) and not ask and all(tools[c.tool_name].read_only for c in runnable)
    reads_first = reads_first and (len(runnable) == 1 or parallel)
    return Decision(run=run, ask=ask, simulate=simulate, refused=refused, reads_first=reads_first,
                    parallel=parallel and len(run) > 1)


def may_run_together(names: list[str], tools: dict[str, ToolFacts]) -> bool:
    """Calls of one answer run at the same time only when every tool it names is parallel-safe."""
    return all(n in tools and tools[n].parallel_safe for n in names)


def _stop_all(answer: Answer, reason: str, detail: str, why_not_run: str) -> Decision:
    """The run stops on this answer: none of its calls runs, and each says why."""
    refused = {c.index: Refusal(ToolCall.Status.SKIPPED, f"not executed: {why_not_run}") for c in answer.calls}
    return Decision(stop=reason, detail=detail, refused=refused)


def ending_status(reason: str) -> str:
    """The run status a stop reason ends in."""
    if reason == StopReason.FINAL_ANSWER:
        return Run.Status.SUCCEEDED
    if reason in (StopReason.CANCELLED, StopReason.OPERATOR_STOP):
        return Run.Status.CANCELLED
    return Run.Status.FAILED
