"""The last, tools-free model call of a run that stopped: a summary the user reads instead of a
bare limit (opt-in per agent) or an operator's stop (always: they asked for it); and the log line
of each iteration. Both are the driver's, kept here so the loop reads like its contract."""
import json
import logging

from runs.engine import decisions, hooks, throttle
from runs.engine.context import window as context
from runs.engine.context.conversation import build_messages
from runs.engine.llm import clients as llm_clients
from runs.engine.llm import completions as llm
from runs.models import Step

log = logging.getLogger("runs.loop")

SUMMARY_PROMPT = (
    "The run has stopped: {detail} Do not call any tools. In a few sentences, tell the user what "
    "was done, what was found, and what is left undone."
)


def summary_wanted(reason: str, config: dict) -> bool:
    if reason in decisions.FORCED_SUMMARY_REASONS:
        return True
    return reason in decisions.SUMMARY_REASONS and bool(config.get("summarize_on_stop"))


def summary_record(*, recorder, config: dict, endpoint, tools: list, index: int) -> bool:
    """Ask for the summary of the ended run `recorder.run` and record it as its answer (step
    `index`); `endpoint` None: the config's. False when the model failed: the run keeps its
    ending without one."""
    run = recorder.run
    instruction = {"role": "user", "content": SUMMARY_PROMPT.format(detail=run.stop_detail)}
    try:
        endpoint = endpoint or llm_clients.resolve_endpoint(**llm_clients.endpoint_settings(config))
        # Within the run's context budget, as every request of the run (a run that ended for its
        # length is summarised from a conversation summarised harder).
        window = context.Window(config.get("context_budget", 0))
        history, cost = build_messages(run), context.definitions_tokens(tools)
        try:
            messages = window.fit(history, [instruction], cost).messages
        except context.ContextFull:
            messages = window.fit(history, [instruction], cost, context.HARDER).messages
        with throttle.waiting():
            reply = llm.complete(
                endpoint=endpoint,
                messages=messages,
                tools=tools,
                tool_choice="none",
                parallel_tool_calls=config["parallel_tool_calls"],
                provider_options=config["provider_options"],
            )
    except (llm.ModelError, context.ContextFull) as exc:
        log.warning("summary for run %s failed: %s", run.pk, exc)
        with recorder.transaction():
            recorder.run_update(summary_pending=False)  # it ended without one
        return False
    with recorder.transaction():
        # A summary must not leave unanswered calls in the history.
        step, _ = recorder.step_create(index=index, iteration=run.iterations, reply=reply, preamble=[instruction],
                                       kind=Step.Kind.SUMMARY, tool_choice="none",
                                       message={"role": "assistant", "content": reply.content})
        recorder.run_update(answer=reply.content, summary_pending=False, tokens_in=run.tokens_in + reply.tokens_in,
                            tokens_out=run.tokens_out + reply.tokens_out, cost_usd=run.cost_usd + reply.cost_usd,
                            tokens_cached=run.tokens_cached + reply.tokens_cached,
                            tokens_reasoning=run.tokens_reasoning + reply.tokens_reasoning)
        hooks.summary_added(run=run, step=step, tokens=reply.tokens_in + reply.tokens_out, cost_usd=reply.cost_usd)
    return True


def iteration_log(run, step: Step | None, planned, stop: str | None) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    log.info(json.dumps({
        "event": "iteration",
        "run": run.pk,
        "iteration": step.iteration if step else run.iterations,
        "model": step.model if step else None,
        "latency_ms": round(step.latency_ms, 1) if step else None,
        "tools": [p.tool_name for p in planned],
        "args_hashes": [p.args_hash[:16] for p in planned],
        "stop_reason": stop,
    }))
