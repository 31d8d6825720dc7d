"""A run's trace through REAL Celery workers (see conftest.py): a worker killed mid-run, another
that takes the run over, and a resume after an approval all add to one trace under one run span."""

import pytest

from runs.models import Approval, Run, ToolCall
from runs.observability.tracing import run_spans
from runs.supervision.approvals.decide import approval_decide
from tests.engine.workers.test_worker_durability import (
    FINISHED,
    slow,
    start_counts,
    start_run,
    sweep_until_redispatched,
)
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.worker_tools import PURGE

pytestmark = pytest.mark.worker


@pytest.fixture
def receiver():
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


def test_a_run_taken_over_after_a_kill_and_resumed_after_an_approval_stays_one_trace(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run, receiver, alice
):
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "agentsite-test",
    }
    model = script(
        {"tool_calls": [slow(1, seconds=0.1, call_id="k1")]},
        {"tool_calls": [slow(2, seconds=1.5, call_id="k2")]},
        {"tool_calls": [{"id": "p1", "name": PURGE, "arguments": {"target": "cache-3"}}]},
        {"content": "purged after the crash"},
    )
    first = celery_worker_proc(env=env)
    run = start_run(durable_agent, "two slow steps, then a purge", models=[model])
    agent_span = f"{run_spans.run_span_id(run.pk):016x}"

    # The first worker's committed steps reach the collector while the run goes on.
    wait_for(lambda: start_counts(tool_log, run).get("k2"), message="the second slow call to start")
    before_kill = receiver.wait_for(lambda spans: len([s for s in spans if s.name.startswith("chat ")]) == 2 and spans)
    assert {s.resource["process.pid"] for s in before_kill} == {first.pid}
    assert sorted(s.name for s in before_kill) == [f"chat {model}", f"chat {model}", "execute_tool durable_slow"]
    first.kill()

    second = celery_worker_proc(env=env, wait=False)
    sweep_until_redispatched(run, wait_for)
    second.wait_ready()
    run = wait_for_run(run.pk, Run.Status.AWAITING_APPROVAL, *FINISHED)
    assert run.status == Run.Status.AWAITING_APPROVAL, run.stop_detail
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=True)  # hands it to a worker
    run = wait_for_run(run.pk, *FINISHED)
    assert (run.status, run.answer, run.takeovers) == (Run.Status.SUCCEEDED, "purged after the crash", 1)

    spans = receiver.wait_for(lambda spans: any(not s.parent_id for s in spans) and spans)
    assert {s.trace_id for s in spans} == {f"{run_spans.trace_id(run.pk):032x}"}
    (root,) = [s for s in spans if not s.parent_id]
    assert root.span_id == agent_span and root.name == f"invoke_agent {durable_agent.name}"
    assert all(s.parent_id == agent_span for s in spans if s is not root)
    assert root.attributes["agentsite.run.takeovers"] == 1
    assert root.resource["process.pid"] == second.pid and root.resource["service.name"] == "agentsite-test"
    assert {s.resource["process.pid"] for s in spans} == {first.pid, second.pid}
    assert sorted(s.attributes["agentsite.step.index"] for s in spans if s.name.startswith("chat ")) == [1, 2, 3, 4]
    # Each call once, with its result: the call cut by the kill only from the worker that ran it again.
    tools = sorted(
        (s.attributes["gen_ai.tool.call.id"], s.attributes["agentsite.tool.status"])
        for s in spans
        if s.name.startswith("execute_tool ")
    )
    assert tools == [("k1", "succeeded"), ("k2", "succeeded"), ("p1", "succeeded")]
    purge = next(s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "p1")
    assert purge.attributes["agentsite.approval.status"] == "approved"
    assert purge.attributes["agentsite.tool.args_hash"] == ToolCall.objects.get(run=run, call_id="p1").args_hash
    assert [e[0] for e in purge.events] == ["agentsite.approval.requested", "agentsite.approval.decided"]
