"""The agent loop: ask the model, check every call, run what is allowed, repeat until a stop.

`run_advance` drives one run as far as it can go: to its end, or to a point where it waits for
a person. It holds a lease on the run while it works and commits each iteration (the step, its
calls and their results) before the next model request, so a crash loses at most the request in
flight, and any worker can pick the run up again from the database.
"""
import json
import logging
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, F
from django.utils import timezone

from runs import llm
from runs.models import Approval, Run, Step, ToolCall
from runs.services import guards, throttle
from runs.services.db import release_db_connection, write_transaction
from runs.services.events import approvals_changed, event_record, events_store
from runs.services.history import build_messages
from runs.services.leases import keeper
from runs.services.notifications import approval_pending_data, notify
from runs.services.tool_exec import check_call, execute_calls, reads_only
from runs.snapshots import call_data, run_summary, step_data
from toolsapp.models import Tool
from toolsapp.registry import VERIFIERS, ToolContext

log = logging.getLogger("runs.loop")

SUMMARY_REASONS = ("iteration_limit", "repeated_call", "time_budget")
SUMMARY_PROMPT = (
    "The run has stopped: {detail} Do not call any tools. In a few sentences, tell the user what "
    "was done, what was found, and what is left undone."
)


class LeaseLost(Exception):
    """Another worker took this run over; stop without writing anything more."""


# --- Leases ------------------------------------------------------------------------------------


def lease_claim(run_id: int, owner: str, seconds: float | None = None) -> bool:
    """Atomically take the run if nobody holds a live lease on it."""
    now = timezone.now()
    until = now + timedelta(seconds=seconds or settings.RUN_LEASE_SECONDS)
    active = Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES)
    if active.filter(lease_owner="").update(lease_owner=owner, lease_expires_at=until) == 1:
        return True
    # A lease that ran out belongs to a worker that died (or hung): take over, and count it.
    taken = (
        active.filter(lease_expires_at__lt=now)
        .exclude(lease_owner="")
        .update(lease_owner=owner, lease_expires_at=until, takeovers=F("takeovers") + 1)
    )
    return taken == 1


def lease_release(run_id: int, owner: str) -> None:
    Run.objects.filter(pk=run_id, lease_owner=owner).update(lease_owner="", lease_expires_at=None)


def _fenced_update(run: Run, owner: str, *, events: int = 0, lease_seconds: float | None = None, **fields) -> int:
    """Write run fields only while `owner` still holds the lease: the fence against a second worker.

    One statement also renews the lease, takes `events` sequence numbers and reads the cancel
    flag, because this runs several times per iteration. Returns the last sequence number taken.
    """
    fields["lease_expires_at"] = timezone.now() + timedelta(seconds=lease_seconds or settings.RUN_LEASE_SECONDS)
    sets, params = [], []
    for name, value in fields.items():
        field = Run._meta.get_field(name)
        sets.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"UPDATE {Run._meta.db_table} SET {', '.join(sets)}, event_seq = event_seq + %s "
        "WHERE id = %s AND lease_owner = %s RETURNING event_seq, cancel_requested"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, events, run.pk, owner])
        row = cursor.fetchone()
    if row is None:
        raise LeaseLost(run.pk)
    for name, value in fields.items():
        setattr(run, name, value)
    run.event_seq, run.cancel_requested = row[0], bool(row[1])
    return row[0]


def _model_wait_seconds(models: int) -> float:
    """How long one model request may legitimately take, every fallback and retry included."""
    return models * settings.LLM_TIMEOUT_SECONDS * (settings.LLM_MAX_RETRIES + 1) + 30


# --- Entry point ---------------------------------------------------------------------------------


def run_advance(*, run_id: int) -> Run | None:
    """Drive a run until it ends or waits for a person. Returns None if another worker holds it."""
    owner = uuid.uuid4().hex
    with throttle.working():
        if not lease_claim(run_id, owner):
            return None
        try:
            return _Driver(run_id, owner).drive()
        except LeaseLost:
            log.warning(json.dumps({"event": "lease_lost", "run": run_id}))
            return None
        finally:
            keeper.forget(owner)
            lease_release(run_id, owner)
            release_db_connection()


def run_end(*, run_id: int, owner: str, reason: str, detail: str = "") -> Run:
    """End a run whose lease `owner` holds (a cancel of a run no worker is driving)."""
    return _Driver(run_id, owner)._finish(reason, detail=detail)


class _Driver:
    """Drives one run while holding its lease.

    State read from the database once at the start (the history, step count, repeat counts, open
    calls) is then kept in step with every commit, so an iteration costs a few statements whatever
    the length of the run; a new driver (after a crash, or a decision) starts again from the rows.
    """

    def __init__(self, run_id: int, owner: str):
        self.owner = owner
        self.run = Run.objects.get(pk=run_id)
        self.config = self.run.config
        self.started = time.monotonic()
        self.active_before = self.run.active_seconds
        tools = Tool.objects.filter(name__in=self.config["tools"], enabled=True)
        self.tools = {t.name: t for t in tools}
        self.definitions = [self.tools[n].definition() for n in self.config["tools"] if n in self.tools]
        self.repeat_limits = {"*": self.config["repeat_limit"]}
        self.repeat_limits.update({t.name: t.repeat_limit for t in tools if t.repeat_limit})
        self.messages: list[dict] | None = None  # built from the rows at the first model call
        self.step_calls: list[ToolCall] = []
        if self.run.iterations == 0:
            # No steps and no calls yet (they are committed with the iteration count).
            self.step_count, self.seen, self.open_calls = 0, {}, []
            return
        self.step_count = Step.objects.filter(run_id=run_id).count()
        self.seen: dict[tuple[str, str], int] = {
            (row["tool_name"], row["args_hash"]): row["n"]
            for row in ToolCall.objects.filter(run_id=run_id).values("tool_name", "args_hash").annotate(n=Count("pk"))
        }
        # Calls left without a result by a crash or waiting for a decision.
        self.open_calls: list[ToolCall] = list(
            ToolCall.objects.filter(run_id=run_id)
            .exclude(status__in=ToolCall.DONE_STATUSES)
            .select_related("approval")
            .order_by("step_id", "index")
        )

    def elapsed(self) -> float:
        return self.active_before + time.monotonic() - self.started

    def _commit(self, events: list[tuple[str, object]] = (), lease_seconds: float | None = None, **fields) -> None:
        """Fenced update of the run plus its timeline events; call inside a transaction.

        Event data may be a callable, evaluated after the fields are set on the run.
        """
        for name, value in fields.items():
            setattr(self.run, name, value)
        last = _fenced_update(self.run, self.owner, events=len(events), lease_seconds=lease_seconds, **fields)
        events_store(
            run_id=self.run.pk,
            first_seq=last - len(events) + 1,
            events=[(kind, data() if callable(data) else data) for kind, data in events],
        )

    # --- the loop ------------------------------------------------------------------------------

    def drive(self) -> Run:
        run = self.run
        try:
            if run.takeovers > settings.RUN_MAX_TAKEOVERS:
                # Every worker that took this run died with it: stop instead of looping forever.
                return self._finish("worker_lost", detail=f"Taken over {run.takeovers} times after workers died.")
            with write_transaction():
                self._commit(
                    events=[("run", lambda: run_summary(run))] if run.status != Run.Status.RUNNING else [],
                    status=Run.Status.RUNNING,
                    started_at=run.started_at or timezone.now(),
                )
            endpoint = None
            while True:
                if run.cancel_requested:
                    return self._finish("cancelled")
                settled = self._settle_calls()
                if settled == "parked":
                    return self._park()
                if settled == "cancelled" or run.cancel_requested:
                    return self._finish("cancelled")
                reason = guards.budget_exceeded(
                    config=self.config, tokens=run.total_tokens, cost=run.cost_usd, elapsed=self.elapsed()
                )
                if reason:
                    return self._finish(reason)
                if run.iterations >= self.config["max_iterations"]:
                    return self._finish("iteration_limit")
                if endpoint is None:
                    endpoint = llm.resolve_endpoint(base_url=self.config["base_url"], models=self.config["models"])
                if self._iterate(endpoint):
                    return run
        except llm.ModelError as exc:
            return self._finish("model_error", detail=str(exc))
        except LeaseLost:
            raise
        except Exception as exc:
            if not Run.objects.filter(pk=run.pk, lease_owner=self.owner).exists():
                # Another worker took over while we were away (e.g. our step index is taken).
                raise LeaseLost(run.pk) from exc
            log.exception("run %s failed", run.pk)
            return self._finish("internal_error", detail=f"{type(exc).__name__}: {exc}"[:500])

    def _iterate(self, endpoint) -> bool:
        """One model call and the decisions on its answer. True when the run has ended."""
        run, config = self.run, self.config
        iteration = run.iterations + 1
        if self.messages is None:
            self.messages = build_messages(run)[: -len(run.pending_messages) or None]
        preamble = list(run.pending_messages)  # e.g. verification feedback, sent with this request
        keeper.expect_wait(self.owner, _model_wait_seconds(len(self.config["models"] or [1])))
        with throttle.waiting():
            reply = llm.complete(
                endpoint=endpoint,
                messages=self.messages + preamble,
                tools=self.definitions,
                tool_choice=guards.tool_choice_for(iteration, config),
                parallel_tool_calls=config["parallel_tool_calls"],
                provider_options=config["provider_options"],
                max_output_tokens=config.get("max_output_tokens") or settings.LLM_MAX_OUTPUT_TOKENS,
            )
        planned = [
            guards.PlannedCall(
                index=i,
                call_id=c["id"],
                tool_name=c["function"]["name"],
                arguments=c["function"]["arguments"],
                args_hash=guards.args_hash(c["function"]["arguments"], settings.ARGS_HASH_KEY),
            )
            for i, c in enumerate(reply.tool_calls)
        ]
        stop, detail, skip_note = self._decide(reply, planned, iteration)
        checks = [
            (None, None) if skip_note else check_call(tool_name=p.tool_name, raw_arguments=p.arguments, tools=self.tools)
            for p in planned
        ]
        early = self._run_reads_first(planned, checks) if planned and not stop else {}
        with write_transaction():
            step, fields, events = self._record_step(reply, iteration, preamble, planned, skip_note, checks, early)
            if stop == "verify":
                stop, detail = self._verify(reply.content, fields, events)
            if stop:
                fields.update(self._ending(stop, detail=detail, answer=reply.content))
                events.append(("run", lambda: run_summary(run)))
            self._commit(events, lease_seconds=self._lease_for(self.step_calls), **fields)
        self.messages.extend(preamble)
        self.messages.append(reply.message)
        self._log(step, planned, stop)
        if stop and stop in SUMMARY_REASONS and config.get("summarize_on_stop"):
            self._summarise(endpoint)
        return bool(stop)

    def _decide(self, reply, planned, iteration) -> tuple[str | None, str, str]:
        """(stop reason or None, detail, why the calls are not run) for a model answer."""
        config = self.config
        if reply.finish_reason == "length":
            return "max_tokens", "", "the answer was cut off"
        if reply.finish_reason == "content_filter" or reply.refusal:
            return "content_filter", reply.refusal or "", "the answer was filtered"
        if not planned:
            return ("verify" if config.get("verifier") else "final_answer"), "", ""
        # The cap is checked before any tool runs: the last allowed iteration runs none.
        if iteration >= config["max_iterations"]:
            return "iteration_limit", "", "the iteration limit was reached"
        tokens = self.run.total_tokens + reply.tokens_in + reply.tokens_out
        cost = self.run.cost_usd + reply.cost_usd
        budget = guards.budget_exceeded(config=config, tokens=tokens, cost=cost, elapsed=self.elapsed())
        if budget:
            return budget, "", "the run's budget was used up"
        repeated = guards.repeated_call(planned, self.seen, self.repeat_limits)
        if repeated:
            return "repeated_call", f"{repeated.tool_name} with arguments hash {repeated.args_hash[:12]}", (
                "the same call was repeated too often"
            )
        return None, "", ""

    def _run_reads_first(self, planned, checks) -> dict[int, tuple[dict, float]]:
        """Results of calls that only read, run before their step is recorded: {index: (payload, ms)}.

        When every valid call of the answer is to a read-only tool, running them first lets the
        step, its calls and their results go to the database in one commit instead of two (a
        crash meanwhile loses only the model's answer, as a crash during the request would).
        Any other call, or a cancel that arrived while the model answered, takes the usual path:
        the step is recorded first, and the calls run after it.
        """
        runnable = [(p, arguments) for p, (arguments, error) in zip(planned, checks) if error is None and arguments is not None]
        if not runnable or not all(reads_only(self.tools[p.tool_name]) for p, _ in runnable):
            return {}
        parallel = len(runnable) > 1
        if parallel and not self._may_run_together([p.tool_name for p in planned]):
            return {}
        if self._cancel_requested():
            return {}
        jobs = [
            self._job(p.tool_name, arguments, p.call_id, guards.idempotency_key(self.run.pk, p.call_id))
            for p, arguments in runnable
        ]
        keeper.expect_wait(self.owner, self._lease_for([p for p, _ in runnable]))
        with throttle.waiting():
            return {
                runnable[position][0].index: (payload, latency_ms)
                for position, payload, latency_ms in execute_calls(jobs, parallel=parallel)
            }

    def _may_run_together(self, names: list[str]) -> bool:
        """Calls of one answer run in parallel only when every tool it names is parallel-safe."""
        return all(n in self.tools and self.tools[n].parallel_safe for n in names)

    def _job(self, tool_name: str, arguments: dict, call_id: str, idempotency_key: str):
        """What execute_calls takes for one call."""
        context = ToolContext(run_id=self.run.pk, call_id=call_id, idempotency_key=idempotency_key, customer=self.run.customer)
        return self.tools[tool_name], arguments, context

    def _cancel_requested(self) -> bool:
        """Read the cancel flag again (an operator may have set it since the last commit).

        A plain statement: this runs before tool calls, and the ORM's query building cost more
        than the query itself."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT cancel_requested FROM {Run._meta.db_table} WHERE id = %s", [self.run.pk])
            self.run.cancel_requested = bool(cursor.fetchone()[0])
        return self.run.cancel_requested

    def _record_step(self, reply, iteration, preamble, planned, skip_note, checks, early):
        """Insert the step and its calls; return it with the run fields and events to commit."""
        run = self.run
        self.step_count += 1
        step = Step.objects.create(
            run=run,
            index=self.step_count,
            iteration=iteration,
            preamble=preamble,
            model=reply.model,
            tool_choice=reply.tool_choice,
            tool_choice_fallback=reply.tool_choice_fallback,
            finish_reason=reply.finish_reason,
            message=reply.message,
            latency_ms=reply.latency_ms,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            cost_usd=reply.cost_usd,
            model_errors=reply.errors,
        )
        calls = []
        for p, (_, error) in zip(planned, checks):
            call = ToolCall(
                run=run,
                step=step,
                index=p.index,
                call_id=p.call_id,
                tool_name=p.tool_name,
                arguments=p.arguments,
                args_hash=p.args_hash,
                idempotency_key=guards.idempotency_key(run.pk, p.call_id),
            )
            if skip_note:
                self._set_result(call, {"ok": False, "error": f"not executed: {skip_note}"}, ToolCall.Status.SKIPPED)
            elif error:  # errors are data: the model reads them and may correct itself
                self._set_result(call, {"ok": False, "error": error}, ToolCall.Status.FAILED)
            elif p.index in early:
                payload, call.latency_ms = early[p.index]
                self._set_result(call, payload, ToolCall.Status.SUCCEEDED if payload["ok"] else ToolCall.Status.FAILED)
            key = (p.tool_name, p.args_hash)
            self.seen[key] = self.seen.get(key, 0) + 1
            calls.append(call)
        ToolCall.objects.bulk_create(calls)
        if any(c.pk is None for c in calls):  # backends that cannot return ids from a bulk insert
            calls = list(ToolCall.objects.filter(step=step).order_by("index"))
        self.step_calls = calls
        self.open_calls = [c for c in calls if c.status not in ToolCall.DONE_STATUSES]
        fields = {
            "iterations": iteration,
            "tokens_in": run.tokens_in + reply.tokens_in,
            "tokens_out": run.tokens_out + reply.tokens_out,
            "cost_usd": run.cost_usd + reply.cost_usd,
            "active_seconds": self.elapsed(),
            "pending_messages": [],
        }
        return step, fields, [("step", step_data(step, calls))]

    def _lease_for(self, calls) -> float:
        # Long enough for the calls about to run to reach their timeouts.
        return settings.RUN_LEASE_SECONDS + sum(
            self.tools[c.tool_name].timeout_seconds for c in calls if c.tool_name in self.tools
        )

    def _verify(self, answer: str, fields: dict, events: list) -> tuple[str | None, str]:
        name = self.config["verifier"]
        verifier = VERIFIERS.get(name)
        if verifier is None:
            return "verification_failed", f"no verifier named {name!r} is registered"
        ok, reason = verifier(run_id=self.run.pk, answer=answer, customer=self.run.customer)
        if ok:
            return "final_answer", ""
        if self.run.verification_attempts >= 1:
            return "verification_failed", reason
        # The reason goes back to the model once; it may fix things and answer again.
        fields["verification_attempts"] = self.run.verification_attempts + 1
        fields["pending_messages"] = [
            {"role": "user", "content": f"Verification failed: {reason}. Check the real state with the tools and answer again."}
        ]
        events.append(("verification", {"ok": False, "reason": reason}))
        return None, ""

    # --- tool calls ------------------------------------------------------------------------------

    def _settle_calls(self) -> str:
        """Bring the open calls to a result. Returns "done", "parked" or "cancelled"."""
        calls, self.open_calls = self.open_calls, []
        runnable, waiting = [], False
        simple = all(
            c.status == ToolCall.Status.PENDING and c.tool_name in self.tools and not self.tools[c.tool_name].destructive
            for c in calls
        )
        if simple:  # the common case needs no writes before running
            runnable = calls
        elif calls:
            with write_transaction():
                for call in calls:
                    state = self._prepare(call)
                    if state == "run":
                        runnable.append(call)
                    elif state == "wait":
                        waiting = True
                self._commit(lease_seconds=self._lease_for(runnable))
        if runnable:
            names = [c.tool_name for c in (self.step_calls or calls) if c.step_id == runnable[0].step_id]
            parallel = len(runnable) > 1 and self._may_run_together(names)
            if self._execute(runnable, parallel=parallel) == "cancelled":
                return "cancelled"
        if waiting:
            return "parked"
        if self.messages is not None and self.step_calls:
            # Results follow their assistant message, one per call id, in the order of the calls.
            self.messages.extend(
                {"role": "tool", "tool_call_id": c.call_id, "content": c.result_text} for c in self.step_calls
            )
        return "done"

    def _prepare(self, call: ToolCall) -> str:
        """Decide what happens to one open call: "run", "wait" (for a person) or "done"."""
        tool = self.tools.get(call.tool_name)
        approval = getattr(call, "approval", None)
        if tool is None:  # disabled or removed while the run waited
            self._set_result(call, {"ok": False, "error": f"tool {call.tool_name!r} is no longer available"}, ToolCall.Status.FAILED)
            call.save()
            return "done"
        if call.status == ToolCall.Status.STARTED:
            # Started before a crash, with no result recorded: its effect may or may not exist.
            if tool.idempotent:
                return "run"
            if approval is not None:
                approval.delete()
            self._request_approval(call, note="Interrupted by a crash while running; it may already have taken effect.")
            return "wait"
        if call.status == ToolCall.Status.PENDING:
            if not tool.destructive:
                return "run"
            return self._request_approval(call)
        if call.status == ToolCall.Status.AWAITING_APPROVAL:
            if approval.status == Approval.Status.PENDING and approval.expires_at and approval.expires_at <= timezone.now():
                approval.status = Approval.Status.EXPIRED
                approval.decided_at = timezone.now()
                approval.reason = "approval expired"
                approval.save(update_fields=["status", "decided_at", "reason"])
                approvals_changed(run_id=self.run.pk)
            if approval.status == Approval.Status.PENDING:
                return "wait"
            if approval.status == Approval.Status.APPROVED:
                call.status = ToolCall.Status.APPROVED
                call.save(update_fields=["status"])
                return "run"
            self._reject(call, approval)
            return "done"
        if call.status == ToolCall.Status.APPROVED:
            return "run"
        return "done"

    def _request_approval(self, call: ToolCall, note: str = "") -> str:
        policy = self.config.get("approval_policy", "ask")
        timeout = self.config.get("approval_timeout_seconds")
        approval = Approval(
            tool_call=call,
            run=self.run,
            note=note,
            expires_at=timezone.now() + timedelta(seconds=timeout) if timeout else None,
        )
        if policy in ("approve", "reject"):
            approval.status = Approval.Status.APPROVED if policy == "approve" else Approval.Status.REJECTED
            approval.automatic = True
            approval.decided_at = timezone.now()
            approval.reason = f"automatic: {policy}-all policy of this run"
        approval.save()
        call.approval = approval
        if approval.status == Approval.Status.APPROVED:
            call.status = ToolCall.Status.APPROVED
            call.save(update_fields=["status"])
            return "run"
        if approval.status == Approval.Status.REJECTED:
            self._reject(call, approval)
            return "done"
        call.status = ToolCall.Status.AWAITING_APPROVAL
        call.save(update_fields=["status"])
        event_record(run_id=self.run.pk, kind="call", data=call_data(call))
        approvals_changed(run_id=self.run.pk)
        notify("approval.pending", lambda: approval_pending_data(approval))
        return "wait"

    def _reject(self, call: ToolCall, approval: Approval) -> None:
        reason = approval.reason or ("approval expired" if approval.status == Approval.Status.EXPIRED else "no reason given")
        self._set_result(call, {"ok": False, "error": f"rejected by operator: {reason}"}, ToolCall.Status.REJECTED)
        call.save()
        event_record(run_id=self.run.pk, kind="call", data=call_data(call))

    def _execute(self, calls: list[ToolCall], *, parallel: bool) -> str | None:
        jobs = [self._job(c.tool_name, json.loads(c.arguments or "{}"), c.call_id, c.idempotency_key) for c in calls]

        def mark_started(batch):
            # Only a call that is not safe to repeat needs "started" on disk before it runs: after a
            # crash such a call goes to an operator; an idempotent one simply runs again.
            risky = [c for c in batch if not self.tools[c.tool_name].idempotent]
            if risky:
                with write_transaction():
                    self._commit()
                    self._mark_started(risky, timezone.now())

        def before_each(position):
            if position > 0:
                self._cancel_requested()
            if self.run.cancel_requested:
                return False
            mark_started([calls[position]])
            release_db_connection()  # the tool's thread may need one while we wait for it
            return True

        if parallel:
            mark_started(calls)
        keeper.expect_wait(self.owner, self._lease_for(calls))
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
            call = calls[position]
            status = ToolCall.Status.SUCCEEDED if payload["ok"] else ToolCall.Status.FAILED
            self._set_result(call, payload, status)
            call.latency_ms = latency_ms
            with write_transaction():
                call.save(update_fields=_RESULT_FIELDS)
                self._commit(events=[("call", call_data(call))])
            finished += 1
        if finished < len(calls):
            with write_transaction():
                for call in calls[finished:]:
                    self._set_result(call, {"ok": False, "error": "not executed: the run was cancelled"}, ToolCall.Status.SKIPPED)
                    call.save(update_fields=_RESULT_FIELDS)
            return "cancelled"
        return None

    @staticmethod
    def _mark_started(calls, now):
        for call in calls:
            call.status = ToolCall.Status.STARTED
            call.started_at = now
            call.attempts += 1
            call.save(update_fields=["status", "started_at", "attempts"])

    @staticmethod
    def _set_result(call: ToolCall, payload: dict, status: str) -> None:
        content, truncated = guards.tool_result_content(
            payload, max_chars=settings.TOOL_RESULT_MAX_CHARS, preview_chars=settings.TOOL_RESULT_PREVIEW_CHARS
        )
        call.status = status
        call.result = payload
        call.result_text = content
        call.truncated = truncated
        call.error = "" if payload.get("ok") else str(payload.get("error", ""))
        call.finished_at = timezone.now()

    # --- endings -----------------------------------------------------------------------------------

    def _park(self) -> Run:
        with write_transaction():
            self._commit(
                events=[("run", lambda: run_summary(self.run))],
                status=Run.Status.AWAITING_APPROVAL,
                active_seconds=self.elapsed(),
            )
        return self.run

    def _ending(self, reason: str, *, detail: str = "", answer: str | None = None) -> dict:
        """The run fields that record an ending."""
        fields = {
            "status": {"final_answer": Run.Status.SUCCEEDED, "cancelled": Run.Status.CANCELLED}.get(reason, Run.Status.FAILED),
            "stop_reason": reason,
            "stop_detail": guards.stop_message(reason, self.config, detail),
            "finished_at": timezone.now(),
            "active_seconds": self.elapsed(),
        }
        if answer is not None:
            fields["answer"] = answer
        return fields

    def _finish(self, reason: str, *, detail: str = "") -> Run:
        """End the run between iterations (cancel, budget, limit, model error, internal error)."""
        with write_transaction():
            self._close_open_calls(reason)
            self._commit(events=[("run", lambda: run_summary(self.run))], **self._ending(reason, detail=detail))
        self._log(None, [], reason)
        if reason in SUMMARY_REASONS and self.config.get("summarize_on_stop"):
            try:
                self._summarise(llm.resolve_endpoint(base_url=self.config["base_url"], models=self.config["models"]))
            except llm.ModelError as exc:
                log.warning("summary for run %s failed: %s", self.run.pk, exc)
        return self.run

    def _close_open_calls(self, reason: str) -> None:
        """A run that ends leaves no call without a result (one result per call id, always)."""
        expired = Approval.objects.filter(run=self.run, status=Approval.Status.PENDING).update(
            status=Approval.Status.EXPIRED, decided_at=timezone.now(), reason=f"the run ended ({reason})"
        )
        if expired:
            approvals_changed(run_id=self.run.pk)
        open_calls = ToolCall.objects.filter(run=self.run).exclude(status__in=ToolCall.DONE_STATUSES)
        for call in open_calls.select_related("approval", "approval__decided_by"):
            self._set_result(call, {"ok": False, "error": f"not executed: the run ended ({reason})"}, ToolCall.Status.SKIPPED)
            call.save(update_fields=_RESULT_FIELDS)
            # The timeline is built from events: it must learn that this call will never run.
            event_record(run_id=self.run.pk, kind="call", data=call_data(call))

    def _summarise(self, endpoint) -> None:
        """The opt-in last, tools-free call: a summary the user can read instead of a bare limit."""
        instruction = {"role": "user", "content": SUMMARY_PROMPT.format(detail=self.run.stop_detail)}
        messages = build_messages(self.run) + [instruction]
        try:
            with throttle.waiting():
                reply = llm.complete(
                    endpoint=endpoint,
                    messages=messages,
                    tools=self.definitions,
                    tool_choice="none",
                    parallel_tool_calls=self.config["parallel_tool_calls"],
                    provider_options=self.config["provider_options"],
                )
        except llm.ModelError as exc:
            log.warning("summary for run %s failed: %s", self.run.pk, exc)
            return
        with write_transaction():
            self.step_count += 1
            step = Step.objects.create(
                run=self.run,
                index=self.step_count,
                iteration=self.run.iterations,
                kind=Step.Kind.SUMMARY,
                preamble=[instruction],
                model=reply.model,
                tool_choice="none",
                finish_reason=reply.finish_reason,
                # A summary must not leave unanswered calls in the history.
                message={"role": "assistant", "content": reply.content},
                latency_ms=reply.latency_ms,
                tokens_in=reply.tokens_in,
                tokens_out=reply.tokens_out,
                cost_usd=reply.cost_usd,
                model_errors=reply.errors,
            )
            self._commit(
                events=[("step", step_data(step, [])), ("run", lambda: run_summary(self.run))],
                answer=reply.content,
                tokens_in=self.run.tokens_in + reply.tokens_in,
                tokens_out=self.run.tokens_out + reply.tokens_out,
                cost_usd=self.run.cost_usd + reply.cost_usd,
            )

    def _log(self, step: Step | None, planned, stop: str | None) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        log.info(
            json.dumps(
                {
                    "event": "iteration",
                    "run": self.run.pk,
                    "iteration": step.iteration if step else self.run.iterations,
                    "model": step.model if step else None,
                    "latency_ms": round(step.latency_ms, 1) if step else None,
                    "tools": [p.tool_name for p in planned],
                    "args_hashes": [p.args_hash[:16] for p in planned],
                    "stop_reason": stop if stop not in (None, "verify") else None,
                }
            )
        )


_RESULT_FIELDS = ["status", "result", "result_text", "truncated", "error", "finished_at", "latency_ms"]
