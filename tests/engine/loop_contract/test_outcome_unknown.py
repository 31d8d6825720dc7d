"""A call that may have taken effect is never treated as one that did not: after a crash it waits
for a person whatever the run's policy, a run that ends while it runs records its outcome as
unknown, and a timeout of a call that is not safe to repeat is reported as such to the model."""
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from runs.engine import guards
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_cancel, run_create
from runs.models import Agent, Approval, Run, Step, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import REC, call, calls, one_call, result_for

UNKNOWN = ToolCall.Status.UNKNOWN


def left_started(script, tool: str, *, approval_policy: str = "ask") -> Run:
    """A run as a worker killed mid-call leaves it: `tool` marked started, no result, lease expired."""
    model = script({"content": "finished after the crash"})
    run = run_create(agent=Agent.objects.get(name="demo"), task="do it once", approval_policy=approval_policy,
                     overrides={"models": [model], "tools": [tool], "summarize_on_stop": False})
    arguments = json.dumps({"n": 1})
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": tool, "arguments": arguments}}]}
    step = Step.objects.create(run=run, index=1, iteration=1, model=model, finish_reason="tool_calls", message=message)
    now = timezone.now()
    ToolCall.objects.create(
        run=run, step=step, index=0, call_id="c1", tool_name=tool, arguments=arguments,
        args_hash=guards.args_hash(arguments, settings.ARGS_HASH_KEY), idempotency_key=guards.idempotency_key(run.pk, 1, 0),
        status=ToolCall.Status.STARTED, attempts=1, started_at=now,
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started_at=now, iterations=1,
                                         lease_owner="a-dead-worker", lease_expires_at=now - timedelta(seconds=1))
    return run


# --- after a crash, a person decides --------------------------------------------------------------


@pytest.mark.parametrize("policy", ["approve", "reject"])
@pytest.mark.parametrize("tool", ["probe_once", "purge_once"])
def test_a_call_left_started_by_a_crash_waits_for_a_person_whatever_the_policy(script, tool, policy):
    run = left_started(script, tool, approval_policy=policy)

    run_advance(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL
    call_row = ToolCall.objects.select_related("approval").get(run=run)
    assert call_row.status == ToolCall.Status.AWAITING_APPROVAL
    approval = call_row.approval
    assert (approval.status, approval.automatic) == (Approval.Status.PENDING, False)
    assert "outcome unknown" in approval.note.lower()
    assert REC.count("contract_probe") == 0, "it must not run again without a person"


def test_a_call_left_started_and_not_run_again_by_a_person_has_an_unknown_outcome(script, no_dispatch, alice):
    run = left_started(script, "probe_once")
    run_advance(run_id=run.pk)
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)

    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="I will check by hand")
    run_advance(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "finished after the crash")
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == UNKNOWN
    assert "outcome unknown" in call_row.error and "I will check by hand" in call_row.error
    assert REC.count("contract_probe") == 0


# --- a run that ends while a call is started ------------------------------------------------------


def test_cancelling_a_run_whose_call_was_started_records_its_outcome_as_unknown(script):
    run = left_started(script, "probe_once")

    run = run_cancel(run=run)

    assert run.status == Run.Status.CANCELLED
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == UNKNOWN
    assert call_row.error.startswith("outcome unknown") and "may have taken effect" in call_row.error


def test_cancelling_a_run_waiting_on_a_call_interrupted_by_a_crash_records_its_outcome_as_unknown(script):
    run = left_started(script, "probe_once")
    run_advance(run_id=run.pk)  # asked about again: awaiting approval

    run = run_cancel(run=run)

    assert run.status == Run.Status.CANCELLED
    assert ToolCall.objects.get(run=run).status == UNKNOWN
    assert Approval.objects.get(run=run).status == Approval.Status.CLOSED


def test_an_internal_error_after_a_call_took_effect_records_its_outcome_as_unknown(launch, script, monkeypatch):
    from runs.engine.storage.records import Recorder

    record = Recorder.call_update

    def database_gone(self, call_row, status, **kwargs):
        if status == ToolCall.Status.SUCCEEDED:  # the effect happened; its record fails
            raise DatabaseError("server closed the connection unexpectedly")
        return record(self, call_row, status, **kwargs)

    monkeypatch.setattr(Recorder, "call_update", database_gone)
    model = script(calls(call("probe_once", {"n": 1}, "c1")), {"content": "never asked"})

    run = launch("do it once", models=[model], tools=["probe_once"], summarize_on_stop=False)

    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.INTERNAL_ERROR)
    assert REC.count("contract_probe") == 1
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == UNKNOWN and "outcome unknown" in call_row.error


# --- timeouts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool,policy", [("stuck_effect", "ask"), ("stuck_destructive", "approve")])
def test_a_timeout_of_a_call_not_safe_to_repeat_is_an_unknown_outcome_the_model_is_told(launch, script, tool, policy):
    run, _, result = one_call(launch, script, tool, {}, tools=[tool], approval_policy=policy)

    assert ToolCall.objects.get(run=run).status == UNKNOWN
    assert result["ok"] is False and result["outcome"] == "unknown"
    assert "may still take effect" in result["error"] and "not call it again blindly" in result["error"]
    assert run.status == Run.Status.SUCCEEDED


def test_a_timeout_of_an_idempotent_call_is_a_failed_call_the_model_may_retry(launch, script):
    # "stuck" is idempotent and not destructive: running it again cannot do harm twice.
    run, requests, result = one_call(launch, script, "stuck", {}, tools=["stuck"])

    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == ToolCall.Status.FAILED and "timed out" in call_row.error
    assert result["ok"] is False and "timed out" in result["error"]
    assert "outcome" not in result and "may still take effect" not in result["error"]
    assert run.status == Run.Status.SUCCEEDED and run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert not Approval.objects.filter(tool_call=call_row).exists(), "a safe timeout asks nobody"


def test_a_hung_handler_in_one_run_does_not_starve_the_calls_of_another(launch, script):
    # More hung calls than the tool threads of this process (as many as the old pool had).
    hung = 8 + max(4, settings.TOOL_PARALLEL_WORKERS * 4)
    first = script(calls(*[call("hang", {"n": n}, f"h{n}") for n in range(hung)]), {"content": "gave up"})
    run = launch("hang them all", models=[first], tools=["hang"], summarize_on_stop=False)
    assert run.status == Run.Status.SUCCEEDED
    assert set(ToolCall.objects.filter(run=run).values_list("status", flat=True)) <= {UNKNOWN, ToolCall.Status.FAILED}
    assert not REC.release.is_set(), "the handlers still hang"

    second = script(calls(call("probe_quick", {"n": 1}, "p1"), call("hang", {"n": 99}, "h99")), {"content": "done"})
    other = launch("another run", models=[second], tools=["probe_quick", "hang"], summarize_on_stop=False)

    assert other.status == Run.Status.SUCCEEDED
    request = script.requests(second)[1]
    assert result_for(request, "p1") == {"ok": True, "result": {"n": 1, "seen": True}}
    # The hung tool itself is refused at once, with a reason, instead of hanging one more thread.
    refused = result_for(request, "h99")
    assert refused["ok"] is False and "not answering" in refused["error"] and "was not run" in refused["error"]
    assert ToolCall.objects.get(run=other, call_id="h99").status == ToolCall.Status.FAILED
