"""Streams real servers send: each exact body goes over HTTP through the openai client (a raw script
entry with its own headers), and the run reads it as the server meant it: every parallel call run,
a provider's error kept in words, an undecodable body that model's failure (its fallback asked).
"""
import json

import pytest

from runs.engine.llm import completions as llm
from runs.models import Agent, Run, Step, ToolCall
from tests.engine.loop_contract.support import result_for

FINAL = "Lagos is sunny; one printer ticket is open."


@pytest.fixture(autouse=True)
def _streams_allowed_again():
    # Which servers refused to stream is remembered per process; each test starts afresh.
    llm._plain_only.clear()
    yield
    llm._plain_only.clear()


def sse(*chunks) -> dict:
    """A raw script entry: the chunks as server-sent events, then [DONE], as one exact body."""
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return {"raw": body, "headers": {"Content-Type": "text/event-stream"}}


def chunk(delta: dict | None = None, finish_reason: str | None = None, model: str = "llama3.1") -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]}


def weather_and_tickets(run: Run) -> list[tuple]:
    return list(ToolCall.objects.filter(run=run).order_by("index").values_list("tool_name", "arguments", "status"))


BOTH_RAN = [("get_weather", '{"city": "Lagos"}', ToolCall.Status.SUCCEEDED),
            ("search_tickets", '{"query": "printer"}', ToolCall.Status.SUCCEEDED)]


def test_ollamas_parallel_calls_all_at_index_0_are_two_calls_and_both_run(launch, script):
    # Ollama's OpenAI endpoint: each call whole in a chunk of its own, a fresh id each, index 0 both.
    ollama = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_w", "index": 0, "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Lagos"}'}}]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_t", "index": 0, "type": "function",
             "function": {"name": "search_tickets", "arguments": '{"query": "printer"}'}}]}),
        chunk({"role": "assistant", "content": ""}, finish_reason="tool_calls"),
    )
    model = script(ollama, {"content": FINAL})
    run = launch("weather and tickets?", models=[model], tools=["get_weather", "search_tickets"])
    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER, FINAL)
    assert weather_and_tickets(run) == BOTH_RAN
    second = script.requests(model)[1]
    assert result_for(second, "call_w")["ok"] is True and result_for(second, "call_t")["ok"] is True
    assert [c["function"]["name"] for c in second["messages"][-3]["tool_calls"]] == ["get_weather", "search_tickets"]


def test_an_ollama_chunk_holding_both_calls_at_index_0_without_ids_is_two_calls(launch, script):
    # No ids at all: a new name after complete arguments starts the next call.
    ollama = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lagos"}'}},
            {"index": 0, "type": "function", "function": {"name": "search_tickets", "arguments": '{"query": "printer"}'}},
        ]}),
        chunk({}, finish_reason="tool_calls"),
    )
    model = script(ollama, {"content": FINAL})
    run = launch("weather and tickets?", models=[model], tools=["get_weather", "search_tickets"])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    assert weather_and_tickets(run) == BOTH_RAN


def test_pieces_of_calls_without_an_index_belong_to_the_call_in_progress_until_a_new_id(launch, script):
    # mistral.rs and some proxies: the id and name first, the arguments in pieces, no index anywhere.
    def piece(**fields):
        return chunk({"tool_calls": [fields]}, model="mistral")

    unindexed = sse(
        piece(id="call_w", type="function", function={"name": "get_weather", "arguments": ""}),
        piece(function={"arguments": '{"city": '}),
        piece(function={"arguments": '"Lagos"}'}),
        piece(id="call_t", type="function", function={"name": "search_tickets"}),
        piece(function={"arguments": '{"query"'}),
        piece(function={"arguments": ': "printer"}'}),
        chunk({}, finish_reason="tool_calls", model="mistral"),
    )
    model = script(unindexed, {"content": FINAL})
    run = launch("weather and tickets?", models=[model], tools=["get_weather", "search_tickets"])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    assert weather_and_tickets(run) == BOTH_RAN
    (first, _second) = Step.objects.filter(run=run).order_by("index")
    assert [c["id"] for c in first.message["tool_calls"]] == ["call_w", "call_t"]


def test_a_new_id_on_every_piece_of_a_call_keeps_it_one_call_and_it_runs(launch, script):
    # vllm.rs and vLLM's harmony streaming send a fresh id with each piece of the same call.
    def piece(index, call_id, **function):
        return chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]})

    fresh_ids = sse(
        piece(0, "call_w1", name="get_weather", arguments='{"city": '),
        piece(0, "call_w2", arguments='"Lagos"}'),
        piece(1, "call_t1", name="search_tickets", arguments='{"query"'),
        piece(1, "call_t2", arguments=': "printer"}'),
        chunk({}, finish_reason="tool_calls"),
    )
    model = script(fresh_ids, {"content": FINAL})
    run = launch("weather and tickets?", models=[model], tools=["get_weather", "search_tickets"])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    assert weather_and_tickets(run) == BOTH_RAN
    second = script.requests(model)[1]
    assert result_for(second, "call_w1")["ok"] is True and result_for(second, "call_t1")["ok"] is True


VLLM_ERROR = {"object": "error", "message": "guided decoding failed: the grammar could not be compiled",
              "type": "BadRequestError", "param": None, "code": 400}


def test_vllms_error_in_the_stream_is_that_models_failure_with_the_providers_words(launch, script):
    # vLLM writes its error as a chunk of its own, then [DONE], with no finish reason.
    vllm, good = script(sse(VLLM_ERROR)), script({"content": FINAL})
    run = launch("hi", models=[vllm, good])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    (step,) = Step.objects.filter(run=run)
    assert len(step.model_errors) == 1
    assert step.model_errors[0].startswith(f"{vllm}: ")
    assert "guided decoding failed: the grammar could not be compiled" in step.model_errors[0]


def test_vllms_error_after_some_text_keeps_the_providers_words_too(launch, script):
    vllm = script({**sse(chunk({"role": "assistant", "content": "Lagos is"}, model="vllm"), VLLM_ERROR), "repeat": True})
    run = launch("hi", models=[vllm])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "guided decoding failed: the grammar could not be compiled" in run.stop_detail


NOT_GZIP = {"Content-Encoding": "gzip"}


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "plain"])
def test_a_body_labelled_gzip_that_is_not_gzip_is_that_models_failure_and_the_next_model_answers(
    launch, script, streamed
):
    Agent.objects.filter(name="demo").update(stream_answers=streamed)
    content_type = "text/event-stream" if streamed else "application/json"
    body = sse(chunk({"content": "hi"}, finish_reason="stop"))["raw"] if streamed else json.dumps({"choices": []})
    bad = script({"raw": body, "headers": {**NOT_GZIP, "Content-Type": content_type}, "repeat": True})
    good = script({"content": FINAL})
    run = launch("hi", models=[bad, good])
    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER, FINAL)
    (step,) = Step.objects.filter(run=run)
    assert step.model == good and len(step.model_errors) == 1
    assert step.model_errors[0].startswith(f"{bad}: ")
    assert "the answer could not be decoded (labelled Content-Encoding: gzip): " in step.model_errors[0]
    assert len(script.requests(bad)) == 1  # not retried: the same server sends the same body


def test_a_body_labelled_gzip_that_is_not_gzip_on_the_only_model_ends_as_a_model_error(launch, script):
    bad = script({"raw": "data: not gzip at all\n\n", "repeat": True,
                  "headers": {**NOT_GZIP, "Content-Type": "text/event-stream"}})
    run = launch("hi", models=[bad])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "could not be decoded (labelled Content-Encoding: gzip" in run.stop_detail
