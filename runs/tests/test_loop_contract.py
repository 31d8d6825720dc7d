"""The agent loop's contract, end to end: real openai client -> HTTP -> scripted demo model.

Every test scripts the model's exact answers (`script`), drives a run with `launch`, and checks
what a user would notice: the run's outcome, the tool results, and what the model was sent.
"""
import json
import logging
import threading

import pytest

from runs.models import Agent, Approval, Run, Step, ToolCall
from toolsapp.models import Order, Ticket, Tool
from toolsapp.registry import ToolError, python_handler

DEMO_TOOLS = ["create_ticket", "get_ticket", "get_weather", "lookup_order", "search_tickets", "cancel_order"]
PROBE_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


# --- test tools ----------------------------------------------------------------------------------


class Recorder:
    """What the test handlers saw, shared with the tool threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []  # (handler, arguments, context)
        self.events = []  # ordered "start x" / "end x"
        self.release = threading.Event()  # lets a stuck handler go at the end of a test
        self.b_started = threading.Event()
        self.m_done = threading.Event()
        self.waiter_started = threading.Event()
        self.barrier = threading.Barrier(2, timeout=5)

    def record(self, name, args, ctx):
        with self.lock:
            self.calls.append((name, args, ctx))

    def note(self, text):
        with self.lock:
            self.events.append(text)

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)


REC = Recorder()


@python_handler("contract_probe")
def _probe(args, ctx):
    REC.record("contract_probe", args, ctx)
    return {"n": args.get("n"), "seen": True}


@python_handler("contract_tool_error")
def _tool_error(args, ctx):
    REC.record("contract_tool_error", args, ctx)
    raise ToolError("the warehouse is closed on Sundays")


@python_handler("contract_crash")
def _crash(args, ctx):
    REC.record("contract_crash", args, ctx)
    raise ZeroDivisionError("secret internal detail 4242")


@python_handler("contract_stuck")
def _stuck(args, ctx):
    REC.record("contract_stuck", args, ctx)
    REC.release.wait(10)
    return {"late": True}


@python_handler("contract_big")
def _big(args, ctx):
    REC.record("contract_big", args, ctx)
    return {"blob": "x" * 2000}


@python_handler("contract_barrier")
def _barrier(args, ctx):
    REC.record("contract_barrier", args, ctx)
    # Passes only when the other call waits at the barrier at the same time.
    REC.barrier.wait()
    return {"met": True}


@python_handler("contract_seq_a")
def _seq_a(args, ctx):
    REC.note("start a")
    overlapped = REC.b_started.wait(0.2)  # would see b start if the calls overlapped
    REC.note("end a")
    return {"overlapped": overlapped}


@python_handler("contract_seq_b")
def _seq_b(args, ctx):
    REC.b_started.set()
    REC.note("start b")
    REC.note("end b")
    return {"b": True}


@python_handler("contract_waiter")
def _waiter(args, ctx):
    # Finishes only after the signaller: completion order differs from call order.
    REC.waiter_started.set()
    return {"saw_signal": REC.m_done.wait(5)}


@python_handler("contract_signaller")
def _signaller(args, ctx):
    REC.m_done.set()
    return {"signalled": True}


@python_handler("contract_cancel")
def _cancel(args, ctx):
    # An operator cancels the run while this call runs (another connection, like the web UI).
    from runs.services.runs import run_cancel

    run_cancel(run=Run.objects.get(pk=ctx.run_id))
    return {"cancel": "requested"}


TEST_TOOLS = {
    "cancel_me": {"handler": "contract_cancel"},
    "probe": {"handler": "contract_probe"},
    "probe_limited": {"handler": "contract_probe", "repeat_limit": 2},
    "tool_error": {"handler": "contract_tool_error"},
    "crash": {"handler": "contract_crash"},
    "stuck": {"handler": "contract_stuck", "timeout_seconds": 0.05},
    "big": {"handler": "contract_big"},
    "barrier_a": {"handler": "contract_barrier"},
    "barrier_b": {"handler": "contract_barrier"},
    "seq_a": {"handler": "contract_seq_a", "parallel_safe": True},
    "seq_b": {"handler": "contract_seq_b", "parallel_safe": False},
    "waiter": {"handler": "contract_waiter"},
    "signaller": {"handler": "contract_signaller"},
}


@pytest.fixture(autouse=True)
def _test_tools(demo_data):
    global REC
    REC = Recorder()
    for name, fields in TEST_TOOLS.items():
        Tool.objects.create(name=name, description=f"test tool {name}", parameters=PROBE_SCHEMA, **fields)
    yield
    REC.release.set()
    REC.barrier.abort()


# --- helpers -------------------------------------------------------------------------------------


def call(name, arguments=None, call_id=None):
    entry = {"name": name, "arguments": {} if arguments is None else arguments}
    if call_id:
        entry["id"] = call_id
    return entry


def calls(*items):
    return {"tool_calls": list(items)}


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def result_for(request, call_id):
    found = [m for m in tool_messages(request) if m["tool_call_id"] == call_id]
    assert len(found) == 1, f"expected exactly one result for {call_id}, got {found}"
    return json.loads(found[0]["content"])


def one_call(launch, script, name, arguments, *, tools, call_id="call_1", **overrides):
    """A run whose model makes one call, then answers. -> (run, requests, the result the model read)."""
    model = script(calls(call(name, arguments, call_id)), {"content": "done"})
    run = launch("use the tool", models=[model], tools=tools, summarize_on_stop=False, **overrides)
    requests = script.requests(model)
    assert len(requests) == 2
    return run, requests, result_for(requests[1], call_id)


def make_agent(name, **fields):
    agent = Agent.objects.create(name=name, summarize_on_stop=False, **fields)
    agent.tools.set(Tool.objects.filter(name__in=DEMO_TOOLS))
    return agent


# --- 1. every request carries the full history and the allowed tools -----------------------------


def test_every_request_carries_full_history_and_allowed_tool_definitions(launch, script):
    model = script(
        calls(call("get_weather", {"city": "Lagos"}, "c1")),
        calls(call("probe", {"n": 2}, "c2")),
        {"content": "Lagos is sunny."},
    )
    run = launch("weather please", models=[model], tools=["get_weather", "probe"])
    assert run.stop_reason == "final_answer"
    requests = script.requests(model)
    assert len(requests) == 3

    expected_tools = sorted(
        (Tool.objects.get(name=n).definition() for n in ["get_weather", "probe"]), key=lambda d: d["function"]["name"]
    )
    for body in requests:
        assert sorted(body["tools"], key=lambda d: d["function"]["name"]) == expected_tools

    first, second, third = (r["messages"] for r in requests)
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"] == "weather please"
    # Each follow-up resends everything before it, then the new turn and its results.
    assert second[: len(first)] == first and third[: len(second)] == second
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Lagos"}'}
    assert json.loads(second[3]["content"])["result"]["city"] == "Lagos"
    assert third[4]["tool_calls"][0]["id"] == "c2"


def test_tools_not_allowed_for_the_run_are_not_offered(launch, script):
    model = script({"content": "ok"})
    launch("hi", models=[model], tools=["get_weather"])
    (body,) = script.requests(model)
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]


# --- 2. no tool calls: the final answer --------------------------------------------------------------


def test_answer_without_tool_calls_succeeds_with_that_text(launch, script):
    model = script({"content": "The answer is 42."})
    run = launch("question", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    assert run.stop_reason == "final_answer"
    assert run.answer == "The answer is 42."
    assert run.iterations == 1
    assert not ToolCall.objects.filter(run=run).exists()


# --- 3. max_iterations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, -1, 2.5, 3.0, "3", None, True, False, 2**53], ids=lambda v: f"max_iterations={v!r}"
)
def test_invalid_max_iterations_is_refused_before_any_model_request(launch, script, value):
    from runs.services.runs import InvalidRun, run_create

    model = script({"content": "must not be asked"})
    with pytest.raises(InvalidRun, match="max_iterations"):
        run_create(agent=Agent.objects.get(name="demo"), task="hi", overrides={"models": [model], "max_iterations": value})
    assert script.requests(model) == []
    assert not Run.objects.exists()


def test_agent_with_zero_max_iterations_cannot_be_launched(launch, script):
    from runs.services.runs import InvalidRun, run_create

    agent = make_agent("zero-iterations", max_iterations=0)
    model = script({"content": "must not be asked"})
    with pytest.raises(InvalidRun):
        run_create(agent=agent, task="hi", overrides={"models": [model]})
    assert script.requests(model) == []


def test_max_iterations_at_the_safe_integer_limit_is_accepted(launch, script):
    model = script({"content": "fine"})
    run = launch("hi", models=[model], max_iterations=2**53 - 1)
    assert run.stop_reason == "final_answer"


def test_last_iteration_does_not_execute_tools(launch, script):
    model = script(
        calls(call("probe", {"n": 1}, "c1")),
        calls(call("probe", {"n": 2}, "c2"), call("probe", {"n": 3}, "c3")),
        {"content": "never asked"},
    )
    run = launch("loop", models=[model], tools=["probe"], max_iterations=2, summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "iteration_limit"
    assert run.iterations == 2
    assert len(script.requests(model)) == 2
    # Only the first iteration's call ran.
    assert [c[1] for c in REC.calls] == [{"n": 1}]
    statuses = dict(ToolCall.objects.filter(run=run).values_list("call_id", "status"))
    assert statuses == {"c1": "succeeded", "c2": "skipped", "c3": "skipped"}


def test_single_iteration_run_skips_all_requested_tools(launch, script):
    model = script(calls(call("probe", {"n": 1}, "c1")))
    run = launch("loop", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    assert run.stop_reason == "iteration_limit"
    assert REC.count("contract_probe") == 0
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SKIPPED


# --- 4. repeated calls ---------------------------------------------------------------------------


def test_reformatted_identical_calls_stop_the_run_at_the_repeat_limit(launch, script):
    model = script(
        calls(call("probe", '{"n":7}', "c1")),
        calls(call("probe", '{ "n" : 7 }', "c2")),
        calls(call("probe", '{\n  "n": 7\n}', "c3")),
        {"content": "never asked"},
    )
    run = launch("repeat", models=[model], tools=["probe"], summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "repeated_call"
    assert REC.count("contract_probe") == 2  # the third, repeated call was not executed
    statuses = dict(ToolCall.objects.filter(run=run).values_list("call_id", "status"))
    assert statuses == {"c1": "succeeded", "c2": "succeeded", "c3": "skipped"}
    assert len(script.requests(model)) == 3


def test_calls_with_different_arguments_are_not_repeats(launch, script):
    model = script(*(calls(call("probe", {"n": i})) for i in range(4)), {"content": "done"})
    run = launch("vary", models=[model], tools=["probe"])
    assert run.stop_reason == "final_answer"
    assert REC.count("contract_probe") == 4


def test_per_tool_repeat_limit_overrides_the_agent_limit(launch, script):
    model = script(
        calls(call("probe_limited", {"n": 1}, "c1")),
        calls(call("probe_limited", {"n": 1}, "c2")),
        {"content": "never asked"},
    )
    run = launch("repeat", models=[model], tools=["probe_limited"], repeat_limit=5, summarize_on_stop=False)
    assert run.stop_reason == "repeated_call"
    assert REC.count("contract_probe") == 1


def test_repeat_limit_override_for_the_run(launch, script):
    model = script(calls(call("probe", {"n": 1}, "c1")), calls(call("probe", {"n": 1}, "c2")), {"content": "no"})
    run = launch("repeat", models=[model], tools=["probe"], repeat_limit=2, summarize_on_stop=False)
    assert run.stop_reason == "repeated_call"
    assert REC.count("contract_probe") == 1


def test_stuck_demo_task_ends_as_repeated_call(launch):
    run = launch("stuck")
    assert run.stop_reason == "repeated_call"
    gets = list(ToolCall.objects.filter(run=run).order_by("step__index").values_list("tool_name", "status"))
    assert gets == [("get_ticket", "failed"), ("get_ticket", "failed"), ("get_ticket", "skipped")]


# --- 5. errors are data --------------------------------------------------------------------------


def test_unknown_tool_error_lists_the_available_tools(launch, script):
    run, _, result = one_call(launch, script, "no_such_tool", {"x": 1}, tools=["get_weather", "probe"])
    assert result["ok"] is False
    assert "no_such_tool" in result["error"]
    assert "get_weather" in result["error"] and "probe" in result["error"]
    assert run.stop_reason == "final_answer"


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
    run, _, result = one_call(launch, script, "stuck", {}, tools=["stuck"])
    assert result["ok"] is False and "timed out" in result["error"]
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.FAILED
    assert run.stop_reason == "final_answer"


def test_success_is_ok_true_with_the_result(launch, script):
    _, _, result = one_call(launch, script, "get_weather", {"city": "Lagos"}, tools=["get_weather"])
    assert result == {"ok": True, "result": {"city": "Lagos", "temperature_c": 31, "conditions": "sunny"}}


def test_a_run_waiting_on_its_tool_lets_another_run_of_the_worker_work(launch, script, settings):
    """With a single working slot, run A waits on a tool that only run B can release: A must
    give its slot back while it waits, or B could not start before A's tool gave up."""
    from django.db import connection

    from runs.services import throttle

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
        assert run_b.stop_reason == "final_answer"
        assert runs["a"].stop_reason == "final_answer"
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
    assert run.stop_reason == "final_answer"
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


# --- 9. model fallback and retries -----------------------------------------------------------------

FAST = {"Retry-After": "0.01"}


def test_falls_back_to_the_next_model_after_repeated_500s(launch, script):
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    good = script({"content": "from the good model"})
    run = launch("hi", models=[bad, good])
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "from the good model"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1
    assert bad in step.model_errors[0] and "500" in step.model_errors[0] and "boom" in step.model_errors[0]


def test_falls_back_when_the_model_does_not_exist(launch, script):
    good = script({"content": "fallback ok"})
    run = launch("hi", models=["script:nope", good])
    assert run.answer == "fallback ok"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and "script:nope" in step.model_errors[0] and "404" in step.model_errors[0]


def test_rate_limited_model_is_retried_a_bounded_number_of_times_then_skipped(launch, script, settings):
    bad = script({"status": 429, "error": "slow down", "repeat": True, "headers": FAST})
    good = script({"content": "second model"})
    run = launch("hi", models=[bad, good])
    assert run.answer == "second model"
    assert len(script.requests(bad)) == settings.LLM_MAX_RETRIES + 1
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and "429" in step.model_errors[0]


def test_a_single_429_is_retried_on_the_same_model(launch, script):
    model = script({"status": 429, "error": "slow down", "headers": FAST}, {"content": "after the wait"})
    other = script({"content": "must not be asked"})
    run = launch("hi", models=[model, other])
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "after the wait"
    assert Step.objects.get(run=run).model == model
    assert len(script.requests(model)) == 2
    assert script.requests(other) == []


@pytest.mark.parametrize("garbage", ["this is not json", '{"unexpected": "shape"}', '"just a string"'])
def test_garbage_response_counts_as_a_model_failure(launch, script, garbage):
    bad = script({"raw": garbage, "status": 200, "repeat": True})
    good = script({"content": "sane answer"})
    run = launch("hi", models=[bad, good])
    assert run.answer == "sane answer"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and bad in step.model_errors[0]


def test_when_every_model_fails_the_run_fails_with_the_errors(launch, script):
    first = script({"status": 500, "error": "first exploded", "repeat": True, "headers": FAST})
    second = script({"status": 503, "error": "second unavailable", "repeat": True, "headers": FAST})
    run = launch("hi", models=[first, second, "script:nope"])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "model_error"
    assert "first exploded" in run.stop_detail
    assert "second unavailable" in run.stop_detail
    assert "script:nope" in run.stop_detail
    assert not Step.objects.filter(run=run).exists()


# --- 10. finish reasons and budgets ----------------------------------------------------------------


def test_length_finish_ends_the_run_as_max_tokens(launch, script):
    model = script({"content": "partial ans", "finish_reason": "length"})
    run = launch("long", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "max_tokens"


def test_length_finish_with_tool_calls_runs_no_tools(launch, script):
    model = script({**calls(call("probe", {"n": 1}, "c1")), "finish_reason": "length"})
    run = launch("long", models=[model], tools=["probe"])
    assert run.stop_reason == "max_tokens"
    assert REC.count("contract_probe") == 0
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SKIPPED


def test_refusal_ends_the_run_as_content_filter(launch, script):
    model = script({"refusal": "I can't help with that"})
    run = launch("bad request", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "content_filter"
    assert "I can't help with that" in run.stop_detail


def test_content_filter_finish_ends_the_run_as_content_filter(launch, script):
    model = script({"content": "", "finish_reason": "content_filter"})
    run = launch("bad request", models=[model])
    assert run.stop_reason == "content_filter"


def test_wall_time_budget_stops_the_run(launch, script):
    model = script(calls(call("probe", {"n": 1})), calls(call("probe", {"n": 2})), {"content": "late"}, latency=0.02)
    run = launch("slow", models=[model], tools=["probe"], max_wall_seconds=0.001, summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "time_budget"
    assert REC.count("contract_probe") == 0


def test_token_budget_stops_the_run(launch, script):
    model = script(
        {**calls(call("probe", {"n": 1}, "c1")), "usage": {"prompt_tokens": 300_000, "completion_tokens": 10}},
        {"content": "never asked"},
    )
    run = launch("tokens", models=[model], tools=["probe"])
    assert run.stop_reason == "token_budget"
    assert REC.count("contract_probe") == 0
    assert run.total_tokens == 300_010
    assert len(script.requests(model)) == 1


def test_cost_budget_stops_the_run(launch, script):
    model = script(
        {**calls(call("probe", {"n": 1}, "c1")), "usage": {"prompt_tokens": 10, "completion_tokens": 1, "cost": 2.5}},
        {"content": "never asked"},
    )
    run = launch("cost", models=[model], tools=["probe"], max_cost_usd=1.0)
    assert run.stop_reason == "cost_budget"
    assert run.cost_usd == pytest.approx(2.5)
    assert REC.count("contract_probe") == 0


def test_budget_spent_across_iterations_stops_the_run(launch, script):
    usage = {"usage": {"prompt_tokens": 60, "completion_tokens": 0}}
    model = script(
        {**calls(call("probe", {"n": 1})), **usage},
        {**calls(call("probe", {"n": 2})), **usage},
        {"content": "never asked"},
    )
    run = launch("tokens", models=[model], tools=["probe"], max_tokens=100)
    assert run.stop_reason == "token_budget"
    assert REC.count("contract_probe") == 1


# --- 11. destructive tools need a decision ---------------------------------------------------------


def test_destructive_call_parks_the_run_until_someone_decides(launch):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.PENDING
    assert approval.tool_call.tool_name == "cancel_order"
    assert approval.tool_call.status == ToolCall.Status.AWAITING_APPROVAL
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN


def test_approve_policy_runs_the_destructive_call(launch):
    run = launch("Cancel order ORD-1001", approval_policy="approve")
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer.startswith("Cancelled order ORD-1001")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.APPROVED and approval.automatic


def test_reject_policy_reaches_the_model_as_an_operator_rejection(launch, script):
    model = script(
        calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")), {"content": "ok"}
    )
    run = launch("cancel it", models=[model], approval_policy="reject")
    result = result_for(script.requests(model)[1], "c1")
    assert result["ok"] is False
    assert result["error"].startswith("rejected by operator: ")
    assert len(result["error"]) > len("rejected by operator: ")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.REJECTED


def test_operator_rejection_with_reason_reaches_the_model(launch, monkeypatch):
    from runs.services.approvals import approval_decide
    from runs.services.loop import run_advance

    monkeypatch.setattr("runs.services.approvals.run_dispatch", lambda run_id: None)
    run = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=None, approve=False, reason="too risky")
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert "I did not cancel order ORD-1001" in run.answer
    assert "rejected by operator: too risky" in run.answer
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    cancel = ToolCall.objects.get(run=run, tool_name="cancel_order")
    assert cancel.result == {"ok": False, "error": "rejected by operator: too risky"}


def test_operator_approval_lets_the_call_run(launch, monkeypatch):
    from runs.services.approvals import approval_decide
    from runs.services.loop import run_advance

    monkeypatch.setattr("runs.services.approvals.run_dispatch", lambda run_id: None)
    run = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    approval_decide(approval_id=approval.pk, user=None, approve=True)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer.startswith("Cancelled order ORD-1001")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED


def test_history_is_resent_in_full_when_a_parked_run_resumes(launch, script, monkeypatch):
    from runs.services.approvals import approval_decide
    from runs.services.loop import run_advance

    monkeypatch.setattr("runs.services.approvals.run_dispatch", lambda run_id: None)
    model = script(
        calls(call("lookup_order", {"order_id": "ORD-1003"}, "c1")),
        calls(call("cancel_order", {"order_id": "ORD-1003", "reason": "customer asked"}, "c2")),
        {"content": "Cancelled."},
    )
    run = launch("cancel ORD-1003", models=[model])
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=None, approve=True)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    requests = script.requests(model)
    assert len(requests) == 3
    before, after = requests[1]["messages"], requests[2]["messages"]
    assert after[: len(before)] == before
    assert [m["role"] for m in after[len(before):]] == ["assistant", "tool"]
    assert result_for(requests[2], "c2")["result"]["cancelled"] is True
    assert requests[2]["tools"] == requests[0]["tools"]


# --- 12. verification -------------------------------------------------------------------------------


def test_failed_verification_is_sent_back_once_then_ends_the_run(launch, script):
    make_agent("verified", verifier="ticket_exists")
    model = script({"content": "All done."}, {"content": "Still done."}, {"content": "never asked"})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == "verification_failed"
    assert "ticket number" in run.stop_detail
    requests = script.requests(model)
    assert len(requests) == 2
    feedback = requests[1]["messages"][-1]
    assert feedback["role"] == "user"
    assert feedback["content"].startswith("Verification failed: ")
    assert "ticket number" in feedback["content"]
    assert not any(m["content"].startswith("Verification failed") for m in requests[0]["messages"] if m["role"] == "user")


def test_answer_passing_verification_after_feedback_ends_as_final_answer(launch, script):
    make_agent("verified", verifier="ticket_exists")
    ticket = Ticket.objects.create(title="[TEST] x", body="b", priority="low")
    model = script({"content": "All done."}, {"content": f"Created ticket #{ticket.pk}."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    assert run.stop_reason == "final_answer"
    assert run.answer == f"Created ticket #{ticket.pk}."


def test_answer_passing_verification_first_time_ends_as_final_answer(launch, script):
    make_agent("verified", verifier="ticket_exists")
    ticket = Ticket.objects.create(title="[TEST] y", body="b", priority="low")
    model = script({"content": f"Ticket #{ticket.pk} is ready."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.stop_reason == "final_answer"
    assert len(script.requests(model)) == 1


def test_answer_naming_a_missing_ticket_fails_verification(launch, script):
    make_agent("verified", verifier="ticket_exists")
    model = script({"content": "Created #999991."}, {"content": "Created #999992."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.stop_reason == "verification_failed"
    assert "#999992" in run.stop_detail


# --- 13. idempotency keys ------------------------------------------------------------------------


def test_idempotency_key_is_derived_from_run_and_call_id(launch, script):
    first = script(calls(call("probe", {"n": 1}, "same_id")), calls(call("probe", {"n": 2}, "same_id")), {"content": "a"})
    second = script(calls(call("probe", {"n": 1}, "same_id")), {"content": "b"})
    run1 = launch("one", models=[first], tools=["probe"])
    run2 = launch("two", models=[second], tools=["probe"])
    keys = [(ctx.run_id, ctx.call_id, ctx.idempotency_key) for _, _, ctx in REC.calls]
    assert len(keys) == 3
    (r1a, _, k1a), (r1b, _, k1b), (r2, _, k2) = keys
    assert (r1a, r1b, r2) == (run1.pk, run1.pk, run2.pk)
    assert k1a == k1b  # same run, same call id
    assert k1a != k2  # same call id in another run
    assert all(k for _, _, k in keys)
    stored = set(ToolCall.objects.filter(run=run1).values_list("idempotency_key", flat=True))
    assert stored == {k1a}


def test_create_ticket_twice_with_same_arguments_makes_one_ticket(launch, script):
    args = {"title": "[TEST] printer on fire", "body": "smoke", "priority": "high"}
    model = script(
        calls(call("create_ticket", args, "c1")), calls(call("create_ticket", args, "c2")), {"content": "done"}
    )
    run = launch("tickets", models=[model], tools=["create_ticket"])
    assert run.stop_reason == "final_answer"
    assert Ticket.objects.filter(title="[TEST] printer on fire").count() == 1
    request = script.requests(model)[2]
    first, second = result_for(request, "c1")["result"], result_for(request, "c2")["result"]
    assert first["created"] is True and second["created"] is False
    assert first["ticket_id"] == second["ticket_id"]


def test_create_ticket_with_the_same_key_returns_the_earlier_ticket(launch, script):
    model = script(
        calls(call("create_ticket", {"title": "[TEST] one", "body": "a", "priority": "low"}, "dup")),
        calls(call("create_ticket", {"title": "[TEST] two", "body": "b", "priority": "low"}, "dup")),
        {"content": "done"},
    )
    launch("tickets", models=[model], tools=["create_ticket"])
    assert Ticket.objects.count() == 1
    request = script.requests(model)[2]
    results = [json.loads(m["content"])["result"] for m in tool_messages(request)]
    assert results[0]["ticket_id"] == results[1]["ticket_id"]
    assert results[1]["created"] is False


# --- 14. logging ---------------------------------------------------------------------------------

SECRET = "sk-live-9f8e7d6c5b4a-DO-NOT-LOG"


def test_one_structured_log_line_per_iteration_without_raw_arguments(launch, script, caplog):
    caplog.set_level(logging.DEBUG)
    model = script(
        calls(call("probe", {"n": 1, "api_key": SECRET}, "c1"), call("probe", {"n": SECRET}, "c2")),
        {"content": "done"},
    )
    run = launch("log", models=[model], tools=["probe"])
    assert run.stop_reason == "final_answer"

    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "runs.loop"]
    iterations = [line for line in lines if line.get("event") == "iteration"]
    assert [line["iteration"] for line in iterations] == [1, 2]
    first, last = iterations
    for line in iterations:
        assert line["run"] == run.pk
        assert line["model"] == model
        assert isinstance(line["latency_ms"], (int, float))
        assert {"tools", "args_hashes", "stop_reason"} <= set(line)
    assert first["tools"] == ["probe", "probe"]
    assert len(first["args_hashes"]) == 2 and all(first["args_hashes"])
    assert first["stop_reason"] is None
    assert last["tools"] == [] and last["stop_reason"] == "final_answer"

    for record in caplog.records:
        assert SECRET not in record.getMessage()
    assert SECRET not in caplog.text


# --- 15. real-server compatibility -----------------------------------------------------------------


def test_assistant_message_with_null_content_is_sent_back_with_empty_string(launch, script):
    model = script(calls(call("probe", {"n": 1}, "c1")), {"content": "done"})
    launch("null content", models=[model], tools=["probe"])
    assistant = script.requests(model)[1]["messages"][2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == "c1"


def test_refused_required_tool_choice_is_retried_with_auto(launch, script):
    model = script(
        {
            "if_tool_choice": "required",
            "status": 500,
            "error": "tool_choice required is not supported",
            "repeat": True,
            "headers": FAST,
        },
        {"content": "answered with auto"},
    )
    run = launch("required", models=[model], first_tool_choice="required")
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "answered with auto"
    requests = script.requests(model)
    assert requests[0]["tool_choice"] == "required"
    assert requests[-1]["tool_choice"] == "auto"
    assert [r["tool_choice"] for r in requests].count("auto") == 1
    step = Step.objects.get(run=run)
    assert step.tool_choice == "auto"
    assert step.tool_choice_fallback is True


def test_accepted_required_tool_choice_is_not_changed(launch, script):
    model = script({"content": "fine"})
    run = launch("required", models=[model], first_tool_choice="required")
    step = Step.objects.get(run=run)
    assert step.tool_choice == "required" and step.tool_choice_fallback is False
    assert [r["tool_choice"] for r in script.requests(model)] == ["required"]


# --- 16. every ending gives a clear answer ---------------------------------------------------------


def _ending(reason, launch, script):
    loop = calls(call("probe", {"n": 1}))
    if reason == "final_answer":
        return launch("x", models=[script({"content": "done"})])
    if reason == "iteration_limit":
        return launch("x", models=[script(loop)], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    if reason == "repeated_call":
        return launch("x", models=[script(loop, loop)], tools=["probe"], repeat_limit=2, summarize_on_stop=False)
    if reason == "model_error":
        return launch("x", models=["script:nope"])
    if reason == "max_tokens":
        return launch("x", models=[script({"content": "cut", "finish_reason": "length"})])
    if reason == "content_filter":
        return launch("x", models=[script({"content": "", "finish_reason": "content_filter"})])
    if reason == "time_budget":
        return launch(
            "x", models=[script(loop, latency=0.02)], tools=["probe"], max_wall_seconds=0.001, summarize_on_stop=False
        )
    if reason == "token_budget":
        return launch("x", models=[script({**loop, "usage": {"prompt_tokens": 10**6}})], tools=["probe"])
    if reason == "cost_budget":
        return launch("x", models=[script({**loop, "usage": {"cost": 5.0}})], tools=["probe"])
    if reason == "verification_failed":
        make_agent("verified", verifier="ticket_exists")
        return launch("x", agent="verified", models=[script({"content": "a"}, {"content": "b"})])
    if reason == "cancelled":
        from runs.services.runs import run_cancel, run_create

        run = run_create(agent=Agent.objects.get(name="demo"), task="x")
        return run_cancel(run=run)
    raise AssertionError(reason)


ENDINGS = [
    "final_answer",
    "iteration_limit",
    "repeated_call",
    "model_error",
    "max_tokens",
    "content_filter",
    "time_budget",
    "token_budget",
    "cost_budget",
    "verification_failed",
    "cancelled",
]


@pytest.mark.parametrize("reason", ENDINGS)
def test_every_ending_has_a_plain_words_stop_detail(launch, script, reason):
    run = _ending(reason, launch, script)
    assert run.stop_reason == reason
    assert run.is_finished and run.finished_at is not None
    detail = run.stop_detail
    assert detail == detail.strip() and detail
    assert detail != reason and " " in detail
    assert "Traceback" not in detail and "None" not in detail


def test_cancel_during_a_run_stops_before_the_next_model_request(launch, script):
    model = script(calls(call("cancel_me", {}, "c1")), {"content": "never asked"})
    run = launch("cancel me", models=[model], tools=["cancel_me"])
    assert run.status == Run.Status.CANCELLED
    assert run.stop_reason == "cancelled"
    assert run.stop_detail == "Cancelled by an operator."
    assert len(script.requests(model)) == 1
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SUCCEEDED


def test_summary_on_stop_makes_one_tools_free_call_and_uses_it_as_the_answer(launch, script):
    model = script(
        calls(call("probe", {"n": 1}, "c1"), call("probe", {"n": 2}, "c2")),
        {"content": "I was stopped before running the probes; nothing was changed."},
        {"content": "never asked"},
    )
    run = launch("summarise", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=True)
    assert run.stop_reason == "iteration_limit"
    assert run.answer == "I was stopped before running the probes; nothing was changed."
    requests = script.requests(model)
    assert len(requests) == 2
    summary_request = requests[1]
    assert summary_request["tool_choice"] == "none"
    assert "Do not call any tools" in summary_request["messages"][-1]["content"]
    # The history it reads still answers every call.
    assert [m["tool_call_id"] for m in tool_messages(summary_request)] == ["c1", "c2"]
    steps = list(Step.objects.filter(run=run).order_by("index").values_list("kind", flat=True))
    assert steps == ["turn", "summary"]
    assert REC.count("contract_probe") == 0


def test_without_summary_on_stop_no_extra_request_is_made(launch, script):
    model = script(calls(call("probe", {"n": 1})), {"content": "never asked"})
    run = launch("no summary", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    assert run.stop_reason == "iteration_limit"
    assert len(script.requests(model)) == 1
    assert run.answer == ""
