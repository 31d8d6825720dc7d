"""Answers real providers send: each exact body goes over HTTP through the openai client (a raw
script entry), and the run ends as the README promises: errors as data, a model's failure counted
as that model's (its fallback asked), a clear stop reason, never `internal_error`.
"""
import json

import pytest

from runs.models import Run, RunEvent, Step, ToolCall
from tests.engine.loop_contract.support import REC, result_for
from toolsapp.models import Ticket

LONE_SURROGATE = "\ud83d"  # half an emoji: what a model sends when it cuts a multi-byte character
NUL = "\u0000"  # valid JSON, refused by PostgreSQL's jsonb and text
REPLACEMENT = "\ufffd"


def completion(message: dict, finish_reason: str = "stop", **choice) -> dict:
    """An OpenAI-shaped chat completion body holding one choice."""
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 0,
        "model": "raw",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason, **choice}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def raw(body: dict, **entry) -> dict:
    # json.dumps escapes the odd characters ("\ud83d", "\u0000"), as a provider's body does.
    return {"raw": json.dumps(body), "status": 200, **entry}


def tool_call(name: str, arguments: str, call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


PROVIDER_ERROR = {"code": 502, "message": "Provider returned error"}


# --- an error inside a 200 answer ------------------------------------------------------------------


def test_a_choice_that_finished_with_an_error_is_that_models_failure_and_its_fallback_answers(launch, script):
    bad = script(raw(completion({"content": ""}, finish_reason="error", error=PROVIDER_ERROR), repeat=True))
    good = script({"content": "from the fallback"})
    run = launch("hi", models=[bad, good])
    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER,
                                                          "from the fallback")
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1
    assert bad in step.model_errors[0] and "Provider returned error" in step.model_errors[0]
    assert "502" in step.model_errors[0]


def test_a_choice_that_finished_with_an_error_on_the_only_model_ends_as_a_model_error(launch, script):
    bad = script(raw(completion({"content": None}, finish_reason="error", error=PROVIDER_ERROR), repeat=True))
    run = launch("hi", models=[bad])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "Provider returned error" in run.stop_detail
    assert run.answer == "" and not Step.objects.filter(run=run).exists()


def test_a_body_that_is_only_an_error_keeps_the_providers_message_in_the_stop_detail(launch, script):
    bad = script(raw({"error": PROVIDER_ERROR}, repeat=True))
    run = launch("hi", models=[bad])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "the response has no choices" in run.stop_detail
    assert "Provider returned error" in run.stop_detail and "502" in run.stop_detail


# --- characters a database or an encoder refuses ---------------------------------------------------


@pytest.mark.parametrize("odd", [LONE_SURROGATE, NUL], ids=["lone surrogate", "NUL"])
def test_an_answer_holding_a_character_that_cannot_be_stored_is_kept_with_it_replaced_and_said_so(
    launch, script, odd
):
    model = script(raw(completion({"content": f"Lagos is sunny {odd}today"})))
    run = launch("hi", models=[model])
    assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER), run.stop_detail
    assert run.answer == f"Lagos is sunny {REPLACEMENT}today"
    step = Step.objects.get(run=run)
    assert step.message["content"] == run.answer
    assert len(step.notes) == 1 and "replaced" in step.notes[0] and "U+FFFD" in step.notes[0]
    event = RunEvent.objects.get(run=run, kind="step").data
    assert event["content"] == run.answer and event["notes"] == step.notes


@pytest.mark.parametrize(
    "arguments",
    [
        '{"n": 1, "note": "x' + LONE_SURROGATE + '"}',  # the character itself in the arguments string
        '{"n": 1, "note": "x\\ud83d"}',  # escaped inside the arguments' own JSON
        '{"n": 1, "note": "x' + NUL + '"}',
        '{"n": 1, "note": "x\\u0000"}',
    ],
    ids=["lone surrogate", "escaped lone surrogate", "NUL", "escaped NUL"],
)
def test_call_arguments_holding_a_character_that_cannot_be_stored_run_with_it_replaced(launch, script, arguments):
    model = script(
        raw(completion({"content": None, "tool_calls": [tool_call("probe", arguments)]}, finish_reason="tool_calls")),
        {"content": "done"},
    )
    run = launch("use the tool", models=[model], tools=["probe"], summarize_on_stop=False)
    assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER), run.stop_detail
    assert [args for name, args, _ in REC.calls] == [{"n": 1, "note": "x" + REPLACEMENT}]
    row = ToolCall.objects.get(run=run)
    assert row.status == ToolCall.Status.SUCCEEDED
    assert json.loads(row.arguments) == {"n": 1, "note": "x" + REPLACEMENT}
    requests = script.requests(model)
    assert result_for(requests[1], "c1") == {"ok": True, "result": {"n": 1, "seen": True}}
    echoed = [m for m in requests[1]["messages"] if m["role"] == "assistant"][0]
    assert json.loads(echoed["tool_calls"][0]["function"]["arguments"]) == {"n": 1, "note": "x" + REPLACEMENT}
    notes = Step.objects.filter(run=run).order_by("index").first().notes
    assert len(notes) == 1 and "arguments of call c1" in notes[0] and "U+FFFD" in notes[0]


def test_a_nul_in_a_tools_arguments_reaches_a_tool_that_writes_it_to_the_database_replaced(launch, script):
    arguments = json.dumps({"title": "[TEST] broken\u0000 printer", "body": "it jams", "priority": "low"})
    model = script(
        raw(completion({"content": "", "tool_calls": [tool_call("create_ticket", arguments)]}, "tool_calls")),
        {"content": "done"},
    )
    run = launch("open a ticket", models=[model], tools=["create_ticket"], summarize_on_stop=False)
    assert (run.status, run.stop_reason) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER), run.stop_detail
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == ToolCall.Status.SUCCEEDED, call_row.error
    assert Ticket.objects.filter(title=f"[TEST] broken{REPLACEMENT} printer").count() == 1


# --- content given as a list of parts --------------------------------------------------------------

PARTS = [
    {"type": "thinking", "thinking": "The user wants Lagos. It is sunny there.", "signature": "sig"},
    {"type": "text", "text": "Lagos is sunny."},
]


def test_content_given_as_parts_answers_with_the_text_and_keeps_the_reasoning_apart(launch, script):
    model = script(raw(completion({"content": PARTS})))
    run = launch("weather in Lagos?", models=[model])
    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER,
                                                          "Lagos is sunny.")
    step = Step.objects.get(run=run)
    assert step.message == {"role": "assistant", "content": "Lagos is sunny."}
    assert step.reasoning == "The user wants Lagos. It is sunny there."
    event = RunEvent.objects.get(run=run, kind="step").data
    assert event["content"] == "Lagos is sunny." and event["reasoning"] == step.reasoning


def test_the_reasoning_of_parts_is_never_sent_back_to_the_model(launch, script):
    thinking = [{"type": "thinking", "thinking": "secret plan 77"}, {"type": "text", "text": "Checking."}]
    model = script(
        raw(completion({"content": thinking, "tool_calls": [tool_call("probe", '{"n": 1}')]}, "tool_calls")),
        {"content": "done"},
    )
    run = launch("use the tool", models=[model], tools=["probe"], summarize_on_stop=False)
    assert run.answer == "done"
    second = script.requests(model)[1]
    echoed = [m for m in second["messages"] if m["role"] == "assistant"][0]
    assert echoed["content"] == "Checking."
    assert "secret plan 77" not in json.dumps(second)
    assert Step.objects.filter(run=run).order_by("index").first().reasoning == "secret plan 77"


def test_a_reasoning_field_beside_the_content_is_kept_apart_too(launch, script):
    model = script(raw(completion({"content": "Lagos is sunny.", "reasoning_content": "Look it up first."})))
    run = launch("weather in Lagos?", models=[model])
    step = Step.objects.get(run=run)
    assert run.answer == "Lagos is sunny." and step.reasoning == "Look it up first."
