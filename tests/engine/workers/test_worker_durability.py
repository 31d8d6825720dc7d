"""Runs survive what happens to real deployments: dead workers, duplicate deliveries, a Redis that
restarts, operators who cancel or take their time.

Every test here drives runs with REAL Celery worker subprocesses (see conftest.py): a private
Redis carries the messages, the worker opens the same test database, asks the session's demo
model (scripted answers, some slow) and runs the tools of `worker_tools.py`, which record each
execution in a file so a test can count them. No wall-clock assertions: waits poll the database
with generous timeouts and fail with the run's state.
"""
import json
import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
import redis as redis_lib
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from hosting.processes import redis_eviction_warning
from runs.engine import guards
from runs.engine.context.conversation import build_messages
from runs.engine.dispatch import run_dispatch
from runs.engine.loop import run_advance
from runs.lifecycle.housekeeping import runs_sweep
from runs.lifecycle.runs import run_cancel, run_create
from runs.models import Agent, Approval, Run, RunEvent, Step, ToolCall
from runs.supervision.approvals.decide import AlreadyDecided, approval_decide
from runs.tasks import advance_run
from tests.support import worker_tools
from tests.support.timeline_replay import mismatches
from tests.support.worker_tools import CRASH, PURGE, SLOW, executions
from toolsapp.models import Order, Ticket

pytestmark = pytest.mark.worker

FINISHED = (Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED)
WEATHER = "What's the weather in Lagos and London?"


# --- helpers -------------------------------------------------------------------------------------


def slow(n: int, *, seconds: float = 0.3, call_id: str | None = None) -> dict:
    call = {"name": SLOW, "arguments": {"n": n, "seconds": seconds}}
    if call_id:
        call["id"] = call_id
    return call


def start_run(agent, task, *, models=None, dispatch=True, **overrides) -> Run:
    if models:
        overrides["models"] = models
    run = run_create(agent=agent, task=task, overrides=overrides)
    if dispatch:
        run_dispatch(run_id=run.pk)
    return run


def assert_consistent_history(run: Run) -> None:
    """What the timeline and the model see: steps 1..N, each call with exactly one result."""
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.index for s in steps] == list(range(1, len(steps) + 1)), "step indexes have a gap or a duplicate"
    turns = [s for s in steps if s.kind == Step.Kind.TURN]
    assert [s.iteration for s in turns] == list(range(1, len(turns) + 1))
    calls = list(ToolCall.objects.filter(run=run))
    assert all(c.status in ToolCall.DONE_STATUSES for c in calls), [(c.call_id, c.status) for c in calls]
    ids = [c.call_id for c in calls]
    assert len(ids) == len(set(ids)), f"duplicate call ids: {ids}"
    for step in steps:
        asked = [c["id"] for c in step.message.get("tool_calls", [])]
        assert sorted(asked) == sorted(c.call_id for c in calls if c.step_id == step.pk)
    messages = build_messages(run)
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(answered) == sorted(ids), "every call id must have exactly one result in the history"
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "timeline event numbers have a gap"


def start_counts(path, run: Run, tool: str = SLOW) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in executions(path, tool=tool, run=run.pk):
        counts[row["call_id"]] = counts.get(row["call_id"], 0) + 1
    return counts


def assistant_counts(requests: list[dict]) -> list[int]:
    return [sum(1 for m in body["messages"] if m["role"] == "assistant") for body in requests]


def stranded_run(agent, model, *, calls, takeovers=0, status=Run.Status.RUNNING, approved=()):
    """A run as a worker that died leaves it: step 1 committed with its calls, an expired lease.

    calls: [(call_id, tool, arguments, call status)]; a succeeded call gets a result.
    approved: call ids that an operator had approved before the crash.
    """
    run = run_create(agent=agent, task="finish what the dead worker started", overrides={"models": [model]})
    now = timezone.now()
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
            for cid, tool, args, _ in calls
        ],
    }
    step = Step.objects.create(
        run=run, index=1, iteration=1, model=model, tool_choice="auto", finish_reason="tool_calls", message=message
    )
    for index, (cid, tool, args, call_status) in enumerate(calls):
        raw = json.dumps(args)
        call = ToolCall(
            run=run,
            step=step,
            index=index,
            call_id=cid,
            tool_name=tool,
            arguments=raw,
            args_hash=guards.args_hash(raw, django_settings.ARGS_HASH_KEY),
            idempotency_key=guards.idempotency_key(run.pk, step.index, index),
            status=call_status,
        )
        if call_status == ToolCall.Status.STARTED:
            call.attempts, call.started_at = 1, now
        if call_status == ToolCall.Status.SUCCEEDED:
            payload = {"ok": True, "result": {"n": args.get("n"), "done": True}}
            call.result, call.result_text, call.finished_at = payload, json.dumps(payload), now
            call.attempts, call.started_at = 1, now
        call.save()
        if cid in approved:
            call.approval = Approval.objects.create(
                tool_call=call, run=run, status=Approval.Status.APPROVED, decided_at=now, reason="looked fine"
            )
            call.save(update_fields=["approval"])
    Run.objects.filter(pk=run.pk).update(
        status=status,
        started_at=now - timedelta(seconds=30),
        iterations=1,
        lease_owner="a-worker-that-died",
        lease_expires_at=now - timedelta(seconds=1),
        takeovers=takeovers,
    )
    run.refresh_from_db()
    return run


def sweep_until_redispatched(run: Run, wait_for) -> None:
    """What beat does every few seconds: sweep, once the dead worker's lease has run out."""
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, lease_expires_at__lt=timezone.now()).exists(),
        timeout=60,
        message=f"the lease of run {run.pk} to run out",
    )
    assert run.pk in runs_sweep()["redispatched"]


# --- 1. launch ---------------------------------------------------------------------------------------


def test_launched_run_is_queued_until_a_real_worker_drives_it_to_succeeded(celery_worker_proc, demo_data, wait_for_run):
    celery_worker_proc()
    run = start_run(Agent.objects.get(name="demo"), WEATHER, dispatch=False)
    assert run.status == Run.Status.QUEUED
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    run_dispatch(run_id=run.pk)

    out = StringIO()
    call_command("run_agent", WEATHER, "--enqueue", "--json", stdout=out)
    enqueued = json.loads(out.getvalue())
    assert enqueued["status"] == Run.Status.QUEUED

    for run_id in (run.pk, enqueued["run_id"]):
        done = wait_for_run(run_id, *FINISHED)
        assert (done.status, done.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER)
        assert "Lagos: 31" in done.answer and "London: 12" in done.answer
        assert done.takeovers == 0
        assert_consistent_history(done)


# --- 2. kill -9 ----------------------------------------------------------------------------------


def test_kill_9_mid_run_resumes_from_the_last_committed_iteration(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    entries = [{"tool_calls": [slow(i, call_id=f"k{i}")]} for i in range(1, 6)] + [{"content": "all steps done"}]
    model = script(*entries, latency=0.5)
    first = celery_worker_proc()
    run = start_run(durable_agent, "five slow steps", models=[model])
    wait_for(lambda: Step.objects.filter(run=run).count() >= 2, message=lambda: "two committed steps")
    first.kill()
    time.sleep(0.5)  # let the database finish rolling back the dead connection

    at_kill = list(Step.objects.filter(run=run).order_by("index").values_list("pk", "index", "message"))
    done_at_kill = set(
        ToolCall.objects.filter(run=run, status=ToolCall.Status.SUCCEEDED).values_list("call_id", flat=True)
    )
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    assert len(at_kill) >= 2 and len(at_kill) < len(entries)

    second = celery_worker_proc(wait=False)  # starts while the dead worker's lease runs out
    sweep_until_redispatched(run, wait_for)
    second.wait_ready()
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "all steps done")
    assert run.takeovers == 1
    assert_consistent_history(run)
    after = list(Step.objects.filter(run=run).order_by("index").values_list("pk", "index", "message"))
    assert after[: len(at_kill)] == at_kill, "the committed iterations were kept as they were"
    # Completed calls never ran again; only the call in flight at the kill may have run twice.
    counts = start_counts(tool_log, run)
    for call_id in done_at_kill:
        assert counts[call_id] == 1, f"{call_id} was completed before the crash but executed {counts[call_id]} times"
    assert set(counts) == set(
        ToolCall.objects.filter(run=run, status=ToolCall.Status.SUCCEEDED).values_list("call_id", flat=True)
    )
    assert sum(1 for n in counts.values() if n > 1) <= 1 and max(counts.values()) <= 2
    # The new worker asked the model with exactly the committed history, then went on from there.
    k = len(at_kill)
    seen = assistant_counts(script.requests(model))
    assert seen[:k] == list(range(k))
    assert seen[k:] in (list(range(k, len(after))), [k] + list(range(k, len(after)))), seen


# --- 3. the crash window between side effect and record --------------------------------------------


class InProcess:
    """Drives a run with run_advance in this process (what a worker's task does)."""

    def drive(self, run, *statuses):
        run_advance(run_id=run.pk)
        run.refresh_from_db()
        assert run.status in statuses, (run.status, run.stop_reason, run.stop_detail)
        return run

    resume = drive


class ByWorker:
    """Lets the sweep and a real worker drive a run."""

    def __init__(self, wait_for, wait_for_run):
        self.wait_for, self.wait_for_run = wait_for, wait_for_run

    def drive(self, run, *statuses):
        sweep_until_redispatched(run, self.wait_for)
        return self.wait_for_run(run.pk, *statuses)

    def resume(self, run, *statuses):  # the dispatch was made by whoever resumed the run
        return self.wait_for_run(run.pk, *statuses)


@pytest.fixture(params=["in_process", "worker"])
def driver(request, wait_for, wait_for_run, broker):
    if request.param == "in_process":
        return InProcess()
    request.getfixturevalue("celery_worker_proc")()
    return ByWorker(wait_for, wait_for_run)


@pytest.mark.parametrize("effect_happened", [True, False], ids=["ticket-created", "ticket-not-created"])
def test_idempotent_call_left_started_is_run_again_once(
    driver, durable_agent, script, tool_log, effect_happened
):
    model = script({"content": "ticket filed"})
    ticket_args = {"title": "[TEST] crash window", "body": "created right before the crash", "priority": "low"}
    run = stranded_run(
        durable_agent,
        model,
        calls=[
            ("t1", "create_ticket", ticket_args, ToolCall.Status.STARTED),
            ("s1", SLOW, {"n": 1, "seconds": 0.1}, ToolCall.Status.STARTED),
        ],
    )
    key = guards.idempotency_key(run.pk, 1, 0)  # step 1, its first call (t1)
    if effect_happened:  # the side effect was made, the crash came before its result was recorded
        before = Ticket.objects.create(**ticket_args, idempotency_key=key, created_by_run=run.pk)

    run = driver.drive(run, *FINISHED)

    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "ticket filed")
    assert Ticket.objects.filter(title="[TEST] crash window").count() == 1
    ticket = Ticket.objects.get(idempotency_key=key)
    call = ToolCall.objects.get(run=run, call_id="t1")
    assert call.status == ToolCall.Status.SUCCEEDED
    assert call.result["result"]["ticket_id"] == ticket.pk
    assert call.result["result"]["created"] is (not effect_happened)
    if effect_happened:
        assert ticket.pk == before.pk
    assert start_counts(tool_log, run) == {"s1": 1}
    assert not Approval.objects.filter(run=run).exists()
    assert_consistent_history(run)


def test_destructive_call_left_started_waits_for_an_operator_instead_of_running_again(
    driver, durable_agent, script, tool_log
):
    model = script({"content": "purged after a second approval"})
    run = stranded_run(
        durable_agent,
        model,
        calls=[("p1", PURGE, {"target": "cache-7"}, ToolCall.Status.STARTED)],
        approved=("p1",),
    )

    run = driver.drive(run, Run.Status.AWAITING_APPROVAL, *FINISHED)

    assert run.status == Run.Status.AWAITING_APPROVAL
    call = ToolCall.objects.select_related("approval").get(run=run, call_id="p1")
    assert call.status == ToolCall.Status.AWAITING_APPROVAL
    approval = call.approval
    assert approval.status == Approval.Status.PENDING
    assert "interrupted" in approval.note.lower() and "crash" in approval.note.lower()
    # Asked again, the first decision is kept: who approved before the crash, and why.
    earlier = call.approvals.exclude(pk=approval.pk).get()
    assert (earlier.status, earlier.reason) == (Approval.Status.APPROVED, "looked fine")
    assert executions(tool_log, tool=PURGE, run=run.pk) == [], "the purge must not run again on its own"
    assert script.requests(model) == []

    # The operator checks and approves: it runs exactly once more, and the run finishes.
    user = get_user_model().objects.create_user("operator")
    approval_decide(approval_id=approval.pk, user=user, approve=True)  # hands the run to the workers
    run = driver.resume(run, *FINISHED)
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "purged after a second approval")
    assert len(executions(tool_log, tool=PURGE, run=run.pk)) == 1
    assert_consistent_history(run)


def test_kill_9_mid_call_under_approve_all_waits_for_a_person_instead_of_running_it_again(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    # Launched with --approve-all: the purge is approved automatically the first time. The worker
    # dies while it runs, so whether it took effect is unknown: no policy may approve it again.
    model = script({"tool_calls": [{"id": "p1", "name": PURGE, "arguments": {"target": "cache-9", "seconds": 3}}]},
                   {"content": "purged"})
    first = celery_worker_proc()
    run = run_create(agent=durable_agent, task="purge cache-9", overrides={"models": [model]}, approval_policy="approve")
    run_dispatch(run_id=run.pk)
    wait_for(lambda: executions(tool_log, tool=PURGE, run=run.pk), message="the purge to start")
    first.kill()
    time.sleep(0.5)  # let the database finish rolling back the dead connection
    assert ToolCall.objects.get(run=run, call_id="p1").status == ToolCall.Status.STARTED

    second = celery_worker_proc(wait=False)
    sweep_until_redispatched(run, wait_for)
    second.wait_ready()
    run = wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL, *FINISHED)

    assert run.status == Run.Status.AWAITING_APPROVAL
    call = ToolCall.objects.select_related("approval").get(run=run, call_id="p1")
    assert (call.status, call.approval.status, call.approval.automatic) == (
        ToolCall.Status.AWAITING_APPROVAL, Approval.Status.PENDING, False)
    assert "outcome unknown" in call.approval.note.lower()
    assert len(executions(tool_log, tool=PURGE, run=run.pk)) == 1, "the purge must not run again on its own"


# --- 4. duplicate deliveries -------------------------------------------------------------------


def test_duplicate_deliveries_to_two_workers_never_run_an_iteration_twice(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    entries = [{"tool_calls": [slow(i, call_id=f"d{i}")]} for i in range(1, 5)] + [{"content": "four done"}]
    model = script(*entries, latency=0.3)
    for worker in [celery_worker_proc(concurrency=4, wait=False) for _ in range(2)]:
        worker.wait_ready()
    run = start_run(durable_agent, "four steps, delivered many times", models=[model], dispatch=False)
    for _ in range(4):
        advance_run.delay(run.pk)
    wait_for(lambda: Step.objects.filter(run=run).count() >= 2, message="two steps")
    for _ in range(2):  # late duplicates, while the run is being driven
        advance_run.delay(run.pk)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "four done")
    assert run.takeovers == 0
    assert Step.objects.filter(run=run).count() == 5
    assert len(script.requests(model)) == 5, "the model was asked once per iteration"
    assert start_counts(tool_log, run) == {f"d{i}": 1 for i in range(1, 5)}
    step_events = [d["index"] for d in RunEvent.objects.filter(run=run, kind="step").order_by("seq").values_list("data", flat=True)]
    assert step_events == [1, 2, 3, 4, 5], "each step is in the timeline exactly once"
    assert_consistent_history(run)
    assert mismatches(run.pk) == []


def test_concurrent_run_advance_in_threads_drives_each_iteration_once(durable_agent, script, tool_log):
    entries = [{"tool_calls": [slow(i, seconds=0.1, call_id=f"t{i}")]} for i in range(1, 4)] + [{"content": "three done"}]
    model = script(*entries, latency=0.2)
    run = start_run(durable_agent, "raced by threads", models=[model], dispatch=False)
    barrier = threading.Barrier(4)
    results, errors = [], []

    def deliver():
        try:
            barrier.wait()
            results.append(run_advance(run_id=run.pk))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sum(r is not None for r in results) == 1, "exactly one delivery drives the run"
    run.refresh_from_db()
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "three done")
    assert len(script.requests(model)) == 4
    assert start_counts(tool_log, run) == {"t1": 1, "t2": 1, "t3": 1}
    assert_consistent_history(run)


def test_worker_whose_lease_was_taken_over_records_nothing(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    # A worker hangs (SIGSTOP) while it waits for the model: its lease runs out, the sweep hands
    # the run to another worker, which finishes it. When the first one wakes up with its answer,
    # it must not record it, nor run its tools: the fenced writes see it lost the lease.
    model = script(
        {"latency": 2, "tool_calls": [slow(1, call_id="late")]},
        {"tool_calls": [slow(2, call_id="b2")]},
        {"content": "done by the second worker"},
        latency=0.1,
    )
    # Concurrency 1: a busy worker takes no more messages, so the sweep's goes to the other one.
    workers = [celery_worker_proc(concurrency=1, wait=False) for _ in range(2)]
    for worker in workers:
        worker.wait_ready()
    run = start_run(durable_agent, "slow first answer", models=[model])
    wait_for(lambda: len(script.requests(model)) == 1, message="the first model request")
    (hung,) = [w for w in workers if "advance_run[" in w.log()]
    hung.freeze()
    sweep_until_redispatched(run, wait_for)
    run = wait_for_run(run.pk, *FINISHED)
    hung.thaw()
    wait_for(lambda: "lease_lost" in hung.log(), timeout=30, message="the hung worker to notice it lost the lease")

    run.refresh_from_db()
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "done by the second worker")
    assert run.takeovers == 1
    assert not ToolCall.objects.filter(run=run, call_id="late").exists()
    assert start_counts(tool_log, run) == {"b2": 1}
    assert Step.objects.filter(run=run).count() == 2
    assert_consistent_history(run)


def test_tool_running_longer_than_the_lease_is_not_handed_to_another_worker(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    # A destructive, non-idempotent call (approved by policy) that runs 5 s, within its 10 s
    # timeout, with RUN_LEASE_SECONDS=3: the lease must cover the call while it runs, so the
    # periodic sweep does not hand the run to another worker that would take it for a crash.
    from toolsapp.models import Tool

    Tool.objects.filter(name=PURGE).update(timeout_seconds=10)
    model = script(
        {"tool_calls": [{"id": "long", "name": PURGE, "arguments": {"target": "big-cache", "seconds": 5}}]},
        {"content": "purged once"},
    )
    celery_worker_proc()
    run = run_create(
        agent=durable_agent, task="one long purge", overrides={"models": [model]}, approval_policy="approve"
    )
    run_dispatch(run_id=run.pk)
    wait_for(lambda: executions(tool_log, tool=PURGE, run=run.pk), message="the purge to start")
    deadline = time.monotonic() + 20
    while Run.objects.get(pk=run.pk).status == Run.Status.RUNNING and time.monotonic() < deadline:
        runs_sweep()  # beat's sweep, much more often than its 15 s so the test stays short
        time.sleep(0.5)
    run = wait_for_run(run.pk, *FINISHED, Run.Status.AWAITING_APPROVAL)

    notes = list(Approval.objects.filter(run=run).values_list("note", flat=True))
    outcome = (run.status, run.answer, run.takeovers, len(executions(tool_log, tool=PURGE, run=run.pk)))
    assert outcome == (Run.Status.SUCCEEDED, "purged once", 0, 1), (
        f"(status, answer, takeovers, purges) = {outcome}; approval notes: {notes}; "
        "the live worker's run was handed to another worker while the purge was running"
    )
    assert not any("crash" in note for note in notes)


# --- 5. Redis restarts ------------------------------------------------------------------------------


def test_redis_restart_mid_run_the_run_completes_and_the_worker_keeps_serving(
    celery_worker_proc, durable_agent, own_redis, script, tool_log, wait_for, wait_for_run
):
    entries = [{"tool_calls": [slow(i, call_id=f"r{i}")]} for i in range(1, 5)] + [{"content": "survived redis"}]
    model = script(*entries, latency=0.5)
    worker = celery_worker_proc(redis_url=own_redis.url(0))
    running = start_run(durable_agent, "across a redis restart", models=[model])
    wait_for(lambda: Step.objects.filter(run=running).count() >= 1, message="the first step")

    own_redis.kill()
    time.sleep(0.5)
    own_redis.start()

    running = wait_for_run(running.pk, *FINISHED)
    assert (running.status, running.answer) == (Run.Status.SUCCEEDED, "survived redis")
    assert start_counts(tool_log, running) == {f"r{i}": 1 for i in range(1, 5)}
    assert_consistent_history(running)

    # The worker is still there for the next run.
    fatal = [line for line in worker.log().splitlines() if "Unrecoverable error" in line]
    assert not fatal, f"the worker died when Redis went away with a run in flight: {fatal}"
    following = start_run(Agent.objects.get(name="demo"), WEATHER)
    following = wait_for_run(following.pk, *FINISHED, timeout=30)
    assert following.status == Run.Status.SUCCEEDED
    assert worker.alive


def test_run_queued_while_redis_is_down_is_swept_and_completes(
    celery_worker_proc, demo_data, own_redis, settings, wait_for, wait_for_run
):
    celery_worker_proc(redis_url=own_redis.url(0))
    own_redis.kill()
    queued = start_run(Agent.objects.get(name="demo"), WEATHER, dispatch=False)
    try:
        run_dispatch(run_id=queued.pk)  # fails: Redis is down; the run is committed all the same
    except Exception:
        pass
    own_redis.start()
    assert Run.objects.get(pk=queued.pk).status == Run.Status.QUEUED

    # Beat's sweep hands out runs queued for longer than RUN_REQUEUE_AFTER_SECONDS, not before.
    settings.RUN_REQUEUE_AFTER_SECONDS = 60
    assert queued.pk not in runs_sweep()["redispatched"]
    settings.RUN_REQUEUE_AFTER_SECONDS = 1
    wait_for(
        lambda: Run.objects.get(pk=queued.pk).created_at < timezone.now() - timedelta(seconds=1.5), message="1.5 s"
    )
    assert queued.pk in runs_sweep()["redispatched"]
    queued = wait_for_run(queued.pk, *FINISHED)
    assert queued.status == Run.Status.SUCCEEDED and "Lagos: 31" in queued.answer
    assert_consistent_history(queued)


def test_approval_decided_while_redis_is_down_still_resumes_the_run(
    celery_worker_proc, demo_data, alice, own_redis, settings, wait_for, wait_for_run
):
    worker = celery_worker_proc(redis_url=own_redis.url(0))
    run = start_run(Agent.objects.get(name="demo"), "Cancel order ORD-1001")
    run = wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL, *FINISHED)
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    # The worker is idle again (its task acknowledged) before Redis goes away: this test is about
    # the operator's decision, not about a task in flight (see the test above for that).
    broker_db = redis_lib.Redis.from_url(own_redis.url(0))
    wait_for(
        lambda: " succeeded in " in worker.log() and broker_db.hlen("unacked") == 0, message="the task to be acknowledged"
    )

    own_redis.kill()
    try:
        approval_decide(approval_id=approval.pk, user=alice, approve=True)
    except Exception as exc:  # the decision is committed before the hand-off to the workers fails
        print(f"approval_decide raised {type(exc).__module__}.{type(exc).__name__}: {exc}")
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.APPROVED
    own_redis.start()

    # Beat's sweep is what hands out runs whose message was lost.
    settings.RUN_REQUEUE_AFTER_SECONDS = 1
    time.sleep(1.5)
    assert run.pk in runs_sweep()["redispatched"], "nothing hands the approved run back to a worker"
    run = wait_for_run(run.pk, *FINISHED)
    assert run.status == Run.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"


# --- 6. eviction warning --------------------------------------------------------------------------


def test_redis_eviction_warning_flags_an_evicting_redis(redis_factory, redis_server):
    lru = redis_factory("--maxmemory-policy", "allkeys-lru")
    warning = redis_eviction_warning(lru.url(0))
    assert warning and "allkeys-lru" in warning and "noeviction" in warning
    assert redis_lib.Redis.from_url(redis_server.url(0)).config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    assert redis_eviction_warning(redis_server.url(0)) is None


# --- 7. expired leases and poisoned runs ------------------------------------------------------------


def test_running_run_with_an_expired_lease_is_swept_and_finished(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    model = script({"tool_calls": [slow(2, call_id="s2")]}, {"content": "finished after the takeover"})
    run = stranded_run(durable_agent, model, calls=[("s1", SLOW, {"n": 1}, ToolCall.Status.SUCCEEDED)])
    celery_worker_proc()
    sweep_until_redispatched(run, wait_for)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer, run.takeovers) == (Run.Status.SUCCEEDED, "finished after the takeover", 1)
    assert start_counts(tool_log, run) == {"s2": 1}, "the call done before the crash did not run again"
    first = script.requests(model)[0]["messages"]
    assert [m.get("tool_call_id") for m in first if m["role"] == "tool"] == ["s1"]
    assert_consistent_history(run)


def test_run_taken_over_too_often_fails_as_worker_lost_instead_of_looping(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    model = script({"content": "never asked"})
    run = stranded_run(
        durable_agent,
        model,
        calls=[("s1", SLOW, {"n": 1}, ToolCall.Status.PENDING)],
        takeovers=celery_worker_proc.max_takeovers,
    )
    celery_worker_proc()
    sweep_until_redispatched(run, wait_for)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.WORKER_LOST)
    assert run.takeovers == celery_worker_proc.max_takeovers + 1
    assert "lost" in run.stop_detail.lower()
    assert script.requests(model) == [] and start_counts(tool_log, run) == {}
    assert ToolCall.objects.get(run=run, call_id="s1").status == ToolCall.Status.SKIPPED
    assert run.pk not in runs_sweep()["redispatched"]
    assert_consistent_history(run)


def test_a_run_that_kills_every_worker_stops_after_the_takeover_cap(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    # A real poison: the tool kills the worker process that runs it, every time. Three workers,
    # at most one takeover allowed: two die, the third ends the run instead of dying too.
    model = script({"tool_calls": [{"id": "boom", "name": CRASH, "arguments": {"n": 1}}]})
    crash_env = {worker_tools.CRASH_ENV: "1", "RUN_MAX_TAKEOVERS": "1", "RUN_LEASE_SECONDS": "1"}
    workers = [celery_worker_proc(env=crash_env, wait=False) for _ in range(3)]
    for worker in workers:
        worker.wait_ready()
    run = start_run(durable_agent, "poisoned", models=[model])
    for dead in (1, 2):
        wait_for(
            lambda: sum(not w.alive for w in workers) == dead, message=f"the poisoned tool to kill worker #{dead}"
        )
        sweep_until_redispatched(run, wait_for)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.stop_reason, run.takeovers) == (Run.Status.FAILED, Run.StopReason.WORKER_LOST, 2)
    assert sum(w.alive for w in workers) == 1, "the last worker ended the run instead of running the poison again"
    assert len(executions(tool_log, tool=CRASH, run=run.pk)) == 2
    assert len(script.requests(model)) == 1
    assert run.pk not in runs_sweep()["redispatched"]
    assert_consistent_history(run)


# --- 8. cancel ----------------------------------------------------------------------------------------


def test_cancel_a_queued_run_ends_it_at_once(demo_data):
    run = start_run(Agent.objects.get(name="demo"), WEATHER, dispatch=False)
    run = run_cancel(run=run)
    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.CANCELLED)
    assert run.finished_at is not None and run.lease_owner == ""
    assert run_advance(run_id=run.pk) is None, "a late delivery does not revive it"
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and not Step.objects.filter(run=run).exists()


def test_cancel_a_running_run_stops_it_at_the_next_check(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    model = script(
        {"tool_calls": [slow(1, seconds=1.0, call_id="c1"), slow(2, seconds=1.0, call_id="c2"), slow(3, seconds=1.0, call_id="c3")]},
        {"tool_calls": [slow(4, call_id="c4")]},
        {"content": "should not get here"},
        latency=0.2,
    )
    celery_worker_proc()
    run = start_run(durable_agent, "cancel me", models=[model])
    wait_for(lambda: executions(tool_log, tool=SLOW, run=run.pk), message="the first call to start")
    returned = run_cancel(run=run)
    assert returned.status in (Run.Status.RUNNING, Run.Status.CANCELLED) and returned.cancel_requested
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.CANCELLED)
    assert start_counts(tool_log, run) == {"c1": 1}, "no call starts after the cancel"
    statuses = dict(ToolCall.objects.filter(run=run).values_list("call_id", "status"))
    assert statuses == {"c1": ToolCall.Status.SUCCEEDED, "c2": ToolCall.Status.SKIPPED, "c3": ToolCall.Status.SKIPPED}
    assert len(script.requests(model)) == 1, "the model is not asked again"
    assert_consistent_history(run)


def test_cancel_a_run_awaiting_approval_ends_it_and_its_approval(launch, alice):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.PENDING

    run = run_cancel(run=run)
    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.CANCELLED)
    approval.refresh_from_db()
    assert approval.status != Approval.Status.PENDING
    assert not Approval.objects.filter(status=Approval.Status.PENDING).exists()
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SKIPPED
    with pytest.raises(AlreadyDecided):
        approval_decide(approval_id=approval.pk, user=alice, approve=True)
    assert Order.objects.get(order_id="ORD-1001").status == "open"
    assert_consistent_history(run)


# --- 9. waiting for an operator holds no worker ---------------------------------------------------


def test_waiting_for_approval_holds_no_worker_and_approval_resumes_the_run(
    celery_worker_proc, demo_data, wait_for, wait_for_run
):
    celery_worker_proc(concurrency=1)
    demo = Agent.objects.get(name="demo")
    parked = start_run(demo, "Cancel order ORD-1001")
    parked = wait_for_run(parked.pk, Run.Status.AWAITING_APPROVAL, *FINISHED)
    assert parked.status == Run.Status.AWAITING_APPROVAL
    wait_for(lambda: Run.objects.get(pk=parked.pk).lease_owner == "", message="the worker to let go of the run")

    other = start_run(demo, WEATHER)
    other = wait_for_run(other.pk, *FINISHED)
    assert other.status == Run.Status.SUCCEEDED, "the only worker thread was not held by the waiting run"

    operator = get_user_model().objects.create_user("operator")
    approval = Approval.objects.get(run=parked, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=operator, approve=True, reason="customer asked")
    parked = wait_for_run(parked.pk, *FINISHED)

    assert (parked.status, parked.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER)
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"
    call = ToolCall.objects.get(run=parked, tool_name="cancel_order")
    assert call.status == ToolCall.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1001").cancel_idempotency_key == call.idempotency_key
    assert Approval.objects.get(pk=approval.pk).decided_by == operator
    assert_consistent_history(parked)


# --- 10. show_run --------------------------------------------------------------------------------------


def _json_command(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def _shape(data: dict) -> dict:
    """The keys of a run_agent/show_run JSON object, its usage, its steps and their calls."""
    steps = data["steps"]
    return {
        "run": set(data),
        "usage": set(data["usage"]),
        "step": set().union(*(set(s) for s in steps)) if steps else None,
        "call": set().union(*(set(c) for s in steps for c in s["calls"])) if steps else None,
    }


def test_show_run_json_has_the_shape_of_run_agent_json(demo_data, broker):
    finished = _json_command("run_agent", WEATHER)
    assert finished["status"] == Run.Status.SUCCEEDED
    assert _json_command("show_run", str(finished["run_id"])) == finished

    parked = _json_command("run_agent", "Cancel order ORD-1001")
    assert parked["status"] == Run.Status.AWAITING_APPROVAL
    assert _json_command("show_run", str(parked["run_id"])) == parked

    enqueued = _json_command("run_agent", WEATHER, "--enqueue")
    queued = _json_command("show_run", str(enqueued["run_id"]))
    assert queued["status"] == Run.Status.QUEUED and queued["steps"] == []
    assert _shape(parked) == _shape(finished)
    assert {k: v for k, v in _shape(queued).items() if v is not None} == {
        "run": _shape(finished)["run"],
        "usage": _shape(finished)["usage"],
    }
