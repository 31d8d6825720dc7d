"""Fault matrix: the same advance_run task delivered several times, to two real workers, before
and while the run is driven. One driver: the model is asked once per iteration, each tool call
runs once, and the timeline has each step exactly once and equals the rows."""
import pytest

from runs.models import Run, RunEvent, Step
from runs.tasks import advance_run
from runs.tests.test_worker_durability import FINISHED, assert_consistent_history, slow, start_counts, start_run
from runs.tests.timeline_replay import mismatches

pytestmark = pytest.mark.worker


def test_duplicate_deliveries_make_one_driver_and_a_timeline_with_each_step_once(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    entries = [{"tool_calls": [slow(i, seconds=0.1, call_id=f"d{i}")]} for i in range(1, 4)] + [{"content": "three done"}]
    model = script(*entries, latency=0.3)
    for worker in [celery_worker_proc(concurrency=4, wait=False) for _ in range(2)]:
        worker.wait_ready()
    run = start_run(durable_agent, "delivered many times", models=[model], dispatch=False)
    for _ in range(3):
        advance_run.delay(run.pk)
    wait_for(lambda: Step.objects.filter(run=run).count() >= 1, message="the first step")
    for _ in range(3):  # late duplicates, while the run is being driven
        advance_run.delay(run.pk)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer, run.takeovers) == (Run.Status.SUCCEEDED, "three done", 0)
    assert len(script.requests(model)) == 4, "the model was asked once per iteration"
    assert start_counts(tool_log, run) == {"d1": 1, "d2": 1, "d3": 1}
    step_events = [d["index"] for d in RunEvent.objects.filter(run=run, kind="step").order_by("seq").values_list("data", flat=True)]
    assert step_events == [1, 2, 3, 4], "each step is in the timeline exactly once"
    assert_consistent_history(run)
    assert mismatches(run.pk) == []
