"""The one place a driver writes: steps, every change of a call's state, and the run row.

Each change writes its row and queues its timeline event together; `Recorder.transaction`
commits the run's fields and the queued events in one fenced statement (the lease is the fence)
with the rows, so the timeline can always be rebuilt from events alone.
"""
import copy
from contextlib import contextmanager

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.engine import guards, hooks
from runs.engine.decisions import StopReason, ending_status
from runs.engine.leases import fenced_update
from runs.engine.storage.db import (
    FRESH_CONNECTION_ATTEMPTS,
    connection_lost,
    drop_connection,
    pause_before_retry,
    write_transaction,
)
from runs.engine.storage.events import events_store
from runs.engine.storage.inserts import insert
from runs.engine.storage.snapshots import call_data, run_summary, step_data
from runs.models import Run, Step, ToolCall

RESULT_FIELDS = ["status", "result", "result_text", "truncated", "error", "finished_at", "latency_ms"]
# What a column can hold: a model may send any length; the row keeps a bounded copy.
NAME_CHARS = 200
SHORT_CHARS = 32


def bounded(text, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def set_result(call: ToolCall, payload: dict, status: str) -> None:
    """Fill a call's result fields (in memory) from a tool's payload."""
    content, truncated = guards.tool_result_content(
        payload, max_chars=settings.TOOL_RESULT_MAX_CHARS, preview_chars=settings.TOOL_RESULT_PREVIEW_CHARS
    )
    call.status = status
    call.result = payload
    call.result_text = content
    call.truncated = truncated
    call.error = "" if payload.get("ok") else str(payload.get("error", ""))
    call.finished_at = timezone.now()


class Recorder:
    """Writes of one run by the driver holding its lease `owner`."""

    def __init__(self, run: Run, owner: str):
        self.run = run
        self.owner = owner
        self._events: list[tuple[str, object]] = []
        self._fields: dict = {}
        self._traced: list = []  # tracing
        self._committing = False  # the transaction's body is done: what fails now may have committed
        # False while the run can have no approval (a driver of a new run that has gated no call
        # yet): its ending need not look for pending ones.
        self.approvals_possible = True

    @property
    def fields(self) -> dict:
        """The run's fields changed so far in this transaction (written when it commits)."""
        return self._fields

    @contextmanager
    def transaction(self, lease_seconds: float | None = None):
        """Rows written inside, then the run's fields and the queued events, all in one commit."""
        with write_transaction():
            self._events, self._fields = [], {}
            self._traced = []  # the steps and calls written here, for hooks.records_committed
            yield self
            events, fields = self._events, self._fields
            self._events, self._fields = [], {}
            for name, value in fields.items():
                setattr(self.run, name, value)
            last = fenced_update(self.run, self.owner, events=len(events), lease_seconds=lease_seconds, **fields)
            events_store(
                run_id=self.run.pk,
                first_seq=last - len(events) + 1,
                # Data may be a callable, evaluated once the run's new fields are set.
                events=[(kind, data() if callable(data) else data) for kind, data in events],
            )
            hooks.records_committed(self.run, self._traced, fields)  # tracing: their spans, after the commit
            self._committing = True

    def commit(self, work, *, lease_seconds: float | None = None, keep=()):
        """`work()` inside `transaction`, done again on a new connection when the connection was
        lost before the commit was sent: everything it wrote was rolled back with it, and the
        lease fences the new try as it fenced the first. The run and the `keep` instances (calls
        `work` changes) are put back as they were before each try, so a try starts from the same
        point; `work` must build everything else it writes afresh. A connection lost during the
        commit itself is not retried (whether it committed is unknown): the driver starts again
        from the rows."""
        instances = (self.run, *keep)
        for attempt in range(FRESH_CONNECTION_ATTEMPTS):
            before = [_saved(instance) for instance in instances]
            self._committing = False
            try:
                with self.transaction(lease_seconds):
                    result = work()
                return result
            except Exception as exc:  # noqa: BLE001 - connection_lost decides; everything else is raised
                last = attempt + 1 == FRESH_CONNECTION_ATTEMPTS
                if self._committing or last or connection.in_atomic_block or not connection_lost(exc):
                    raise
                for instance, state in zip(instances, before):
                    instance.__dict__.clear()
                    instance.__dict__.update(state)
                drop_connection()
                pause_before_retry(attempt)

    def event(self, kind: str, data) -> None:
        self._events.append((kind, data))

    def run_update(self, **fields) -> None:
        """Change the run row; its "run" event carries the new state."""
        self._fields.update(fields)
        if not any(kind == "run" for kind, _ in self._events):
            self.event("run", lambda: run_summary(self.run))

    def counters_update(self, **fields) -> None:
        """Change the run's counters only (they travel with the step event, not a run event)."""
        self._fields.update(fields)

    # --- steps and calls -------------------------------------------------------------------------

    def step_create(self, *, index: int, iteration: int, reply, preamble: list, kind: str = Step.Kind.TURN,
                    calls: list[ToolCall] = (), message: dict | None = None,
                    tool_choice: str | None = None, request: dict | None = None) -> tuple[Step, list[ToolCall]]:
        """Insert a step with its calls (already carrying their first state) and queue its event.
        `request`: what the request carried (RequestFit.step_fields)."""
        step = Step(
            run=self.run,
            index=index,
            iteration=iteration,
            kind=kind,
            preamble=preamble,
            model=bounded(reply.model, NAME_CHARS),
            tool_choice=reply.tool_choice if tool_choice is None else tool_choice,
            tool_choice_fallback=reply.tool_choice_fallback,
            finish_reason=bounded(reply.finish_reason, SHORT_CHARS),
            message=reply.message if message is None else message,
            latency_ms=reply.latency_ms,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd,
            model_errors=reply.errors,
            reasoning=reply.reasoning,
            notes=reply.notes,
            tokens_cached=reply.tokens_cached,
            tokens_reasoning=reply.tokens_reasoning,
            **(request or {}),
        )
        insert([step])
        calls = list(calls)
        for call in calls:
            call.step = step
        insert(calls)
        self.event("step", step_data(step, calls))
        self._traced += [step, *calls]  # tracing
        return step, calls

    def call_update(self, call: ToolCall, status: str, *, payload: dict | None = None, **fields) -> None:
        """Change one call's state: its row and its event."""
        if payload is not None:
            set_result(call, payload, status)
        call.status = status
        for name, value in fields.items():
            setattr(call, name, value)
        update = RESULT_FIELDS if payload is not None else ["status"]
        call.save(update_fields=sorted({*update, *fields}))
        self.event("call", call_data(call))
        self._traced.append(call)  # tracing


def _saved(instance):
    """A model instance's attributes, its state (and cache of related rows) copied."""
    return {**instance.__dict__, "_state": copy.copy(instance._state)}


def run_close(
    recorder: Recorder, reason: str, *, detail: str = "", elapsed: float, answer: str | None = None,
    in_flight: frozenset[int] = frozenset(), summary_pending: bool = False,
) -> None:
    """End the run: its pending approvals are closed, every open call gets a result (one result per
    call id, always), and the run its status, stop reason and plain-words detail.

    An open call that had started (marked started, asked about again after a crash, or in
    `in_flight`: handed to its tool by this driver, result not recorded) may have taken effect:
    its outcome is unknown, never "not executed"."""
    run = recorder.run
    hooks.run_ending(recorder=recorder, reason=reason, detail=detail)  # its pending approvals close
    open_calls = ToolCall.objects.filter(run=run).exclude(status__in=ToolCall.DONE_STATUSES)
    for call in open_calls.select_related("approval"):
        if call.may_have_taken_effect or call.pk in in_flight:
            error = f"outcome unknown: the run ended ({reason}) after the call had started; it may have taken effect"
            recorder.call_update(call, ToolCall.Status.UNKNOWN, payload={"ok": False, "error": error})
            continue
        recorder.call_update(
            call, ToolCall.Status.SKIPPED, payload={"ok": False, "error": f"not executed: the run ended ({reason})"}
        )
    fields = {
        "status": ending_status(reason),
        "stop_reason": reason,
        "stop_detail": guards.stop_message(reason, run.config, detail),
        "finished_at": timezone.now(),
        "active_seconds": elapsed,
    }
    if answer is not None:
        fields["answer"] = answer
    if summary_pending:  # the summary is asked for next: the run reads as stopping until it is in
        fields["summary_pending"] = True
    recorder.run_update(**fields)
    hooks.run_ended(run=run, fields=recorder.fields)  # e.g. the run's search text, its mark for the rollups


def lever_data(lever: str, by: str, at, text: str | None = None) -> dict:
    """A "lever" timeline event: what an operator did to a run (or the driver did for them), who, when."""
    data = {"lever": lever, "by": by, "at": at.isoformat()}
    if text is not None:
        data["text"] = text
    return data


def run_start(recorder: Recorder) -> None:
    """The run is running (its commit also renews the lease and reads the operators' flags)."""
    run = recorder.run
    if run.status != Run.Status.RUNNING:
        recorder.run_update(status=Run.Status.RUNNING, started_at=run.started_at or timezone.now())


def paused_at_boundary(recorder: Recorder, *, elapsed: float, text: str | None = None) -> None:
    """Pause the run at a boundary: it holds no worker until resumed, and its clock stops here."""
    now = timezone.now()
    # The lease goes in the same write: nobody sees a paused run that still holds a worker, and a
    # resume sent at once finds the run free for the next driver.
    recorder.run_update(status=Run.Status.PAUSED, pause_requested=False, paused_at=now, active_seconds=elapsed,
                        lease_owner="")
    recorder.event("lever", lever_data("paused", recorder.run.paused_by_name, now, text))


def operator_stop_first(recorder: Recorder, reason: str, detail: str) -> tuple[str, str]:
    """(reason, detail) of an ending, called inside the transaction that ends the run: an
    operator's stop asked before it wins over the run's own end (a cancel, or a failure of the
    loop itself, keeps its reason). The run's row stays locked until this commits (PostgreSQL; on
    SQLite the write transaction shuts other writers out), so a stop asked after finds the run
    ended: a stop racing the run's end has exactly one outcome. One read, at the run's end only."""
    run = recorder.run
    if reason == StopReason.OPERATOR_STOP:
        return reason, detail or f"Stopped by {run.stop_requested_by_name or 'an operator'} with a summary."
    if reason in (StopReason.CANCELLED, StopReason.INTERNAL_ERROR, StopReason.WORKER_LOST):
        return reason, detail
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:  # a plain statement: the ORM's building cost more than it
        cursor.execute(f"SELECT stop_requested_by_name FROM {Run._meta.db_table} WHERE id = %s{lock}", [run.pk])
        (name,) = cursor.fetchone()
    if not name:
        return reason, detail
    run.stop_requested_by_name = name
    return StopReason.OPERATOR_STOP, f"Stopped by {name} with a summary."
