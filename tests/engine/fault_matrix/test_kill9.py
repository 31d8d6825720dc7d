"""Fault matrix: a worker killed with SIGKILL in the middle of a model call, of a tool call, and
between a tool's side effect and the record of its result.

Real Celery worker subprocesses (tests/conftest.py) drive the runs; a second worker takes
over once the sweep hands the run out again. The tools record every execution in files, so the
tests count effects per idempotency key, not just rows.
"""
import pytest
from django.contrib.auth import get_user_model

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Approval, Run, Step, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.engine.fault_matrix import effect_tools
from tests.engine.fault_matrix.effect_tools import DIE_ENV, EFFECT_LOG_ENV, KEYED, UNKEYED, effect_lines
from tests.engine.workers.test_worker_durability import (
    FINISHED,
    assert_consistent_history,
    slow,
    start_counts,
    start_run,
    sweep_until_redispatched,
)
from tests.support.timeline_replay import mismatches
from tests.support.worker_tools import SLOW, executions
from toolsapp.models import Tool

pytestmark = pytest.mark.worker


@pytest.fixture
def effect_log(tmp_path, monkeypatch):
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECT_LOG_ENV, str(path))
    return path


@pytest.fixture
def worker_env(effect_log):
    """The environment of a worker that also knows the effect tools; `dying` kills itself after one."""
    base = {"TOOL_MODULES": "tests.support.worker_tools,tests.engine.fault_matrix.effect_tools", EFFECT_LOG_ENV: str(effect_log)}
    return {"surviving": base, "dying": {**base, DIE_ENV: "1"}}


@pytest.fixture
def effect_agent(durable_agent):
    effect_tools.install(durable_agent)
    return durable_agent


def assert_timeline_equals_rows(run) -> None:
    problems = mismatches(run.pk)
    assert problems == [], "the timeline and the database disagree:\n" + "\n".join(problems)


def take_over(run, celery_worker_proc, wait_for, env=None):
    """A new worker, and the sweep handing it the dead worker's run once the lease ran out."""
    second = celery_worker_proc(env=env, wait=False)
    sweep_until_redispatched(run, wait_for)
    second.wait_ready()
    return second


def test_kill_9_mid_model_call_asks_again_with_the_committed_history(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    model = script(
        {"tool_calls": [slow(1, seconds=0.1, call_id="m1")]},
        {"latency": 30, "tool_calls": [slow(2, seconds=0.1, call_id="lost")]},  # the worker dies waiting for it
        {"tool_calls": [slow(2, seconds=0.1, call_id="m2")]},
        {"content": "answered after the crash"},
    )
    first = celery_worker_proc()
    run = start_run(durable_agent, "a model call cut by a crash", models=[model])
    wait_for(lambda: len(script.requests(model)) == 2, message="the second model request to be in flight")
    first.kill()
    assert Step.objects.filter(run=run).count() == 1

    take_over(run, celery_worker_proc, wait_for)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer, run.takeovers) == (Run.Status.SUCCEEDED, "answered after the crash", 1)
    assert not ToolCall.objects.filter(run=run, call_id="lost").exists(), "the lost answer left no trace"
    requests = script.requests(model)
    assert len(requests) == 4
    assert requests[2]["messages"] == requests[1]["messages"], "asked again with exactly the committed history"
    assert start_counts(tool_log, run) == {"m1": 1, "m2": 1}
    assert_consistent_history(run)
    assert_timeline_equals_rows(run)


def test_kill_9_mid_tool_call_runs_the_idempotent_call_again_once(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    Tool.objects.filter(name=SLOW).update(timeout_seconds=6)  # the lease covers it: keep it short
    model = script(
        {"tool_calls": [slow(1, seconds=0.1, call_id="t1")]},
        {"tool_calls": [slow(2, seconds=4, call_id="t2")]},
        {"content": "both calls answered"},
    )
    first = celery_worker_proc()
    run = start_run(durable_agent, "a tool call cut by a crash", models=[model])
    wait_for(lambda: executions(tool_log, tool=SLOW, run=run.pk)[-1:] and
             executions(tool_log, tool=SLOW, run=run.pk)[-1]["call_id"] == "t2", message="t2 to start")
    first.kill()
    # An idempotent call is not marked "started" before it runs: it has no result, and runs again.
    assert ToolCall.objects.get(run=run, call_id="t2").status == ToolCall.Status.PENDING
    assert executions(tool_log, tool=SLOW, run=run.pk, event="end")[-1]["call_id"] == "t1"

    take_over(run, celery_worker_proc, wait_for)
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer, run.takeovers) == (Run.Status.SUCCEEDED, "both calls answered", 1)
    assert start_counts(tool_log, run) == {"t1": 1, "t2": 2}, "only the call cut by the crash ran again, once"
    assert len(script.requests(model)) == 3, "the model was not asked again for the step it had answered"
    call = ToolCall.objects.get(run=run, call_id="t2")
    assert call.status == ToolCall.Status.SUCCEEDED and call.result == {"ok": True, "result": {"n": 2, "done": True}}
    assert not Approval.objects.filter(run=run).exists()
    assert_consistent_history(run)
    assert_timeline_equals_rows(run)


def test_kill_9_between_an_effect_and_its_record_leaves_one_effect_per_idempotency_key(
    celery_worker_proc, effect_agent, effect_log, worker_env, script, wait_for, wait_for_run
):
    model = script({"tool_calls": [{"id": "e1", "name": KEYED, "arguments": {"target": "row-1"}}]}, {"content": "done"})
    first = celery_worker_proc(env=worker_env["dying"])
    run = start_run(effect_agent, "one keyed effect", models=[model])
    wait_for(lambda: not first.alive, message="the worker to die right after the effect")
    assert len(effect_lines(effect_log, run=run.pk)) == 1
    call = ToolCall.objects.get(run=run, call_id="e1")
    assert call.status not in ToolCall.DONE_STATUSES and call.result is None, "no result was recorded"

    take_over(run, celery_worker_proc, wait_for, env=worker_env["surviving"])
    run = wait_for_run(run.pk, *FINISHED)

    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "done")
    starts = effect_lines(effect_log, event="start", run=run.pk)
    assert len(starts) == 2 and len({s["key"] for s in starts}) == 1, "run again with the same idempotency key"
    assert len(effect_lines(effect_log, run=run.pk)) == 1, "at most one effect per idempotency key"
    call = ToolCall.objects.get(run=run, call_id="e1")
    assert call.result == {"ok": True, "result": {"target": "row-1", "effect": "already made"}}
    assert_consistent_history(run)
    assert_timeline_equals_rows(run)


def _approved_unkeyed_effect_then_crash(policy, celery_worker_proc, agent, effect_log, worker_env, script,
                                        wait_for, wait_for_run):
    """A destructive, non-idempotent call approved (by a person or the run's policy) whose worker
    dies right after the effect; a second worker takes the run over. -> (run, model)."""
    model = script({"tool_calls": [{"id": "p1", "name": UNKEYED, "arguments": {"target": "row-9"}}]},
                   {"content": "told about the call"})
    first = celery_worker_proc(env=worker_env["dying"])
    run = run_create(agent=agent, task="one unkeyed effect on row-9", overrides={"models": [model]}, approval_policy=policy)
    run_dispatch(run_id=run.pk)
    if policy == "ask":
        wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL)
        operator = get_user_model().objects.create_user("operator-before-crash")
        approval_decide(approval_id=Approval.objects.get(run=run).pk, user=operator, approve=True)
    wait_for(lambda: not first.alive, message="the worker to die right after the effect")
    assert len(effect_lines(effect_log, run=run.pk)) == 1
    take_over(run, celery_worker_proc, wait_for, env=worker_env["surviving"])
    return wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL, *FINISHED), model


def test_kill_9_after_a_non_idempotent_effect_asks_a_person_again_and_nothing_runs_twice(
    celery_worker_proc, effect_agent, effect_log, worker_env, script, wait_for, wait_for_run
):
    run, model = _approved_unkeyed_effect_then_crash(
        "ask", celery_worker_proc, effect_agent, effect_log, worker_env, script, wait_for, wait_for_run
    )
    assert run.status == Run.Status.AWAITING_APPROVAL
    pending = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    assert "crash" in pending.note.lower()
    assert len(effect_lines(effect_log, run=run.pk)) == 1, "not run again without a person"

    # The operator checks, sees the effect already happened, and rejects the second attempt.
    operator = get_user_model().objects.create_user("operator-after-crash")
    approval_decide(approval_id=pending.pk, user=operator, approve=False, reason="it happened already")
    run = wait_for_run(run.pk, *FINISHED)
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "told about the call")
    assert len(effect_lines(effect_log, run=run.pk)) == 1
    assert "it happened already" in ToolCall.objects.get(run=run, call_id="p1").error
    assert_consistent_history(run)
    assert_timeline_equals_rows(run)


def test_kill_9_after_a_non_idempotent_effect_under_approve_all_still_asks_a_person(
    celery_worker_proc, effect_agent, effect_log, worker_env, script, wait_for, wait_for_run
):
    run, model = _approved_unkeyed_effect_then_crash(
        "approve", celery_worker_proc, effect_agent, effect_log, worker_env, script, wait_for, wait_for_run
    )
    assert len(effect_lines(effect_log, run=run.pk)) == 1, "the effect happened again without a person"
    assert run.status == Run.Status.AWAITING_APPROVAL
