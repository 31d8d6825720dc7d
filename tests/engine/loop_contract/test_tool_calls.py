"""Tool calls: errors are data, one result per call id in call order, parallel only when safe, oversized results."""
import json
import threading

from runs.models import Run, ToolCall
from tests.engine.loop_contract.support import PROBE_SCHEMA, REC, call, calls, one_call, result_for
from toolsapp.models import Order, Tool

# --- 5. errors are data --------------------------------------------------------------------------


def test_unknown_tool_error_lists_the_available_tools(launch, script):
    run, _, result = one_call(launch, script, "no_such_tool", {"x": 1}, tools=["get_weather", "probe"])
    assert result["ok"] is False
    assert "no_such_tool" in result["error"]
    assert "get_weather" in result["error"] and "probe" in result["error"]
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER


def test_tool_not_allowed_for_this_agent_is_an_error_and_does_not_run(launch, script):
    _, _, result = one_call(
        launch, script, "cancel_order", {"order_id": "ORD-1001", "reason": "because"}, tools=["get_weather"]
    )
    assert result["ok"] is False
    assert "not allowed" in result["error"] and "get_weather" in result["error"]
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN


def test_arguments_that_are_not_json_are_an_error_and_the_handler_never_runs(launch, script):
    _, _, result = one_call(launch, script, "probe", '{"n": 1', tools=["probe"])
    assert result["ok"] is False and "not valid JSON" in result["error"]
    assert REC.count("contract_probe") == 0


def test_arguments_that_are_a_json_array_are_an_error_and_the_handler_never_runs(launch, script):
    _, _, result = one_call(launch, script, "probe", "[1, 2]", tools=["probe"])
    assert result["ok"] is False and "JSON object" in result["error"]
    assert REC.count("contract_probe") == 0


def test_arguments_failing_the_schema_are_an_error_and_the_handler_never_runs(launch, script):
    _, _, result = one_call(launch, script, "probe", {"n": "seven"}, tools=["probe"])
    assert result["ok"] is False
    assert "invalid arguments" in result["error"] and "n" in result["error"]
    assert REC.count("contract_probe") == 0


def test_demo_tool_schema_is_enforced(launch, script):
    _, _, result = one_call(launch, script, "lookup_order", {"order_id": "1001; DROP TABLE"}, tools=["lookup_order"])
    assert result["ok"] is False and "invalid arguments at order_id" in result["error"]


def test_handler_tool_error_message_reaches_the_model(launch, script):
    _, _, result = one_call(launch, script, "tool_error", {}, tools=["tool_error"])
    assert result == {"ok": False, "error": "the warehouse is closed on Sundays"}


def test_unexpected_exception_shows_only_its_type(launch, script):
    run, requests, result = one_call(launch, script, "crash", {}, tools=["crash"])
    assert result["ok"] is False
    assert "ZeroDivisionError" in result["error"]
    assert "secret internal detail" not in result["error"] and "Traceback" not in result["error"]
    call_row = ToolCall.objects.get(run=run)
    assert "secret internal detail" not in json.dumps(call_row.result) + call_row.error
    assert "secret internal detail" not in json.dumps(requests)


def test_timeout_becomes_an_error_result(launch, script):
    # A second, not the 50 ms of "stuck": on a loaded machine a tool thread may take longer than
    # 50 ms to start, which ends in the other timeout error (the tool never started).
    Tool.objects.create(name="stuck_a_second", description="stuck", parameters=PROBE_SCHEMA,
                        handler="contract_stuck", timeout_seconds=1.0)
    run, _, result = one_call(launch, script, "stuck_a_second", {}, tools=["stuck_a_second"])
    assert result["ok"] is False and "timed out" in result["error"]
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.FAILED
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER


def test_success_is_ok_true_with_the_result(launch, script):
    _, _, result = one_call(launch, script, "get_weather", {"city": "Lagos"}, tools=["get_weather"])
    assert result == {"ok": True, "result": {"city": "Lagos", "temperature_c": 31, "conditions": "sunny"}}


def test_a_run_waiting_on_its_tool_lets_another_run_of_the_worker_work(launch, script, settings):
    """With a single working slot, run A waits on a tool that only run B can release: A must
    give its slot back while it waits, or B could not start before A's tool gave up."""
    from django.db import connection

    from runs.engine import throttle

    settings.RUN_WORKING_SLOTS = 1
    throttle._semaphore = None
    try:
        model_a = script(calls(call("waiter", {}, "call_w")), {"content": "A done"})
        model_b = script(calls(call("signaller", {}, "call_s")), {"content": "B done"})
        runs = {}

        def run_a():
            try:
                runs["a"] = launch("A", models=[model_a], tools=["waiter"])
            finally:
                connection.close()

        thread = threading.Thread(target=run_a)
        thread.start()
        assert REC.waiter_started.wait(10)  # A holds its tool now
        run_b = launch("B", models=[model_b], tools=["signaller"])
        thread.join(15)
        assert run_b.stop_reason == Run.StopReason.FINAL_ANSWER
        assert runs["a"].stop_reason == Run.StopReason.FINAL_ANSWER
        assert ToolCall.objects.get(run=runs["a"]).result == {"ok": True, "result": {"saw_signal": True}}
    finally:
        throttle._semaphore = None


# --- 6. message order: assistant, then one result per call id, in call order ---------------------


def test_results_follow_the_assistant_message_in_call_order_not_completion_order(launch, script):
    model = script(
        calls(call("waiter", {}, "call_z"), call("probe", {"n": 1}, "call_a"), call("signaller", {}, "call_m")),
        {"content": "done"},
    )
    run = launch("order", models=[model], tools=["waiter", "probe", "signaller"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    messages = script.requests(model)[1]["messages"]
    assistant = messages[2]
    assert assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_z", "call_a", "call_m"]
    assert [(m["role"], m["tool_call_id"]) for m in messages[3:]] == [
        ("tool", "call_z"),
        ("tool", "call_a"),
        ("tool", "call_m"),
    ]
    # call_z finished last (it waited for call_m), yet its result comes first.
    assert json.loads(messages[3]["content"])["result"] == {"saw_signal": True}


def test_every_call_gets_exactly_one_result_even_when_some_fail(launch, script):
    model = script(
        calls(
            call("probe", {"n": 1}, "c1"),
            call("nope", {}, "c2"),
            call("probe", "{bad", "c3"),
            call("tool_error", {}, "c4"),
            call("probe", {"n": 5}, "c5"),
        ),
        {"content": "done"},
    )
    launch("mixed", models=[model], tools=["probe", "tool_error"])
    messages = script.requests(model)[1]["messages"]
    assert messages[2]["role"] == "assistant"
    tool_ids = [m["tool_call_id"] for m in messages[3:]]
    assert tool_ids == ["c1", "c2", "c3", "c4", "c5"]
    oks = [json.loads(m["content"])["ok"] for m in messages[3:]]
    assert oks == [True, False, False, False, True]


# --- 7. parallel only when every tool is parallel-safe --------------------------------------------


def test_parallel_safe_calls_in_one_response_run_concurrently(launch, script):
    model = script(calls(call("barrier_a", {}, "c1"), call("barrier_b", {}, "c2")), {"content": "done"})
    launch("together", models=[model], tools=["barrier_a", "barrier_b"])
    request = script.requests(model)[1]
    # Each handler waits at a two-party barrier: both succeed only if they ran at the same time.
    assert result_for(request, "c1") == {"ok": True, "result": {"met": True}}
    assert result_for(request, "c2") == {"ok": True, "result": {"met": True}}


def test_calls_run_one_after_another_when_a_tool_is_not_parallel_safe(launch, script):
    model = script(calls(call("seq_a", {}, "c1"), call("seq_b", {}, "c2")), {"content": "done"})
    launch("in order", models=[model], tools=["seq_a", "seq_b"])
    assert REC.events == ["start a", "end a", "start b", "end b"]
    assert result_for(script.requests(model)[1], "c1") == {"ok": True, "result": {"overlapped": False}}


# --- 8. oversized results ------------------------------------------------------------------------


def test_oversized_result_is_truncated_for_the_model_but_kept_in_full(launch, script, settings):
    settings.TOOL_RESULT_MAX_CHARS = 300
    settings.TOOL_RESULT_PREVIEW_CHARS = 100
    model = script(calls(call("big", {}, "c1"), call("get_weather", {"city": "London"}, "c2")), {"content": "done"})
    run = launch("big", models=[model], tools=["big", "get_weather"])
    request = script.requests(model)[1]

    full_payload = {"ok": True, "result": {"blob": "x" * 2000}}
    full_text = json.dumps(full_payload, separators=(",", ":"))
    seen = result_for(request, "c1")  # valid JSON, or this would raise
    assert seen["truncated"] is True
    assert seen["original_size"] == len(full_text)
    assert seen["preview"] == full_text[:100]
    assert "x" * 2000 not in json.dumps(request)

    big = ToolCall.objects.get(run=run, call_id="c1")
    assert big.truncated is True
    assert big.result == full_payload

    small = ToolCall.objects.get(run=run, call_id="c2")
    assert small.truncated is False
    assert result_for(request, "c2")["result"]["city"] == "London"


def test_arguments_nested_thousands_of_levels_deep_are_an_error_for_the_model(launch, script):
    deep = '{"n": ' + "[" * 5000 + "]" * 5000 + "}"
    run, _, result = one_call(launch, script, "probe", deep, tools=["probe"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert result["ok"] is False and "nested too deeply" in result["error"]
    assert REC.count("contract_probe") == 0


def test_a_tool_name_and_call_id_longer_than_any_column_are_errors_as_data(launch, script):
    name, call_id = "n" * 300, "c" * 300
    run, requests, result = one_call(launch, script, name, {}, tools=["probe"], call_id=call_id)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert result["ok"] is False and "unknown tool" in result["error"]
    stored = ToolCall.objects.get(run=run)
    assert stored.call_id == call_id  # the model reads its result under the id it sent
    assert len(stored.tool_name) <= 200 and stored.tool_name.startswith("n" * 100)
