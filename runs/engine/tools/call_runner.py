"""Running the calls the loop allowed, and recording each step of that: a call that is not safe
to repeat is marked started before it runs, each result is committed as it arrives (a timeout of
such a call as "outcome unknown"), and a cancel between sequential calls leaves the rest "not
executed", each with its event."""
import json

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.engine import guards, throttle
from runs.engine.leases import keeper
from runs.engine.storage.db import release_db_connection
from runs.engine.tools.edit_note import operator_edit
from runs.engine.tools.execution import call_status, execute_calls
from runs.models import Run, ToolCall
from toolsapp.executors.base import ToolContext


def ran_with(call: ToolCall) -> str:
    """The arguments a call runs with: an operator's edit when it has one, else the model's."""
    return call.executed_arguments or call.arguments


class CallRunner:
    """Runs one run's calls for the driver holding its lease; writes through its recorder."""

    def __init__(self, run: Run, owner: str, tools: dict, record):
        self.run, self.owner, self.tools, self.record = run, owner, tools, record
        # Calls handed to a tool whose result is not recorded yet: if the driver fails now (the
        # database went away while recording), they may have taken effect, whatever their flags.
        self.in_flight: set[int] = set()

    def reads_first(self, planned, arguments, decision, step_index: int, *,
                    cancel_read: bool = False) -> dict[int, tuple[dict, float]]:
        """Results of calls that only read, run before their step is recorded: {index: (payload, ms)}.

        Running them first lets the step, its calls and their results go to the database in one
        commit instead of two (a crash meanwhile loses only the model's answer, as a crash during
        the request would). A cancel that arrived while the model answered takes the usual path.
        `cancel_read`: the run's cancel flag was read since the answer came (with its tools' flags).
        """
        if self.run.cancel_requested if cancel_read else self.cancel_requested():
            return {}
        runnable = [p for p in planned if p.index in decision.run]
        key = guards.idempotency_key
        jobs = [self.job(p.tool_name, arguments[p.index], p.call_id, key(self.run.pk, step_index, p.index))
                for p in runnable]
        keeper.expect_wait(self.owner, self.lease_for(runnable))
        with throttle.waiting():
            return {
                runnable[position].index: (payload, latency_ms)
                for position, payload, latency_ms in execute_calls(jobs, parallel=decision.parallel)
            }

    def execute(self, calls: list[ToolCall], *, parallel: bool) -> bool:
        """Run calls and record each result as it comes; False when a cancel stopped them."""
        jobs = [self.job(c.tool_name, json.loads(ran_with(c) or "{}"), c.call_id, c.idempotency_key) for c in calls]

        def mark_started(batch):
            # Only a call that is not safe to repeat needs "started" on disk before it runs: after a
            # crash such a call goes to an operator; an idempotent one simply runs again.
            risky = [c for c in batch if not self.tools[c.tool_name].idempotent]
            if risky:
                def started():
                    for call in risky:
                        self.record.call_update(call, ToolCall.Status.STARTED, started_at=timezone.now(), attempts=call.attempts + 1)

                self.record.commit(started, keep=risky)

        def before_each(position):
            if position > 0:
                self.cancel_requested()
            if self.run.cancel_requested:
                return False
            mark_started([calls[position]])
            self.in_flight.add(calls[position].pk)
            release_db_connection()  # the tool's thread may need one while we wait for it
            return True

        if parallel:
            mark_started(calls)
            self.in_flight.update(c.pk for c in calls)
        keeper.expect_wait(self.owner, self.lease_for(calls))
        finished = 0
        results = execute_calls(jobs, parallel=parallel, on_start=before_each)
        while True:
            # Waiting also hands our connection back: tool threads take connections from the
            # same pool, and holding ours could leave every one waiting on a tool that needs one.
            with throttle.waiting():
                item = next(results, None)
            if item is None:
                break
            position, payload, latency_ms = item
            if calls[position].executed_arguments:
                payload = self.with_edit_note(calls[position], payload)
            call = calls[position]
            self.record.commit(lambda: self.record.call_update(call, call_status(payload), payload=payload, latency_ms=latency_ms),
                               keep=[call])
            self.in_flight.discard(calls[position].pk)
            finished += 1
        if finished < len(calls):
            def skipped():
                for call in calls[finished:]:
                    self.record.call_update(
                        call, ToolCall.Status.SKIPPED, payload={"ok": False, "error": "not executed: the run was cancelled"}
                    )

            self.record.commit(skipped, keep=calls[finished:])
            self.in_flight.difference_update(call.pk for call in calls[finished:])
            return False
        return True

    def with_edit_note(self, call: ToolCall, payload: dict) -> dict:
        """The result of a call an operator edited says so, and what changed: the model sees its
        own call in the conversation, and must not take this result for that call's."""
        tool = self.tools.get(call.tool_name)
        edit = operator_edit(
            json.loads(call.arguments or "{}"), json.loads(call.executed_arguments),
            sensitive_fields=tool.sensitive_fields if tool is not None else (),
        )
        return {**payload, "operator_edit": edit}

    def job(self, tool_name: str, arguments: dict, call_id: str, idempotency_key: str):
        """What execute_calls takes for one call."""
        context = ToolContext(run_id=self.run.pk, call_id=call_id, idempotency_key=idempotency_key, customer=self.run.customer)
        return self.tools[tool_name], arguments, context

    def lease_for(self, calls) -> float:
        # Long enough for the calls about to run to reach their timeouts.
        return settings.RUN_LEASE_SECONDS + sum(
            self.tools[c.tool_name].timeout_seconds for c in calls if c.tool_name in self.tools
        )

    def cancel_requested(self) -> bool:
        """Read the cancel flag again (an operator may have set it since the last commit).

        A plain statement: this runs before tool calls, and the ORM's query building cost more
        than the query itself."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT cancel_requested FROM {Run._meta.db_table} WHERE id = %s", [self.run.pk])
            self.run.cancel_requested = bool(cursor.fetchone()[0])
        return self.run.cancel_requested
