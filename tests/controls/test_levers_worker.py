"""Pause, a note and resume through a REAL Celery worker with one slot (see conftest.py): while a
run is paused its worker is free for another run; resumed, it goes on exactly where it stopped."""
import pytest

from runs.controls.levers import run_message, run_pause, run_resume
from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Run, Step
from tests.engine.workers.test_worker_durability import assert_consistent_history, slow, start_counts
from tests.support.timeline_replay import mismatches
from tests.support.worker_tools import SLOW

pytestmark = pytest.mark.worker


def start(agent, model: str) -> Run:
    run = run_create(agent=agent, task="count slowly", overrides={"models": [model], "max_iterations": 10})
    run_dispatch(run_id=run.pk)
    return run


def test_a_paused_run_frees_the_only_slot_and_resumes_where_it_stopped(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run, alice
):
    celery_worker_proc(concurrency=1, env={"RUN_WORKING_SLOTS": "1"})
    model = script(
        {"tool_calls": [slow(1, seconds=1.5, call_id="s1")]},
        {"tool_calls": [slow(2, seconds=0.2, call_id="s2")]},
        {"content": "counted to two"},
    )
    run = start(durable_agent, model)
    wait_for(lambda: start_counts(tool_log, run).get("s1"), timeout=60, message="the first slow call to start")
    run_pause(run_id=run.pk, user=alice)
    run = wait_for_run(run.pk, Run.Status.PAUSED, timeout=60)
    assert run.paused_by_name == "alice" and run.lease_owner == ""
    steps_when_paused = Step.objects.filter(run=run).count()

    # The worker's one slot is free: another run starts and ends while this one is paused.
    other = start(durable_agent, script({"content": "done meanwhile"}))
    wait_for_run(other.pk, Run.Status.SUCCEEDED, timeout=60)
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and Step.objects.filter(run=run).count() == steps_when_paused

    run_message(run_id=run.pk, user=alice, text="stop after two")
    requests_before = len(script.requests(model))
    run_resume(run_id=run.pk, user=alice)
    run = wait_for_run(run.pk, Run.Status.SUCCEEDED, timeout=60)

    assert run.answer == "counted to two"
    assert start_counts(tool_log, run, SLOW) == {"s1": 1, "s2": 1}  # no call ran again
    assert_consistent_history(run)
    requests = script.requests(model)
    resumed = requests[requests_before]  # the first request after the resume carries the note
    assert resumed["messages"][-1] == {"role": "user", "content": "stop after two"}
    assert sum(m.get("content") == "stop after two" for body in requests for m in body["messages"]) == len(
        requests) - requests_before
    lever_steps = Step.objects.filter(run=run, operator_messages__text="stop after two").values_list("index", flat=True)
    assert list(lever_steps) == [requests_before + 1]
    assert mismatches(run.pk) == [] and mismatches(other.pk) == []
