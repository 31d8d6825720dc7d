"""Fault matrix: the database connection under the driver dies in the middle of an iteration
(after the step is committed, while its tool runs, before the result is recorded).

PostgreSQL: the backends of the test database are terminated (pg_terminate_backend), as a
database restart or a failover does. SQLite: the driver's connection is closed under it. Either
the driver gives up (its task fails; like a Celery worker, the process drops the broken
connection; the sweep hands the run out once its lease ran out, and a new driver finishes it from
the rows, running the cut idempotent call again), or, when the pool hands its error path a live
connection (PostgreSQL, depending on what the pool holds), it ends the run at once. Both keep
every committed step and a timeline equal to the rows. The second test makes one write fail
deterministically, to show what the ending path records about a call that ran.
"""
import threading

import pytest
from django.db import DatabaseError, OperationalError, connection, connections
from django.utils import timezone

from runs.models import Agent, Run, RunEvent, Step, ToolCall
from runs.services.housekeeping import runs_sweep
from runs.services.loop import run_advance
from runs.services.runs import run_create
from runs.tests.test_worker_durability import assert_consistent_history
from runs.tests.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

CUT = "fm_cut_db"
_state = {"driver": None, "cut": False, "runs": []}
_lock = threading.Lock()


@python_handler(CUT)
def cut_the_database(args, ctx):
    with _lock:
        _state["runs"].append(args["n"])
        first = not _state["cut"]
        _state["cut"] = True
    if first:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # this tool thread's own connection survives
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        else:
            _state["driver"].connection.close()  # the driver thread's sqlite3 connection
    connection.close()
    return {"n": args["n"], "ok": True}


@pytest.fixture
def cut_agent(demo_data):
    Tool.objects.create(
        name=CUT, description="Cuts the database connection of the driver the first time.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        destructive=False, idempotent=True, parallel_safe=False, timeout_seconds=1, kind="python", handler=CUT,
    )
    agent = Agent.objects.create(name="fm-db", summarize_on_stop=False, max_iterations=10)
    agent.tools.set(Tool.objects.filter(name__in=[CUT, "get_weather"]))
    _state.update(driver=connections["default"], cut=False, runs=[])
    return agent


def test_a_database_connection_lost_mid_iteration_leaves_a_run_that_ends_or_resumes_and_loses_nothing(
    cut_agent, script, settings, monkeypatch, wait_for
):
    settings.RUN_LEASE_SECONDS = 1
    model = script(
        {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]},
        {"tool_calls": [{"id": "c2", "name": CUT, "arguments": {"n": 2}}]},
        {"content": "finished after the database came back"},
    )
    run = run_create(agent=cut_agent, task="survive a lost connection", overrides={"models": [model]})
    try:
        run_advance(run_id=run.pk)
    except DatabaseError as exc:  # a worker's task fails the same way; the run is left to the sweep
        print(f"the driver gave up: {type(exc).__name__}: {exc}")
    connection.close()  # what Celery does before its next task: drop an unusable connection

    run.refresh_from_db()
    assert _state["cut"]
    assert Step.objects.filter(run=run).count() == 2, "the committed steps are kept"
    if run.status != Run.Status.RUNNING:
        # PostgreSQL, when the pool hands the driver a live connection for its error path: the
        # run ends at once. (That the call which ran is then recorded "not executed" is the bug
        # shown deterministically by the test below.)
        assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.INTERNAL_ERROR)
        assert _state["runs"] == [2]
        assert_consistent_history(run)
        assert mismatches(run.pk) == []
        return
    assert ToolCall.objects.get(run=run, call_id="c2").status not in ToolCall.DONE_STATUSES

    dispatched = []
    monkeypatch.setattr("runs.services.housekeeping.run_dispatch", lambda run_id: dispatched.append(run_id))
    wait_for(lambda: Run.objects.filter(pk=run.pk, lease_expires_at__lt=timezone.now()).exists(), message="the lease to run out")
    assert run.pk in runs_sweep()["redispatched"]
    run = run_advance(run_id=run.pk)  # the worker that got the swept run

    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "finished after the database came back")
    assert _state["runs"] == [2, 2], "the cut call ran again once; nothing else ran twice"
    assert ToolCall.objects.get(run=run, call_id="c2").result == {"ok": True, "result": {"n": 2, "ok": True}}
    assert len(script.requests(model)) == 3
    assert RunEvent.objects.filter(run=run, kind="step").count() == 3
    assert_consistent_history(run)
    assert mismatches(run.pk) == []


# --- one failed write, then the connection works again --------------------------------------------

_fail_next_write = threading.Event()


@python_handler("fm_arm_db_failure")
def arm_db_failure(args, ctx):
    _fail_next_write.set()  # the driver's next write after this call fails, once
    return {"n": args["n"], "ok": True}


def fail_once(execute, sql, params, many, context):
    if _fail_next_write.is_set() and sql.lstrip().upper().startswith(("UPDATE", "INSERT")):
        _fail_next_write.clear()
        raise OperationalError("server closed the connection unexpectedly")
    return execute(sql, params, many, context)


def test_a_call_that_ran_is_never_recorded_as_not_executed_after_a_database_error(cut_agent, script):
    Tool.objects.create(
        name="fm_arm", description="Makes the driver's next write fail once.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        destructive=False, idempotent=True, parallel_safe=False, timeout_seconds=1, kind="python",
        handler="fm_arm_db_failure",
    )
    cut_agent.tools.add(Tool.objects.get(name="fm_arm"))
    model = script({"tool_calls": [{"id": "a1", "name": "fm_arm", "arguments": {"n": 1}}]}, {"content": "done"})
    run = run_create(agent=cut_agent, task="one failed write", overrides={"models": [model]})
    _fail_next_write.clear()
    with connection.execute_wrapper(fail_once):  # the driver runs in this thread
        try:
            run_advance(run_id=run.pk)
        except DatabaseError:
            pass
    run.refresh_from_db()
    call = ToolCall.objects.get(run=run, call_id="a1")
    assert call.status in (ToolCall.Status.SUCCEEDED, ToolCall.Status.UNKNOWN), (
        f"the call ran, but the run {run.status} records it as: {call.error}"
    )
