"""The agent loop: ask the model, decide, record, run what is allowed, repeat until a stop.

`run_advance` drives one run as far as it can go: to its end, or to a point where it waits for
a person. It holds a lease on the run while it works and commits each iteration (the step, its
calls and their results) before the next model request, so a crash loses at most the request in
flight, and any worker can pick the run up again from the database.

Who does what: `decisions` decides (pure), `records` writes, `approvals` owns the lifecycle of
destructive calls, `tools/execution` runs tools, `llm/` talks to models. This module only orders them.
"""
import enum
import json
import logging
import time
import uuid

from django.conf import settings
from django.db.models import Count, Q

from runs.engine import decisions, guards, hooks, throttle
from runs.engine.budget_checks import pause_on_budget, reached_before_request, start_or_wait
from runs.engine.context import window as context
from runs.engine.context.conversation import build_messages, step_messages
from runs.engine.context.request_fit import RequestFit
from runs.engine.decisions import StopReason
from runs.engine.leases import LeaseLost, keeper, lease_claim, lease_held, lease_release
from runs.engine.llm import clients as llm_clients
from runs.engine.llm import completions as llm
from runs.engine.storage import records
from runs.engine.storage.db import connection_lost, loop_connections, on_fresh_connection, release_db_connection
from runs.engine.storage.records import Recorder, operator_stop_first, paused_at_boundary, run_close
from runs.engine.streaming import AnswerStream
from runs.engine.summaries import iteration_log, summary_record, summary_wanted
from runs.engine.tools.call_runner import CallRunner
from runs.engine.tools.execution import call_status, check_call
from runs.engine.tools.prior_reads import unread_refused
from runs.engine.tools.run_tools import RunTools
from runs.engine.tools.simulation import Simulator, open_calls_settle
from runs.models import OperatorMessage, Run, Step, ToolCall
from toolsapp.sensitive import sensitive_values_in_messages
from toolsapp.verifiers import VERIFIERS

log = logging.getLogger("runs.loop")


class Outcome(enum.Enum):
    """How a pass through the loop ended."""

    CONTINUE = enum.auto()  # ask the model again
    PARKED = enum.auto()  # waits for a person
    CANCELLED = enum.auto()  # an operator asked it to stop
    ENDED = enum.auto()  # the answer ended the run


CONTINUE, PARKED, CANCELLED, ENDED = Outcome


def run_advance(*, run_id: int) -> Run | None:
    """Drive a run until it ends or waits for a person. Returns None if another worker holds it."""
    owner = uuid.uuid4().hex
    with throttle.working(), loop_connections():
        if not lease_claim(run_id, owner):
            return None
        try:
            # A lost connection the driver could not retry on (a read, a commit): a new one goes on from the rows.
            run = on_fresh_connection(lambda: _Driver(run_id, owner).drive(), what=f"driving run {run_id}")
        except LeaseLost:
            log.warning(json.dumps({"event": "lease_lost", "run": run_id}))
            return None
        finally:
            keeper.forget(owner)
            lease_release(run_id, owner)
            release_db_connection()
    asked = Q(pause_requested=True) | ~Q(stop_requested_by_name="")
    if run.status == Run.Status.AWAITING_APPROVAL and Run.objects.filter(asked, pk=run_id).exists():
        return run_levers_apply(run_id=run_id) or run  # it came as we parked: it found the lease taken
    return run


def run_levers_apply(*, run_id: int) -> Run | None:
    """Apply an operator's stop or pause to a run nobody drives (queued, awaiting approval, paused,
    or whose worker died) at once. None when a driver holds it: it applies them at its next boundary."""
    with lease_held(run_id, "lever") as owner:  # under the lease: exactly one of the lever and a driver applies it
        if owner is None:
            return None
        run = Run.objects.get(pk=run_id)
        if run.stop_requested_by_name and not run.cancel_requested:
            return _Driver(run_id, owner).end(StopReason.OPERATOR_STOP)
        if run.pause_requested and run.status != Run.Status.PAUSED:
            recorder = Recorder(run, owner)
            with recorder.transaction():
                paused_at_boundary(recorder, elapsed=run.active_seconds)
        return run


def run_end(*, run_id: int, owner: str, reason: str, detail: str = "") -> Run:
    """End a run whose lease `owner` holds (a cancel of a run no worker is driving)."""
    run = Run.objects.get(pk=run_id)
    recorder = Recorder(run, owner)
    with recorder.transaction():
        run_close(recorder, reason, detail=detail, elapsed=run.active_seconds)
    return run


class _Driver:
    """Drives one run while holding its lease.

    What it reads once at the start (the history, step count, repeat counts, open calls) is kept
    in step with every commit, so an iteration costs a few statements whatever the length of the
    run; a new driver (after a crash, or a decision) starts again from the rows.
    """

    def __init__(self, run_id: int, owner: str):
        self.owner = owner
        self.run = run = Run.objects.get(pk=run_id)
        self.config = run.config
        self.record = Recorder(run, owner)
        self.started = time.monotonic()
        self.active_before = run.active_seconds
        # The run's tools and what the decisions need to know of each, read again for the tools
        # each answer calls (an administrator may change them while the run goes on).
        experiment = self.config.get("experiment")
        self.toolbox = RunTools(self.config["tools"], read_back=self.config.get("read_back", False),
                                experiment=experiment is not None)
        self.simulator = Simulator(experiment.get("answers")) if experiment is not None else None
        self.tools, self.facts = self.toolbox.tools, self.toolbox.facts  # changed in place
        self.runner = CallRunner(run, owner, self.tools, self.record)
        self.messages: list[dict] | None = None  # built from the rows at the first model call
        self.endpoint = None
        # What each request carries, within the run's context budget (0: everything, always).
        self.request = RequestFit(run_id, self.config.get("context_budget", 0), self.toolbox,
                                  resumed=run.iterations > 0, read_back=self.config.get("read_back", False))
        if run.iterations == 0:  # no steps and no calls yet (they are committed with the count)
            self.step_count, self.seen, self.open_calls = 0, {}, []
            self.record.approvals_possible = False  # until a call goes through the gate
            return
        self.step_count = Step.objects.filter(run_id=run_id).count()
        self.seen: dict[tuple[str, str], int] = {
            (row["tool_name"], row["args_hash"]): row["n"]
            for row in ToolCall.objects.filter(run_id=run_id).values("tool_name", "args_hash").annotate(n=Count("pk"))
        }
        # Calls left without a result by a crash, or waiting for a decision.
        self.open_calls: list[ToolCall] = list(
            ToolCall.objects.filter(run_id=run_id)
            .exclude(status__in=ToolCall.DONE_STATUSES)
            .select_related("approval")
            .order_by("step_id", "index")
        )

    # --- the contract --------------------------------------------------------------------------

    def drive(self) -> Run:
        run = self.run
        try:
            if run.takeovers > settings.RUN_MAX_TAKEOVERS:
                # Every worker that took this run died with it: stop instead of looping forever.
                return self.end(StopReason.WORKER_LOST, detail=f"Taken over {run.takeovers} times after workers died.")
            if run.status == Run.Status.PAUSED or self.at_boundary():
                return self.run  # only a resume hands a paused run out again (a decision meanwhile does not)
            if not self.record.commit(lambda: start_or_wait(self.record)):
                return run  # it waits queued on a spent budget, holding no worker
            outcome = self.settle(self.open_calls)  # what a crash or a decision left open
            while outcome == CONTINUE:
                stop = decisions.stop_before_request(
                    config=self.config, counters=self.counters(), cancel_requested=run.cancel_requested,
                    stop_requested=bool(run.stop_requested_by_name),
                )
                if stop:
                    return self.end(stop)
                if run.pause_requested:
                    return self.pause()
                if (spent := reached_before_request(run)) is not None:
                    return self.pause(spent)
                outcome = self.iterate()
            if outcome == PARKED:
                return self.park()
            if outcome == CANCELLED:
                return self.end(StopReason.CANCELLED)
            return run
        except (context.ContextFull, llm.ContextTooLong) as exc:
            return self.end(StopReason.CONTEXT_FULL, detail=str(exc))
        except llm.ModelError as exc:
            return self.end(StopReason.MODEL_ERROR, detail=str(exc))
        except LeaseLost:
            raise
        except Exception as exc:
            if connection_lost(exc):
                raise  # a transient fault, not the run's end: run_advance goes on from the rows
            if not Run.objects.filter(pk=run.pk, lease_owner=self.owner).exists():
                # Another worker took over while we were away (e.g. our step index is taken).
                raise LeaseLost(run.pk) from exc
            log.exception("run %s failed", run.pk)
            return self.end(StopReason.INTERNAL_ERROR, detail=f"{type(exc).__name__}: {exc}"[:500])

    def iterate(self) -> Outcome:
        """One iteration: ask the model, decide, record, run what is allowed."""
        # E.g. verification feedback, then the notes operators typed since the last request.
        preamble = list(self.run.pending_messages) + self.take_notes()
        reply = self.ask(preamble)
        self.request.observe(reply)
        planned, errors, arguments = self.read_calls(reply)
        answer = decisions.Answer(reply.finish_reason, reply.refusal, reply.tokens_in + reply.tokens_out,
                                  reply.cost_usd, planned, errors)
        decision = decisions.decide_answer(
            answer=answer, config=self.config, counters=self.counters(), seen=self.seen, tools=self.facts
        )
        stop, detail, feedback = decision.stop, decision.detail, None
        if decision.verify:
            stop, detail, feedback = self.verify(reply.content)
        early = self.runner.reads_first(planned, arguments, decision, self.step_count + 1,
                                        cancel_read=self.cancel_read) if decision.reads_first else {}
        simulated = {i: self.simulator.answer(planned[i].tool_name, planned[i].args_hash) for i in decision.simulate}
        step_count, seen = self.step_count, dict(self.seen)

        def record_iteration(ending=stop, why=detail):
            self.step_count, self.seen = step_count, dict(seen)  # a new try records the same step
            step, calls = self.record_step(reply, preamble, planned, decision, early, simulated)
            if ending:  # before the approvals are closed: the run's row, then theirs, as a decision does
                ending, why = operator_stop_first(self.record, ending, why)
            if feedback:
                self.record.event("verification", {"ok": False, "reason": why})
                self.record.counters_update(verification_attempts=self.run.verification_attempts + 1,
                                            pending_messages=[feedback])
            if ending:
                run_close(self.record, ending, detail=why, elapsed=self.elapsed(), answer=reply.content,
                          summary_pending=summary_wanted(ending, self.config))
            return step, calls, ending

        step, calls, stop = self.record.commit(record_iteration, lease_seconds=self.runner.lease_for(planned))
        self.log(step, planned, stop)
        if stop:
            self.summarise_if_asked(stop)
            return ENDED
        outcome = self.settle([c for c in calls if c.status not in ToolCall.DONE_STATUSES], step_calls=calls)
        if outcome == CONTINUE and self.messages is not None:
            self.messages.extend(step_messages(preamble, reply.message, calls))
        return outcome

    def at_boundary(self) -> Run | None:
        """Apply an operator's stop or pause (flags as of the last commit, which reads them): the run, or None."""
        run = self.run
        if run.stop_requested_by_name and not run.cancel_requested:
            return self.end(StopReason.OPERATOR_STOP)
        if run.pause_requested:
            return self.pause()
        return None

    def take_notes(self) -> list[dict]:
        """Operators' waiting notes as user messages (their rows get this request's step in its commit),
        read only when the last commit saw some (or this driver has not committed yet)."""
        self.sent_notes = []
        if not getattr(self.run, "notes_waiting", True):
            return []
        notes = list(OperatorMessage.objects.filter(run_id=self.run.pk, step=None).values_list("pk", "text"))
        self.sent_notes = [pk for pk, _ in notes]
        return [{"role": "user", "content": text} for _, text in notes]

    def settle(self, calls: list[ToolCall], step_calls: list[ToolCall] | None = None) -> Outcome:
        """Bring open calls to a result: run the allowed ones, park on the ones a person decides."""
        if self.run.cancel_requested:
            return CANCELLED
        if not calls:
            return CONTINUE
        if self.simulator is not None:  # an experiment's open calls: nothing is asked of anyone
            calls = open_calls_settle(calls, facts=self.facts, simulator=self.simulator, recorder=self.record)
            if not calls:
                return CONTINUE
        runnable, waiting = calls, False
        facts = self.facts
        if not all(c.status == ToolCall.Status.PENDING and c.tool_name in facts and not facts[c.tool_name].destructive
                   for c in calls):  # the common case needs no writes before running
            runnable = []
            with self.record.transaction(lease_seconds=self.runner.lease_for(calls)):
                for call in calls:
                    gate = hooks.call_gate(call=call, tool=self.tools.get(call.tool_name),
                                           config=self.config, recorder=self.record)
                    if gate == hooks.RUN:
                        runnable.append(call)
                    waiting = waiting or gate == hooks.WAIT
        if runnable:
            names = [c.tool_name for c in (step_calls or calls) if c.step_id == runnable[0].step_id]
            parallel = len(runnable) > 1 and decisions.may_run_together(names, self.facts)
            if not self.runner.execute(runnable, parallel=parallel):
                return CANCELLED
        return PARKED if waiting else CONTINUE

    # --- asking and deciding ---------------------------------------------------------------------

    def ask(self, preamble: list[dict]) -> llm.ModelReply:
        if self.endpoint is None:
            self.endpoint = llm_clients.resolve_endpoint(**llm_clients.endpoint_settings(self.config))
        if self.messages is None:
            self.messages = build_messages(self.run)[: -len(self.run.pending_messages) or None]
        request = self.request
        request.fit(self.messages, preamble)
        shrink = None
        if request.budget:
            def shrink() -> tuple[list[dict], list[dict]]:  # a provider refused the request for its length
                return request.refit(self.messages, preamble)
        keeper.expect_wait(self.owner, llm_clients.model_wait_seconds(len(self.config["models"] or [1])))
        stream_to = None
        if self.config.get("stream_answers", True):
            stream_to = AnswerStream(
                run_id=self.run.pk, group=self.run.group_name, step=self.step_count + 1,
                shown_tools={name for name, tool in self.tools.items() if not tool.sensitive_fields},
            )
        with throttle.waiting():
            return llm.complete(
                endpoint=self.endpoint, messages=request.fitted.messages, tools=self.toolbox.definitions,
                tool_choice=guards.tool_choice_for(self.run.iterations + 1, self.config),
                parallel_tool_calls=self.config["parallel_tool_calls"],
                provider_options=self.config["provider_options"],
                max_output_tokens=self.config.get("max_output_tokens") or settings.LLM_MAX_OUTPUT_TOKENS,
                redacted=lambda: sensitive_values_in_messages(self.messages + preamble, self.tools),
                stream_to=stream_to, shrink=shrink,
            )

    def read_calls(self, reply) -> tuple[list[guards.PlannedCall], list[str | None], dict[int, dict]]:
        """The answer's calls as plain data, the error that refuses each before it runs, and the
        valid arguments by call index."""
        planned = [
            guards.PlannedCall(
                index=i,
                call_id=c["id"],
                tool_name=records.bounded(c["function"]["name"], records.NAME_CHARS),
                arguments=c["function"]["arguments"],
                args_hash=guards.args_hash(c["function"]["arguments"], settings.ARGS_HASH_KEY),
            )
            for i, c in enumerate(reply.tool_calls)
        ]
        self.cancel_read = self.toolbox.refresh([p.tool_name for p in planned], run=self.run)
        unavailable = frozenset(self.toolbox.unavailable)
        checks = [check_call(tool_name=p.tool_name, raw_arguments=p.arguments, tools=self.tools, unavailable=unavailable)
                  for p in planned]
        checks = unread_refused(run_id=self.run.pk, planned=planned, checks=checks, tools=self.tools)  # after the schema
        arguments = {p.index: args for p, (args, _) in zip(planned, checks)}
        return planned, [error for _, error in checks], arguments

    def verify(self, answer: str) -> tuple[str | None, str, dict | None]:
        """(stop reason or None, detail, feedback for the model) for a final answer to verify."""
        name = self.config["verifier"]
        verifier = VERIFIERS.get(name)
        if verifier is None:
            return StopReason.VERIFICATION_FAILED, f"no verifier named {name!r} is registered", None
        ok, reason = verifier(run_id=self.run.pk, answer=answer, customer=self.run.customer)
        if ok:
            return StopReason.FINAL_ANSWER, "", None
        if self.run.verification_attempts >= 1:
            return StopReason.VERIFICATION_FAILED, reason, None
        # The reason goes back to the model once; it may fix things and answer again.
        text = f"Verification failed: {reason}. Check the real state with the tools and answer again."
        return None, reason, {"role": "user", "content": text}

    # --- recording --------------------------------------------------------------------------------

    def record_step(self, reply, preamble, planned, decision, early, simulated) -> tuple[Step, list[ToolCall]]:
        """The step and its calls, each with its first state, and the run's counters."""
        run = self.run
        self.step_count += 1
        calls = []
        for p in planned:
            call = ToolCall(
                run=run, index=p.index, call_id=p.call_id, tool_name=p.tool_name, arguments=p.arguments,
                args_hash=p.args_hash, idempotency_key=guards.idempotency_key(run.pk, self.step_count, p.index),
            )
            refusal = decision.refused.get(p.index)
            if refusal:
                records.set_result(call, {"ok": False, "error": refusal.error}, refusal.status)
            elif p.index in early:
                payload, call.latency_ms = early[p.index]
                records.set_result(call, payload, call_status(payload))
            elif p.index in simulated:
                payload, call.simulation, text = simulated[p.index]
                records.set_result(call, payload, ToolCall.Status.SIMULATED)
                call.result_text = call.result_text if text is None else text
            key = (p.tool_name, p.args_hash)
            self.seen[key] = self.seen.get(key, 0) + 1
            calls.append(call)
        step, calls = self.record.step_create(
            index=self.step_count, iteration=run.iterations + 1, reply=reply, preamble=preamble, calls=calls,
            request=self.request.step_fields(),
        )
        if self.sent_notes:  # only those sent: a note typed meanwhile waits for the next request
            OperatorMessage.objects.filter(pk__in=self.sent_notes).update(step=step)
        self.record.counters_update(
            iterations=run.iterations + 1, tokens_in=run.tokens_in + reply.tokens_in,
            tokens_out=run.tokens_out + reply.tokens_out, cost_usd=run.cost_usd + reply.cost_usd,
            active_seconds=self.elapsed(), pending_messages=[],
            **self.token_kinds(reply, self.request.fitted.new),
        )
        return step, calls

    # --- endings ----------------------------------------------------------------------------------

    def park(self) -> Run:
        if self.at_boundary():
            return self.run
        self.record.commit(lambda: self.record.run_update(status=Run.Status.AWAITING_APPROVAL, active_seconds=self.elapsed()))
        return self.run

    def pause(self, spent=None) -> Run:
        """At this boundary: asked by an operator, or a budget that covers the run is spent."""
        if spent is not None:
            self.record.commit(lambda: pause_on_budget(self.record, spent, elapsed=self.elapsed()))
        else:
            self.record.commit(lambda: paused_at_boundary(self.record, elapsed=self.elapsed()))
        return self.run

    def end(self, reason: str, *, detail: str = "") -> Run:
        """End the run between iterations (cancel, stop, budget, limit, model error, internal error)."""
        def close() -> str:
            ending, why = operator_stop_first(self.record, reason, detail)
            run_close(self.record, ending, detail=why, elapsed=self.elapsed(), in_flight=frozenset(self.runner.in_flight),
                      summary_pending=summary_wanted(ending, self.config))
            return ending
        reason = self.record.commit(close)
        self.log(None, [], reason)
        self.summarise_if_asked(reason)
        return self.run

    def summarise_if_asked(self, reason: str) -> None:
        if not summary_wanted(reason, self.config):
            return
        if summary_record(recorder=self.record, config=self.config, endpoint=self.endpoint,
                          tools=self.toolbox.definitions, index=self.step_count + 1):
            self.step_count += 1

    # --- small helpers ----------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.active_before + time.monotonic() - self.started

    def token_kinds(self, reply, compactions: int) -> dict:
        """The run's counters of cached and reasoning tokens and of compactions, where they changed
        (most answers change none: no column written for nothing)."""
        run, fields = self.run, {}
        if reply.tokens_cached:
            fields["tokens_cached"] = run.tokens_cached + reply.tokens_cached
        if reply.tokens_reasoning:
            fields["tokens_reasoning"] = run.tokens_reasoning + reply.tokens_reasoning
        if compactions:
            fields["compactions"] = run.compactions + 1
        return fields

    def counters(self) -> decisions.Counters:
        run = self.run
        return decisions.Counters(run.iterations, run.total_tokens, run.cost_usd, self.elapsed())

    def log(self, step: Step | None, planned, stop: str | None) -> None:
        iteration_log(self.run, step, planned, stop)
