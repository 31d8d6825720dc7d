"""Each request carries the whole history and the allowed tools; a plain answer ends the run; real servers' quirks."""
import json

from runs.models import Run, Step, ToolCall
from tests.engine.loop_contract.support import FAST, call, calls
from toolsapp.models import Tool

# --- 1. every request carries the full history and the allowed tools -----------------------------


def test_every_request_carries_full_history_and_allowed_tool_definitions(launch, script):
    model = script(
        calls(call("get_weather", {"city": "Lagos"}, "c1")),
        calls(call("probe", {"n": 2}, "c2")),
        {"content": "Lagos is sunny."},
    )
    run = launch("weather please", models=[model], tools=["get_weather", "probe"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
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
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert run.answer == "The answer is 42."
    assert run.iterations == 1
    assert not ToolCall.objects.filter(run=run).exists()


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
