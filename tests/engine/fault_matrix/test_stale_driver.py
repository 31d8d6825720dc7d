"""Fault matrix: a driver that lost its lease writes nothing more, even where no row collides.

A worker that hung past its lease comes back believing it still drives the run. Its next write
is fenced by the lease (`leases.fenced_update`); these tests make that write one that nothing
else would refuse (no step index taken by the new driver): ending the run, recording a call's
result, applying an operator's lever. Each must record nothing: no row changed, no event.
"""
import threading

import pytest
from django.db import connection

from runs.engine.leases import LeaseLost, lease_claim
from runs.engine.loop import _Driver, run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run, RunEvent, Step, ToolCall
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

pytestmark = pytest.mark.usefixtures("demo_data")
THIEF = "another-worker"


def take_over(run_id: int) -> None:
    """What the sweep and another worker do once the lease ran out: the lease is theirs."""
    Run.objects.filter(pk=run_id).update(lease_owner=THIEF)


@python_handler("stale_driver_takeover")
def _taken_over_while_running(args, ctx):
    take_over(ctx.run_id)  # the tool ran long; meanwhile the run was handed to another worker
    return {"done": True}


def new_run(models: list[str], tools: tuple[str, ...] = ()) -> Run:
    return run_create(agent=Agent.objects.get(name="demo"), task="stale driver",
                      overrides={"models": models, "tools": list(tools), "summarize_on_stop": False})


def snapshot(run_id: int) -> tuple:
    run = Run.objects.get(pk=run_id)
    calls = list(ToolCall.objects.filter(run_id=run_id).order_by("pk").values_list("status", "result", "error"))
    return (run.status, run.stop_reason, run.answer, run.iterations, run.event_seq, run.lease_owner,
            run.pause_requested, Step.objects.filter(run_id=run_id).count(), calls,
            RunEvent.objects.filter(run_id=run_id).count())


def test_a_stale_driver_whose_final_answer_arrives_after_a_takeover_does_not_end_the_run(script, wait_for):
    model = script({"content": "the stale driver's answer", "latency": 0.5})
    run = new_run([model])
    result = {}

    def drive():
        try:
            result["returned"] = run_advance(run_id=run.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=drive)
    thread.start()
    wait_for(lambda: len(script.requests(model)) == 1, message="the driver waits for the model")
    take_over(run.pk)
    before = snapshot(run.pk)
    thread.join(30)
    assert not thread.is_alive()

    assert result["returned"] is None, "the stale driver believed it still drove the run"
    assert snapshot(run.pk) == before
    run.refresh_from_db()
    assert (run.status, run.answer, run.lease_owner) == (Run.Status.RUNNING, "", THIEF)


def test_a_stale_driver_does_not_record_the_result_of_a_call_that_ran_during_the_takeover(script):
    Tool.objects.create(name="long_job", description="runs long", handler="stale_driver_takeover",
                        parameters={"type": "object", "properties": {}})
    model = script({"tool_calls": [{"id": "c1", "name": "long_job", "arguments": {}}]},
                   {"content": "must not be asked"})
    run = new_run([model], tools=("long_job",))

    assert run_advance(run_id=run.pk) is None
    call = ToolCall.objects.get(run=run)
    assert (call.status, call.result, call.finished_at) == (ToolCall.Status.PENDING, None, None)
    assert not RunEvent.objects.filter(run=run, kind="call").exists()
    assert len(script.requests(model)) == 1, "the stale driver asked the model again"
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.iterations) == (Run.Status.RUNNING, THIEF, 1)


@pytest.mark.parametrize("lever", ["pause", "stop"])
def test_a_stale_driver_does_not_apply_an_operators_lever_after_a_takeover(script, lever):
    run = new_run([script({"content": "unused"})])
    flags = {"pause_requested": True, "paused_by_name": "alice"} if lever == "pause" else {
        "stop_requested_by_name": "alice"}
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, **flags)
    assert lease_claim(run.pk, "stale")
    driver = _Driver(run.pk, "stale")  # it read the run and its levers, then hung past its lease
    take_over(run.pk)
    before = snapshot(run.pk)

    with pytest.raises(LeaseLost):
        driver.drive()

    assert snapshot(run.pk) == before
    assert not RunEvent.objects.filter(run=run, kind__in=("lever", "run")).exclude(
        seq__lte=before[4]).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.stop_reason in ("", None)


def test_a_second_delivery_while_a_live_lease_is_held_drives_nothing(script):
    # A duplicate `advance_run` message arrives while another worker drives the run: the claim is
    # one conditional UPDATE, refused while the lease is live, so nothing is asked or written.
    model = script({"content": "must not be asked"})
    run = new_run([model])
    assert lease_claim(run.pk, "the-driver")
    before = snapshot(run.pk)

    assert run_advance(run_id=run.pk) is None
    assert snapshot(run.pk) == before
    assert script.requests(model) == []
