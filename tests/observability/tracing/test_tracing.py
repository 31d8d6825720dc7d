"""Runs exported as OpenTelemetry traces to a real OTLP/HTTP receiver (tests/support/otlp_receiver.py),
driven by the real loop against the scripted demo model over HTTP."""

import sys
import threading
from datetime import timedelta

import pytest

from runs.controls import levers
from runs.controls.levers import run_message, run_pause, run_resume, run_stop
from runs.engine.loop import run_advance
from runs.models import Approval, Run, Step, ToolCall
from runs.observability.tracing import run_spans
from runs.supervision.approvals import decide
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import FAST, call, calls
from tests.support.otlp_receiver import OtlpReceiver
from toolsapp.executors.python import python_handler
from toolsapp.models import Order, Tool

WEATHER = [call("get_weather", {"city": "Lagos"}, "w1"), call("get_weather", {"city": "London"}, "w2")]
CANCEL = call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")


@pytest.fixture
def collector(settings):
    """start(mode="keep") -> a receiver this process's tracing exports to (reset before and after)."""
    from runs.observability.tracing import exporter as tracing

    receivers = []

    def start(mode: str = "keep", *, endpoint: str | None = None) -> OtlpReceiver:
        receiver = OtlpReceiver(mode).start()
        receivers.append(receiver)
        tracing.shutdown()
        settings.TRACES_ENDPOINT = endpoint or receiver.traces_url
        return receiver

    yield start
    for receiver in receivers:
        receiver.release()
    tracing.shutdown()
    for receiver in receivers:
        receiver.stop()


@pytest.fixture
def levers_here(monkeypatch):
    """No worker: a resume or a decision does not enqueue the run; the test drives it."""
    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)
    monkeypatch.setattr(levers, "run_dispatch", lambda run_id: None)


def flushed(receiver: OtlpReceiver):
    from runs.observability.tracing import exporter as tracing

    tracing.flush()
    return receiver.spans()


def by_name(spans, prefix: str):
    return [s for s in spans if s.name.startswith(prefix)]


def test_a_run_with_parallel_calls_a_fallback_an_approval_and_levers_is_one_trace_under_its_agent_span(
    collector, launch, script, alice, levers_here
):
    receiver = collector()
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    good = script(calls(*WEATHER), calls(CANCEL), {"content": "Cancelled ORD-1001; Lagos 31, London 12."})
    run = launch("Weather, then cancel ORD-1001", models=[bad, good])
    assert run.status == Run.Status.AWAITING_APPROVAL

    # While the run waits, its committed model calls and tool calls are already in the collector,
    # under the run's span that is not there yet (it comes when the run ends).
    early = flushed(receiver)
    assert sorted(s.name for s in early) == [
        f"chat {good}",
        f"chat {good}",
        "execute_tool get_weather",
        "execute_tool get_weather",
    ]
    agent_id = f"{run_spans.run_span_id(run.pk):016x}"
    assert {s.parent_id for s in early} == {agent_id}

    run_pause(run_id=run.pk, user=alice)
    run_message(run_id=run.pk, user=alice, text="the customer called back")
    run_resume(run_id=run.pk, user=alice)
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=True)
    run_advance(run_id=run.pk)  # a new driver, as a worker would after the decision
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED

    spans = receiver.wait_for(lambda spans: by_name(spans, "invoke_agent") and spans)
    assert len({s.trace_id for s in spans}) == 1 and spans[0].trace_id == f"{run_spans.trace_id(run.pk):032x}"
    (root,) = [s for s in spans if not s.parent_id]
    assert root.name == "invoke_agent demo" and root.span_id == agent_id
    assert all(s.parent_id == agent_id for s in spans if s is not root)
    assert len({s.span_id for s in spans}) == len(spans)
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "demo"
    assert root.attributes["agentsite.run.status"] == "succeeded"
    assert root.attributes["agentsite.run.stop_reason"] == "final_answer"
    assert root.attributes["gen_ai.usage.input_tokens"] == run.tokens_in > 0
    assert root.attributes["gen_ai.usage.output_tokens"] == run.tokens_out > 0
    assert not root.error
    assert root.start_ns <= min(s.start_ns for s in spans) and root.end_ns >= max(s.end_ns for s in spans)

    # One chat span per model call, named for the model that answered it (the second: the first
    # failed), which a backend prices and labels it by; tokens; the fallback.
    steps = list(Step.objects.filter(run=run).order_by("index"))
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.attributes["agentsite.step.index"])
    assert [c.name for c in chats] == [f"chat {good}"] * 3
    for chat, step in zip(chats, steps, strict=True):
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == good
        assert chat.attributes["gen_ai.response.model"] == good
        assert chat.attributes["llm.model_name"] == good  # OpenInference's (Phoenix's) name for it
        assert chat.attributes["llm.token_count.prompt"] == step.tokens_in
        assert chat.attributes["llm.token_count.completion"] == step.tokens_out
        assert chat.attributes["gen_ai.usage.input_tokens"] == step.tokens_in
        assert chat.attributes["gen_ai.usage.output_tokens"] == step.tokens_out
        assert chat.attributes["gen_ai.response.finish_reasons"] == [step.finish_reason]
        assert chat.end_ns - chat.start_ns == pytest.approx(step.latency_ms * 1e6, abs=2000)
        assert [(e[0], e[2]) for e in chat.events] == [
            ("agentsite.model.failed", {"gen_ai.request.model": bad, "error.type": "500"})
        ]
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [["tool_calls"], ["tool_calls"], ["stop"]]

    # One execute_tool span per call: the two parallel weather calls and the approved cancel.
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in by_name(spans, "execute_tool ")}
    assert sorted(tools) == ["c1", "w1", "w2"]
    for db_call in ToolCall.objects.filter(run=run):
        span = tools[db_call.call_id]
        assert span.name == f"execute_tool {db_call.tool_name}"
        assert span.attributes["gen_ai.tool.name"] == db_call.tool_name
        assert span.attributes["agentsite.tool.status"] == "succeeded"
        assert span.attributes["agentsite.tool.args_hash"] == db_call.args_hash
        assert span.attributes["agentsite.tool.latency_ms"] == pytest.approx(db_call.latency_ms)
        assert not span.error
    # The weather calls only read: they ran before their step was stored, after the model answered.
    assert chats[0].end_ns <= min(tools["w1"].start_ns, tools["w2"].start_ns)
    assert tools["c1"].attributes["agentsite.approval.status"] == "approved"
    assert tools["c1"].attributes["agentsite.approval.decider"] == "person"

    # The approval wait: the cancel's span covers it, the request and the decision its events.
    cancel, approval = tools["c1"], Approval.objects.get(run=run)
    assert [e[0] for e in cancel.events] == ["agentsite.approval.requested", "agentsite.approval.decided"]
    assert cancel.start_ns == cancel.events[0][1] < cancel.events[1][1] <= cancel.end_ns
    decided = cancel.events[1][2]
    assert decided["agentsite.approval.status"] == "approved" and decided["agentsite.approval.decider"] == "person"
    assert decided["agentsite.approval.wait_ms"] == pytest.approx(
        (approval.decided_at - approval.requested_at).total_seconds() * 1000
    )
    # The levers are events of the run's span, in order.
    assert [e[0] for e in root.events] == [
        "agentsite.run.started",
        "agentsite.lever.pause",
        "agentsite.lever.paused",
        "agentsite.lever.message",
        "agentsite.lever.resume",
    ]
    assert "agentsite.lever.text_hash" in root.events_named("agentsite.lever.message")[0][2]


def test_a_run_that_every_model_fails_ends_its_trace_with_a_failed_chat_span_and_a_failed_agent_span(
    collector, launch, script
):
    receiver = collector()
    first = script({"status": 503, "error": "down", "repeat": True, "headers": FAST})
    run = launch("hi", models=[first, "script:nope"])
    assert run.stop_reason == Run.StopReason.MODEL_ERROR

    spans = receiver.wait_for(lambda spans: len(spans) == 2 and spans)
    root = next(s for s in spans if not s.parent_id)
    chat = next(s for s in spans if s.parent_id)
    assert root.error and root.attributes["agentsite.run.stop_reason"] == "model_error"
    assert chat.name == f"chat {first}" and chat.error and chat.attributes["error.type"] == "model_error"
    assert [e[2] for e in chat.events] == [
        {"gen_ai.request.model": first, "error.type": "503"},
        {"gen_ai.request.model": "script:nope", "error.type": "404"},
    ]
    # A failed span says why in its status message: its error type and a short reason in our words.
    assert chat.status_message == f"model_error: no model answered ({first}: 503, script:nope: 404)"
    assert root.status_message == "model_error: Model error"


def test_cached_and_reasoning_tokens_and_the_request_size_are_attributes_of_the_chat_and_agent_spans(
    collector, launch, script
):
    receiver = collector()
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "prompt_tokens_details": {"cached_tokens": 800},
             "completion_tokens_details": {"reasoning_tokens": 300}}
    run = launch("hi", models=[script({"content": "ok", "usage": usage})])
    spans = receiver.wait_for(lambda spans: len(spans) == 2 and spans)
    root = next(s for s in spans if not s.parent_id)
    chat = next(s for s in spans if s.parent_id)
    for span in (root, chat):
        assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 800
        assert span.attributes["gen_ai.usage.reasoning.output_tokens"] == 300
    # And as OpenInference readers (Arize Phoenix) read a model call's tokens.
    assert chat.attributes["llm.token_count.completion_details.reasoning"] == 300
    assert chat.attributes["llm.token_count.prompt_details.cache_read"] == 800
    assert (chat.attributes["llm.token_count.prompt"], chat.attributes["llm.token_count.completion"],
            chat.attributes["llm.token_count.total"]) == (1000, 500, 1500)
    step = Step.objects.get(run=run)
    assert chat.attributes["agentsite.request.estimated_tokens"] == step.context_tokens > 0
    assert chat.attributes["agentsite.request.tool_definition_tokens"] == step.tool_definition_tokens > 0


def test_a_stop_with_a_summary_is_an_event_of_the_run_and_its_summary_call_a_chat_span_of_the_trace(
    collector, launch, script, alice
):
    receiver = collector()
    model = script(calls(CANCEL), {"content": "Summary: nothing was cancelled."})
    run = launch("Cancel order ORD-1001", models=[model])
    assert run.status == Run.Status.AWAITING_APPROVAL
    run_stop(run_id=run.pk, user=alice)  # nobody drives it: applied at once, summary call included
    run.refresh_from_db()
    assert (run.stop_reason, run.answer) == (Run.StopReason.OPERATOR_STOP, "Summary: nothing was cancelled.")

    spans = receiver.wait_for(
        lambda spans: len(by_name(spans, "chat ")) == 2 and by_name(spans, "invoke_agent") and spans
    )
    (root,) = by_name(spans, "invoke_agent")
    assert all(s.parent_id == root.span_id for s in spans if s is not root)
    assert root.attributes["agentsite.run.stop_reason"] == "operator_stop"
    assert [e[0] for e in root.events_named("agentsite.lever.")] == ["agentsite.lever.stop"]
    assert sorted(s.attributes["agentsite.step.kind"] for s in by_name(spans, "chat ")) == ["summary", "turn"]
    (cancel,) = by_name(spans, "execute_tool ")
    assert cancel.attributes["agentsite.tool.status"] == ToolCall.Status.SKIPPED
    assert cancel.attributes["agentsite.approval.status"] == Approval.Status.CLOSED


@python_handler("trace_vault_open")
def _vault_open(args, ctx):
    return {"opened": True, "token": "VAULT-TOKEN-RESULT-5150"}


def test_no_secret_argument_result_note_task_or_key_leaves_in_any_exported_payload(
    collector, launch, script, settings, demo_server, alice, levers_here
):
    receiver = collector()
    settings.LLM_BASE_URL, settings.LLM_API_KEY = demo_server.url, "sk-LLM-KEY-8675309"
    Tool.objects.create(
        name="vault_open",
        description="Opens the vault.",
        handler="trace_vault_open",
        sensitive_fields=["password"],
        parameters={"type": "object", "properties": {"password": {"type": "string"}}, "required": ["password"]},
    )
    raw_arguments = '{"password": "hunter2-PASSWORD-4242"}'
    model = script(
        {"tool_calls": [{"id": "v1", "name": "vault_open", "arguments": raw_arguments}]},
        calls(CANCEL),
        {"content": "ANSWER-WITH-TOKEN VAULT-TOKEN-RESULT-5150"},
    )
    run = launch("TASK-SECRET-31337 open the vault", models=[model], tools=["vault_open", "cancel_order"])
    assert run.status == Run.Status.AWAITING_APPROVAL
    run_message(run_id=run.pk, user=alice, text="NOTE-SECRET-2718")
    approval_decide(
        approval_id=Approval.objects.get(run=run).pk, user=alice, approve=False, reason="REASON-SECRET-1618"
    )
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED

    receiver.wait_for(lambda spans: by_name(spans, "invoke_agent"))
    payload = b"".join(receiver.bodies)
    for secret in [
        "hunter2-PASSWORD-4242",
        "VAULT-TOKEN-RESULT-5150",
        "TASK-SECRET-31337",
        "NOTE-SECRET-2718",
        "REASON-SECRET-1618",
        "sk-LLM-KEY-8675309",
        "ANSWER-WITH-TOKEN",
        raw_arguments,
        "ORD-1001",
    ]:
        assert secret.encode() not in payload, f"{secret!r} left in a trace"
    vault = ToolCall.objects.get(run=run, call_id="v1")
    span = next(s for s in receiver.spans() if s.attributes.get("gen_ai.tool.call.id") == "v1")
    assert span.attributes["agentsite.tool.args_hash"] == vault.args_hash
    assert span.attributes["agentsite.tool.result_hash"] == run_spans.result_hash(vault.result)
    assert {s.attributes["server.address"] for s in by_name(receiver.spans(), "chat ")} == {"127.0.0.1"}


def test_the_sdks_variables_apply_headers_compression_and_service_name(collector, launch, script, monkeypatch):
    """Spans are encoded here (runs/observability/tracing/otlp_encoder.py) but sent by the SDK exporter's client, which
    reads OTEL_EXPORTER_OTLP_* itself: a hosted backend's token and gzip reach the collector."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0k3n,x-team=agents")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agents-eu")
    receiver = collector()
    run = launch("weather", models=[script(calls(*WEATHER), {"content": "Lagos 31, London 12."})])
    spans = flushed(receiver)
    assert len(spans) == 5 and {s.trace_id for s in spans} == {f"{run_spans.trace_id(run.pk):032x}"}
    assert {s.resource["service.name"] for s in spans} == {"agents-eu"}
    sent = receiver.headers
    assert sent and all(h["authorization"] == "Bearer t0k3n" and h["x-team"] == "agents" for h in sent)
    assert all(h["content-encoding"] == "gzip" and h["content-type"] == "application/x-protobuf" for h in sent)


def test_a_tool_name_the_model_invents_leaves_as_unregistered_never_as_its_text(collector, launch, script):
    receiver = collector()
    invented = call("TASK-SECRET-31337_send_to_attacker", {"x": 1}, "i1")
    run = launch("TASK-SECRET-31337", models=[script(calls(invented, WEATHER[0]), {"content": "Done."})])
    assert run.status == Run.Status.SUCCEEDED
    spans = flushed(receiver)
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in by_name(spans, "execute_tool ")}
    assert (tools["i1"].name, tools["i1"].attributes["gen_ai.tool.name"]) == (
        "execute_tool unregistered",
        "unregistered",
    )
    assert tools["i1"].attributes["agentsite.tool.status"] == "failed" and tools["i1"].error
    assert tools["i1"].status_message == "tool_error: no tool of the run by that name"
    assert tools["w1"].name == "execute_tool get_weather"  # a tool of the run keeps its name
    assert not tools["w1"].status_message
    assert b"TASK-SECRET" not in b"".join(receiver.bodies)


def test_a_call_a_rule_approves_shows_a_wait_of_zero_never_a_negative_one(collector, launch, script):
    """The rule decides in the moment the call is asked (its decision was stamped a few ms before
    the request: a negative wait in the trace and every wait figure)."""
    from runs.models import ApprovalRule

    receiver = collector()
    ApprovalRule.objects.create(name="desk", action="approve", position=10,
                                conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    run = launch("Cancel ORD-1001", models=[script(calls(CANCEL), {"content": "Cancelled."})])
    assert run.status == Run.Status.SUCCEEDED
    (cancel,) = by_name(flushed(receiver), "execute_tool ")
    requested, decided = cancel.events
    assert decided[0] == "agentsite.approval.decided" and decided[2]["agentsite.approval.decider"] == "rule"
    assert decided[2]["agentsite.approval.wait_ms"] == 0.0
    assert requested[1] == decided[1]



def test_a_decision_stamped_by_a_clock_behind_the_askers_shows_a_wait_of_zero_in_the_trace(
    collector, launch, script, alice, levers_here
):
    """A person decides on a web server whose clock runs behind the worker's that asked: the
    decision's time is before the request's, and the span says a wait of 0, never a negative one."""
    receiver = collector()
    run = launch("Cancel ORD-1001", models=[script(calls(CANCEL), {"content": "Cancelled."})])
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=alice, approve=True)
    Approval.objects.filter(pk=approval.pk).update(decided_at=approval.requested_at - timedelta(seconds=5))
    run_advance(run_id=run.pk)
    (cancel,) = by_name(flushed(receiver), "execute_tool ")
    _requested, decided = cancel.events
    assert decided[0] == "agentsite.approval.decided" and decided[2]["agentsite.approval.decider"] == "person"
    assert decided[2]["agentsite.approval.wait_ms"] == 0.0

def test_two_installations_exporting_to_one_collector_never_share_a_conversation(collector, launch, script, settings):
    """Both have a run of this id: the conversation id names the installation (a keyed hash under
    its ARGS_HASH_KEY, which itself never leaves), so a backend does not merge their runs."""
    from runs.observability.tracing.values import conversation_id, installation_id

    receiver = collector()
    settings.ARGS_HASH_KEY = "installation-one-key"
    run = launch("weather", models=[script({"content": "Lagos 31."})])
    flushed(receiver)
    settings.ARGS_HASH_KEY = "installation-two-key"  # another site, its own run of the same id
    run_spans._export(Run.objects.get(pk=run.pk), [Step.objects.get(run=run)], True)
    spans = flushed(receiver)
    conversations = {s.attributes["gen_ai.conversation.id"] for s in spans if "gen_ai.conversation.id" in s.attributes}
    one, two = (f"{installation_id(key)}-{run.pk}" for key in ("installation-one-key", "installation-two-key"))
    assert conversations == {one, two} and one != two
    assert one == conversation_id(run.pk, "installation-one-key")
    payload = b"".join(receiver.bodies)
    assert b"installation-one-key" not in payload and b"installation-two-key" not in payload


def test_the_project_the_spans_land_in_is_named_by_phoenix_project_name(collector, launch, script, monkeypatch):
    monkeypatch.setenv("PHOENIX_PROJECT_NAME", "support-agents")
    receiver = collector()
    launch("weather", models=[script({"content": "Lagos 31."})])
    spans = flushed(receiver)
    assert spans and {s.resource["openinference.project.name"] for s in spans} == {"support-agents"}


def run_weather(launch, script, bad) -> Run:
    good = script(calls(*WEATHER), {"content": "Lagos 31, London 12."})
    return launch("weather", models=[bad, good])


def test_a_collector_that_hangs_holds_no_run_back_and_gets_the_spans_once_it_answers(
    collector, launch, script, monkeypatch
):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "120")  # the exporter's thread waits as long as it hangs
    receiver = collector("hang")
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    first = run_weather(launch, script, bad)
    assert first.status == Run.Status.SUCCEEDED
    receiver_stuck = threading.Event()
    threading.Thread(target=lambda: receiver.wait_for(lambda _: receiver.held, 30) and receiver_stuck.set()).start()
    assert receiver_stuck.wait(30), "the exporter never reached the collector"

    # The exporting thread is stuck in a request; runs go on and end as they would without tracing.
    runs = [run_weather(launch, script, bad) for _ in range(3)]
    assert receiver.held == 1 and not receiver.released.is_set()
    assert [(r.status, r.answer) for r in runs] == [(Run.Status.SUCCEEDED, "Lagos 31, London 12.")] * 3
    assert all(ToolCall.objects.filter(run=r, status=ToolCall.Status.SUCCEEDED).count() == 2 for r in runs)

    receiver.release()  # the collector answers again: what was queued meanwhile arrives
    wanted = {f"{run_spans.trace_id(r.pk):032x}" for r in runs}
    receiver.wait_for(lambda spans: wanted <= {s.trace_id for s in spans if not s.parent_id}, timeout=60)


def test_a_collector_that_refuses_connections_changes_nothing_in_the_run(collector, launch, script):
    from tests.conftest import free_port

    collector(endpoint=f"http://127.0.0.1:{free_port()}/v1/traces")  # nothing listens there
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    runs = [run_weather(launch, script, bad) for _ in range(3)]
    assert [(r.status, r.answer) for r in runs] == [(Run.Status.SUCCEEDED, "Lagos 31, London 12.")] * 3
    assert all(Step.objects.filter(run=r).count() == 2 for r in runs)


def test_without_an_endpoint_nothing_is_built_or_sent(collector, launch, script, settings):
    receiver = collector()
    settings.TRACES_ENDPOINT = ""
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    run = run_weather(launch, script, bad)
    assert run.status == Run.Status.SUCCEEDED
    tracing = sys.modules.get("runs.observability.tracing.exporter")
    assert tracing is None or tracing._current is None  # no provider, no exporting thread
    assert receiver.requests == 0


def test_a_call_changed_after_its_commit_leaves_as_committed_and_a_span_that_cannot_be_built_only_itself(
    collector, launch, script, caplog
):
    """The spans of steps and calls are built later, in the exporting thread, from copies taken at
    the commit: what the driver changes on its own objects afterwards does not leak into them, and a
    span whose building fails is logged and left out while the rest of its batch goes."""
    from runs.observability.tracing import exporter as tracing

    receiver = collector()
    run = launch("weather", models=[script(calls(*WEATHER), {"content": "Lagos 31, London 12."})])
    assert run.status == Run.Status.SUCCEEDED
    flushed(receiver)
    before = len(receiver.spans())

    call = ToolCall.objects.get(run=run, call_id="w1")
    committed = (call.status, run_spans.result_hash(call.result))
    run_spans._export(run, [call], False)  # as after a commit: copied and queued, not yet built
    call.status, call.result = ToolCall.Status.FAILED, {"ok": False, "error": "changed after the commit"}

    def broken(*args):
        raise RuntimeError("cannot build this one")

    tracing.emit_later(broken)
    run_spans._export(run, [ToolCall.objects.get(run=run, call_id="w2")], False)
    spans = flushed(receiver)[before:]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in spans) == ["w1", "w2"]
    w1 = next(s for s in spans if s.attributes["gen_ai.tool.call.id"] == "w1")
    assert (w1.attributes["agentsite.tool.status"], w1.attributes["agentsite.tool.result_hash"]) == committed
    assert not w1.error
    assert "could not build a span" in caplog.text


def test_a_call_id_leaves_as_sent_only_when_it_looks_like_an_id_and_otherwise_as_a_keyed_hash(collector, launch, script):
    from runs.observability.tracing.values import call_id_value

    receiver = collector()
    wordy = "TASK-SECRET-31337 the customer's card is 4111 " + "x" * 5000  # model text, any length
    long_id = "call_" + "a" * 300
    model = script(calls(call("get_weather", {"city": "Lagos"}, wordy), call("get_weather", {"city": "Abuja"}, long_id),
                         WEATHER[1]), {"content": "Done."})
    run = launch("TASK-SECRET-31337", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    ids = sorted(s.attributes["gen_ai.tool.call.id"] for s in by_name(flushed(receiver), "execute_tool "))
    assert "w2" in ids  # a provider's id leaves as it is, to match the provider's own logs
    hashed = sorted(i for i in ids if i != "w2")
    assert hashed == sorted([call_id_value(wordy), call_id_value(long_id)])
    assert all(len(i) <= 64 and i.startswith("hmac-sha256:") for i in hashed)
    assert b"TASK-SECRET" not in b"".join(receiver.bodies) and b"aaaaaaaaaaaaaaaa" not in b"".join(receiver.bodies)


def test_call_id_values():
    from runs.observability.tracing.values import call_id_value

    assert call_id_value("call_abc-123.x:y") == "call_abc-123.x:y"
    assert call_id_value("a" * 64) == "a" * 64
    for odd in ("a" * 65, "call 1", "cällé", "", "id\n"):
        value = call_id_value(odd)
        assert value.startswith("hmac-sha256:") and len(value) == len("hmac-sha256:") + 32, odd
    assert call_id_value("a" * 65, key="k1") != call_id_value("a" * 65, key="k2")
    assert call_id_value("\ud83d") == call_id_value("\ud83d")  # an unpaired surrogate does not break it
