"""A run as an OpenTelemetry trace, built from its committed records (GenAI semantic conventions).

One trace per run, whatever process drives it: the trace id and the id of the run's span are
keyed hashes of the run's id, so a worker that takes the run over after a crash, or resumes it
after an approval, adds its spans to the same trace. Each model call ("chat {model}") and each
tool call ("execute_tool {tool}") is emitted when its record commits, with its times from the
record, as a child of the run's span ("invoke_agent {agent}"); a call that waited for a decision
spans the wait, the request and the decision its events. The run's span is emitted when the run
ends, with operators' levers as events: a long run shows its steps while it goes on, and a
backend shows them under their run once it ends.

What leaves: names, ids, counts, times, statuses and keyed hashes of arguments and results (the
key of the argument hashes shown everywhere else). Never the task, messages, answers, arguments,
results, operators' notes or error texts, which may hold what a tool marks sensitive.

Nothing here may break or slow a run. After the commit the driver's thread only copies the rows
it wrote (a dict copy each) and queues them; the spans of steps and calls are built from those
copies in the exporting thread, just before they are encoded (runs/observability/tracing/exporter.py), where building a
batch of them in one go costs half as much as one at a time between iterations. Only the run's
span, which reads its levers from the database, is built in the committing thread, once per run;
and a commit holding decided approvals reads their evidence there first (approval_events.py).
Any error is logged and the span dropped.
"""

import json
import logging
from datetime import datetime
from functools import lru_cache, partial
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from runs.models import Approval, Run, RunEvent, Step, ToolCall
from runs.observability.prometheus.counters import UNREGISTERED_TOOL
from runs.observability.tracing.approval_events import approval_attributes, approval_events, decision_facts
from runs.observability.tracing.values import (
    call_id_value,
    conversation_id,
    error_type,
    model_answering,
    model_failures,
    models_asked,
    result_hash,
    run_span_id,
    span_id,
    tool_failure,
    trace_id,
    unix_ns,
    url_host,
)

log = logging.getLogger("runs.services.trace_export")  # its name from before the move: operators filter on it

PROVIDER = "openai"  # the API every model endpoint of this project speaks
TOOL_ERRORS = {ToolCall.Status.FAILED: "tool_error", ToolCall.Status.UNKNOWN: "outcome_unknown"}
STOP_REASONS = dict(Run.StopReason.choices)
MESSAGE_CHARS = 300  # a failed span's status message: its error.type and why, in short



def _token_kinds(row) -> dict:
    """The GenAI conventions' attributes for the cached and reasoning parts of a step's or run's
    tokens, when the provider reported them (non-zero)."""
    found = {}
    if row.tokens_cached:
        found["gen_ai.usage.cache_read.input_tokens"] = row.tokens_cached
    if row.tokens_reasoning:
        found["gen_ai.usage.reasoning.output_tokens"] = row.tokens_reasoning
    return found


def _openinference(step: Step) -> dict:
    """A model call as OpenInference readers (Arize Phoenix) price and label it: the model that
    answered and its tokens under their names, beside the GenAI conventions' own."""
    found = {
        "llm.model_name": step.model,
        "llm.token_count.prompt": step.tokens_in,
        "llm.token_count.completion": step.tokens_out,
        "llm.token_count.total": step.tokens_in + step.tokens_out,
    }
    if step.tokens_cached:
        found["llm.token_count.prompt_details.cache_read"] = step.tokens_cached
    if step.tokens_reasoning:
        found["llm.token_count.completion_details.reasoning"] = step.tokens_reasoning
    return found


def export_after_commit(run: Run, records: list, fields: dict) -> None:
    """The recorder's hook, inside its transaction: the spans of the steps and calls it wrote (and
    of the run, when this transaction ends it) go out once it commits. Nothing when tracing is off."""
    if not settings.TRACES_ENDPOINT or not (records or "stop_reason" in fields):
        return
    transaction.on_commit(partial(_export, run, records, "stop_reason" in fields), robust=True)


class RunView(NamedTuple):
    """What the spans of a run's steps and calls need of it, as of the commit."""

    pk: int
    models: tuple[str, ...]
    host: str | None
    key: str  # ARGS_HASH_KEY, of the ids and hashes
    # Its tools' names. A tool name is the model's text: one the run has no tool for (a model inventing
    # tools, or echoing the task into a name) leaves as UNREGISTERED_TOOL, as /metrics counts it.
    tools: frozenset[str]


def run_view(run: Run) -> RunView:
    """Made once per run object: its driver commits every iteration with the same one."""
    view = run.__dict__.get("_trace_view")
    if view is None or view.pk != run.pk:
        view = RunView(
            run.pk,
            tuple(models_asked(run)),
            url_host(run.config.get("base_url") or settings.LLM_BASE_URL or ""),
            settings.ARGS_HASH_KEY,
            frozenset(run.config.get("tools") or ()),
        )
        run.__dict__["_trace_view"] = view
    return view


def _export(run: Run, records: list, ended: bool) -> None:
    try:
        tracing = _tracing()
        view = run_view(run)
        exported, calls = set(), []
        for record in records:
            if id(record) in exported:
                continue
            exported.add(id(record))
            if isinstance(record, Step):
                steps_calls = [_frozen(c) for c in records if isinstance(c, ToolCall) and c.step_id == record.pk]
                tracing.emit_later(chat_span, view, _frozen(record), steps_calls)
            elif record.status in ToolCall.DONE_STATUSES:
                # The decision it waited for, if any (loaded with the call wherever a call meets its
                # approval: no query).
                approval = record._state.fields_cache.get("approval")
                calls.append((_frozen(record), approval and _frozen(approval)))
        decision_facts([approval for _call, approval in calls if approval is not None])  # one query, if any decided
        for call, approval in calls:
            tracing.emit_later(tool_span, view, call, approval)
        if ended:
            for span in run_spans(run, view):
                tracing.emit(span)
    except Exception:  # tracing is never a reason for a run to fail
        log.warning("could not export the spans of run %s", run.pk, exc_info=True)


def _frozen(record):
    """A copy of a row as committed: the driver goes on changing its own (a call's status and
    result), the exporting thread builds the span later from this one."""
    copy = object.__new__(type(record))
    copy.__dict__.update(record.__dict__)
    return copy


@lru_cache(maxsize=1024)  # the same for every step (and every call) of a run
def _common(run: RunView, operation: str) -> dict:
    """What every span says; the model's provider and server, and the run's id as the conversation,
    only where a model is asked (a tool's span is in the run's trace, as the conventions have it).
    Each attribute costs a few microseconds to build and to encode, a few hundred times per run.
    Shared: callers copy it into their own dict."""
    if operation == "execute_tool":
        return {"gen_ai.operation.name": operation}
    attributes = {
        "gen_ai.operation.name": operation,
        "gen_ai.conversation.id": conversation_id(run.pk, run.key),
        "gen_ai.provider.name": PROVIDER,
    }
    if run.host:
        attributes["server.address"] = run.host
    return attributes


def _tracing():
    """runs/observability/tracing/exporter.py, imported when the first span is due: the SDK is loaded only then."""
    global _tracing_module
    if _tracing_module is None:
        from runs.observability.tracing import exporter as tracing

        _tracing_module = tracing
    return _tracing_module


_tracing_module = None


def _event(name: str, time_ns: int, attributes: dict) -> tuple[str, int, dict]:
    return (name, time_ns, attributes)


def _span(run: RunView, name: str, own_id: int, *, kind: str = "INTERNAL", **span) -> dict:
    """A span's fields, as runs/observability/tracing/otlp_encoder.py takes them."""
    return dict(name=name, trace_id=trace_id(run.pk, run.key), span_id=own_id, kind=kind, **span)


# --- the spans ------------------------------------------------------------------------------------------


def chat_span(run: RunView, step: Step, calls: list[ToolCall] = ()) -> dict:
    """One model call: the model of the run's list that was asked for this answer (after a
    fallback, not the first), the name the answer gave, tokens, the failures before it.

    `calls`: the step's calls written with it. Those that already have a latency ran before the
    step was inserted (calls that only read): the answer came before the first of them started."""

    models = run.models
    ran_first = [
        unix_ns(c.finished_at) - int(c.latency_ms * 1_000_000) for c in calls if c.latency_ms and c.finished_at
    ]
    end = min([unix_ns(step.created_at), *ran_first])
    start = end - int(step.latency_ms * 1_000_000)
    failures = model_failures(step.model_errors or [], models)
    asked = model_answering(step.model_errors or [], list(models)) or step.model
    attributes = {
        **_common(run, "chat"),
        "gen_ai.request.model": asked,
        "gen_ai.response.model": step.model,
        "gen_ai.usage.input_tokens": step.tokens_in,
        "gen_ai.usage.output_tokens": step.tokens_out,
        "gen_ai.response.finish_reasons": [step.finish_reason] if step.finish_reason else [],
        "agentsite.step.index": step.index,
        "agentsite.step.kind": step.kind,
    }
    if step.cost_usd:  # none where the model has no price
        attributes["agentsite.model.cost_usd"] = step.cost_usd
    attributes.update(_token_kinds(step))
    attributes.update(_openinference(step))
    if step.context_tokens:
        attributes["agentsite.request.estimated_tokens"] = step.context_tokens
        attributes["agentsite.request.tool_definition_tokens"] = step.tool_definition_tokens
    if step.compacted_calls:
        attributes["agentsite.request.compacted_results"] = len(step.compacted_calls)
    if failures:
        attributes["agentsite.model.failures"] = len(failures)
    if step.tool_choice_fallback:
        attributes["agentsite.tool_choice_fallback"] = True
    events = [
        _event("agentsite.model.failed", start, {"gen_ai.request.model": model, "error.type": kind})
        for model, kind in failures
    ]
    return _span(
        run,
        f"chat {asked}",
        span_id(run.pk, "step", step.index, key=run.key),
        parent_id=run_span_id(run.pk, run.key),
        kind="CLIENT",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        events=events,
    )


def tool_span(run: RunView, call: ToolCall, approval: Approval | None = None) -> dict:
    """One tool call that has its result: status, latency, keyed hashes of arguments and result,
    and the decision it waited for, if any: the span then starts when the approval was asked, its
    wait and decision as events."""
    end = unix_ns(call.finished_at or timezone.now())
    if call.latency_ms is not None:
        start = end - int(call.latency_ms * 1_000_000)
    else:  # never ran (refused, rejected, not executed): a moment
        start = end
    tool = call.tool_name if call.tool_name in run.tools else UNREGISTERED_TOOL
    attributes = {
        **_common(run, "execute_tool"),
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id_value(call.call_id, run.key),
        "gen_ai.tool.type": "function",
        "agentsite.tool.status": call.status,
        "agentsite.tool.args_hash": call.args_hash,
    }
    if call.attempts > 1:
        attributes["agentsite.tool.attempts"] = call.attempts
    if call.truncated:
        attributes["agentsite.tool.truncated"] = True
    if call.executed_args_hash:
        attributes["agentsite.tool.executed_args_hash"] = call.executed_args_hash
    if call.result is not None:
        attributes["agentsite.tool.result_hash"] = result_hash(call.result, run.key)
    if call.latency_ms is not None:
        attributes["agentsite.tool.latency_ms"] = call.latency_ms
    events = []
    if approval is not None:
        attributes.update(approval_attributes(approval))
        start = min(start, unix_ns(approval.requested_at))
        events = approval_events(approval, _event)
    return _span(
        run,
        f"execute_tool {tool}",
        span_id(run.pk, "call", call.pk, key=run.key),
        parent_id=run_span_id(run.pk, run.key),
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        events=events,
        error_type=TOOL_ERRORS.get(call.status),
        error_message=_tool_error_message(call),
    )


def _tool_error_message(call: ToolCall) -> str | None:
    """A failed call's status message: its error.type and why, in our words (its error's own text
    stays here)."""
    kind = TOOL_ERRORS.get(call.status)
    return f"{kind}: {tool_failure(call.error)}" if kind else None


def run_spans(run: Run, view: RunView) -> list[dict]:
    """The run, from launch to end, with operators' levers as events (one query, once per run). A
    run ended by every model failing gets a failed chat span too."""
    end = unix_ns(run.finished_at or timezone.now())
    start = min(unix_ns(run.created_at), end)
    models = view.models
    attributes = {
        **_common(view, "invoke_agent"),
        "gen_ai.agent.name": run.config.get("agent_name") or f"agent {run.agent_id}",
        "gen_ai.agent.id": str(run.agent_id),
        "gen_ai.request.model": models[0],
        "gen_ai.usage.input_tokens": run.tokens_in,
        "gen_ai.usage.output_tokens": run.tokens_out,
        "agentsite.run.status": run.status,
        "agentsite.run.stop_reason": run.stop_reason,
        "agentsite.run.iterations": run.iterations,
        "agentsite.run.cost_usd": run.cost_usd,
        "agentsite.run.active_seconds": run.active_seconds,
        **_token_kinds(run),
        **({"agentsite.run.compactions": run.compactions} if run.compactions else {}),
        "agentsite.run.takeovers": run.takeovers,
    }
    events = [_event("agentsite.run.started", unix_ns(run.started_at), {})] if run.started_at else []
    events += _lever_events(run)
    events.sort(key=lambda event: event[1])  # by time
    links = [
        (trace_id(other, view.key), run_span_id(other, view.key))
        for other in (run.forked_from_id, run.rerun_of_id)
        if other
    ]
    failed = run.status == Run.Status.FAILED
    spans = [
        _span(
            view,
            f"invoke_agent {attributes['gen_ai.agent.name']}",
            run_span_id(run.pk, view.key),
            parent_id=None,
            start_ns=start,
            end_ns=end,
            attributes=attributes,
            events=events,
            links=links,
            error_type=run.stop_reason if failed else None,
            error_message=_run_error_message(run) if failed else None,
        )
    ]
    if run.stop_reason == Run.StopReason.MODEL_ERROR:
        spans.append(_failed_chat_span(run, view, end))
    return spans


def _run_error_message(run: Run) -> str:
    """A failed run's status message: its stop reason and the reason's label (never the detail,
    which may quote a model's or a tool's error)."""
    label = STOP_REASONS.get(run.stop_reason)
    return f"{run.stop_reason}: {label}" if label else run.stop_reason or "failed"


def _failed_chat_span(run: Run, view: RunView, end: int) -> dict:
    """The model request that no model answered: from the last committed step (or the start) to
    the run's end, each model's failure an event."""
    models = view.models
    last = Step.objects.filter(run_id=run.pk).order_by("-index").values_list("created_at", flat=True).first()
    start = min(unix_ns(last or run.started_at or run.created_at), end)
    failures = [
        (m, error_type(run.stop_detail[run.stop_detail.index(f"{m}: ") + len(m) + 2 :]))
        for m in models
        if f"{m}: " in run.stop_detail
    ]
    events = [
        _event("agentsite.model.failed", end, {"gen_ai.request.model": m, "error.type": kind}) for m, kind in failures
    ]
    attributes = {**_common(view, "chat"), "gen_ai.request.model": models[0], "agentsite.model.failures": len(failures)}
    tried = ", ".join(f"{m}: {kind}" for m, kind in failures)
    return _span(
        view,
        f"chat {models[0]}",
        span_id(run.pk, "model_error", key=view.key),
        parent_id=run_span_id(run.pk, view.key),
        kind="CLIENT",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        events=events,
        error_type="model_error",
        error_message=f"model_error: no model answered ({tried or 'none asked'})"[:MESSAGE_CHARS],
    )


def _lever_events(run: Run) -> list:
    """Pause, resume, message, stop (and "paused", when the run reached its boundary), with the time
    each carries. A note's text leaves only as a keyed hash. A plain statement: once per run, and
    building the ORM's query cost more than the rest of the run's span."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT data FROM {RunEvent._meta.db_table} WHERE run_id = %s AND kind = 'lever'", [run.pk])
        rows = [json.loads(data) if isinstance(data, str) else data for (data,) in cursor.fetchall()]
    events = []
    for data in rows:
        if not isinstance(data, dict) or not data.get("at"):
            continue
        lever = str(data.get("lever", ""))
        attributes = {"agentsite.lever": lever}
        if data.get("text") is not None:
            attributes["agentsite.lever.text_hash"] = result_hash(data["text"], settings.ARGS_HASH_KEY)
        events.append(_event(f"agentsite.lever.{lever}", unix_ns(datetime.fromisoformat(data["at"])), attributes))
    return events
