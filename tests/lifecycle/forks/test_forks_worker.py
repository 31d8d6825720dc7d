"""A fork through a real Celery worker: made over the API, handed out once committed, driven to
its end by the worker, and no copied call runs again (counted in the test tools' execution log)."""
import pytest

from runs.engine import guards
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Run
from tests.engine.loop_contract.support import call, calls, result_for
from tests.support.timeline_replay import mismatches
from tests.support.worker_tools import SLOW, executions
from tests.web.api.test_api import api

pytestmark = pytest.mark.worker


def slow(n: int, call_id: str) -> dict:
    return calls(call(SLOW, {"n": n, "seconds": 0}, call_id))


def test_a_worker_drives_a_fork_and_runs_only_its_new_calls(
    celery_worker_proc, durable_agent, script, alice, tool_log, wait_for_run
):
    model = script(slow(1, "s1"), slow(2, "s2"), slow(3, "s3"), {"content": "parent done"},
                   slow(5, "s5"), {"content": "fork done"})
    parent = run_create(agent=durable_agent, task="Count to three", overrides={"models": [model]})
    run_advance(run_id=parent.pk)
    assert Run.objects.get(pk=parent.pk).status == Run.Status.SUCCEEDED
    celery_worker_proc(concurrency=1)

    edited = '{"ok":true,"result":{"n":20}}'
    response = api(alice).post(f"/api/v1/runs/{parent.pk}/fork/",
                               {"step": 2, "edit": {"tool_result": {"call_id": "s2", "content": edited}}}, format="json")
    assert response.status_code == 201, response.json()
    fork = wait_for_run(response.json()["run_id"], *Run.FINISHED_STATUSES, timeout=120)

    assert (fork.status, fork.answer) == (Run.Status.SUCCEEDED, "fork done")
    ran = executions(tool_log, tool=SLOW)
    assert [(r["run"], r["args"]["n"]) for r in ran] == [(parent.pk, 1), (parent.pk, 2), (parent.pk, 3), (fork.pk, 5)]
    assert ran[-1]["key"] == guards.idempotency_key(fork.pk, 3, 0)
    assert result_for(script.requests(model)[4], "s2") == {"ok": True, "result": {"n": 20}}
    assert mismatches(fork.pk) == [] and mismatches(parent.pk) == []
