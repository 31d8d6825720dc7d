"""Calls to read-only tools run before their step is recorded, and go to the database with it.

Real loop, real openai client, scripted demo model over HTTP (see test_loop_contract).
"""
import threading
import time

import pytest

from runs.lifecycle.runs import run_cancel
from runs.models import Run, RunEvent, ToolCall
from toolsapp.executors.python import READ_ONLY_HANDLERS, python_handler
from toolsapp.models import Tool

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
READS = []


@python_handler("test_reader", read_only=True)
def _reader(args, ctx):
    READS.append(ctx.call_id)
    return {"n": args.get("n")}


@pytest.fixture(autouse=True)
def _reader_tool(demo_data):
    READS.clear()
    Tool.objects.create(name="reader", description="reads", parameters=SCHEMA, handler="test_reader")


def timeline(run):
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", "data"))


def test_only_handlers_that_say_so_are_read_only():
    assert {"get_weather", "lookup_order", "get_ticket", "search_tickets", "test_reader"} <= READ_ONLY_HANDLERS
    assert not {"create_ticket", "cancel_order"} & READ_ONLY_HANDLERS


def test_a_read_only_call_reaches_the_timeline_with_its_step_already_answered(launch, script):
    model = script({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}, "id": "call_w"}]},
                   {"content": "Sunny."})
    run = launch("weather", models=[model], tools=["get_weather"], summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    events = timeline(run)
    assert [kind for kind, _ in events] == ["run", "run", "step", "step", "run"]
    first_step = events[2][1]
    assert [(c["id"], c["status"], c["ok"]) for c in first_step["calls"]] == [
        ("call_w", ToolCall.Status.SUCCEEDED, True)]
    assert "Lagos" in first_step["calls"][0]["result_preview"]
    assert '"temperature_c"' in script.requests(model)[1]["messages"][3]["content"]


def test_a_call_with_an_effect_is_recorded_before_it_runs(launch, script):
    arguments = {"title": "[TEST] printer", "body": "jammed", "priority": "low"}
    model = script({"tool_calls": [{"name": "create_ticket", "arguments": arguments, "id": "call_t"}]},
                   {"content": "Filed."})
    run = launch("ticket", models=[model], tools=["create_ticket"], summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    events = timeline(run)
    assert [kind for kind, _ in events] == ["run", "run", "step", "call", "step", "run"]
    # The step was committed (and shown) with its call still pending; the result came after.
    assert events[2][1]["calls"][0]["status"] == ToolCall.Status.PENDING
    assert events[3][1]["status"] == ToolCall.Status.SUCCEEDED


def test_a_mixed_answer_takes_the_usual_path(launch, script):
    model = script(
        {"tool_calls": [{"name": "reader", "arguments": {"n": 1}, "id": "c1"},
                        {"name": "create_ticket", "arguments": {"title": "[TEST] x", "body": "y", "priority": "low"},
                         "id": "c2"}]},
        {"content": "done"},
    )
    run = launch("mixed", models=[model], tools=["reader", "create_ticket"], summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    kinds = [kind for kind, _ in timeline(run)]
    assert kinds.count("call") == 2
    assert READS == ["c1"]


def test_invalid_calls_do_not_stop_the_others_from_running_first(launch, script):
    model = script(
        {"tool_calls": [{"name": "reader", "arguments": {"n": "not a number"}, "id": "bad"},
                        {"name": "reader", "arguments": {"n": 2}, "id": "good"}]},
        {"content": "done"},
    )
    run = launch("one bad", models=[model], tools=["reader"], summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert READS == ["good"]
    calls = {c.call_id: c for c in ToolCall.objects.filter(run=run)}
    assert calls["bad"].status == ToolCall.Status.FAILED and "n" in calls["bad"].error
    assert calls["good"].status == ToolCall.Status.SUCCEEDED
    assert "call" not in [kind for kind, _ in timeline(run)]


def test_a_cancel_that_arrives_while_the_model_answers_stops_a_read_only_call(launch, script):
    from django.db import connection

    model = script({"tool_calls": [{"name": "reader", "arguments": {"n": 1}, "id": "c1"}], "latency": 2.0},
                   {"content": "never asked"})
    finished = {}

    def go():
        try:
            finished["run"] = launch("slow", models=[model], tools=["reader"], summarize_on_stop=False)
        finally:
            connection.close()

    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.monotonic() + 10
    while not Run.objects.filter(status=Run.Status.RUNNING).exists():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    run_cancel(run=Run.objects.get(status=Run.Status.RUNNING))
    thread.join(15)
    run = finished["run"]
    assert run.status == Run.Status.CANCELLED and run.stop_reason == Run.StopReason.CANCELLED
    assert READS == []
    call = ToolCall.objects.get(run=run)
    assert call.status == ToolCall.Status.SKIPPED
    assert len(script.requests(model)) == 1


def test_a_read_only_tool_an_operator_marked_unsafe_to_re_run_is_recorded_before_it_runs(launch, script):
    Tool.objects.filter(name="reader").update(idempotent=False)
    model = script({"tool_calls": [{"name": "reader", "arguments": {"n": 1}, "id": "c1"}]}, {"content": "done"})
    run = launch("marked", models=[model], tools=["reader"], summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    # The step first, then the call marked started, then its result.
    assert [kind for kind, _ in timeline(run)] == ["run", "run", "step", "call", "call", "step", "run"]
    assert [data["status"] for kind, data in timeline(run) if kind == "call"] == [
        ToolCall.Status.STARTED, ToolCall.Status.SUCCEEDED]
    assert READS == ["c1"]
