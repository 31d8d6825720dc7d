"""Reassembling a streamed answer's tool calls from the pieces each server sends (runs/engine/llm/stream.py).
The same shapes go through the real HTTP client and a whole run in loop_contract/test_provider_streams.py."""
import json

import pytest

from runs.engine.llm.answers import provider_error
from runs.engine.llm.stream import StreamedAnswer, StreamError, sse_chunks


def calls_of(*pieces_per_chunk) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of each call, after chunks whose deltas hold those tool-call pieces."""
    answer = StreamedAnswer()
    for pieces in pieces_per_chunk:
        answer.add({"choices": [{"index": 0, "delta": {"tool_calls": pieces}}]})
    answer.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body, _ = answer.completion(prompt_chars=0)
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in body["choices"][0]["message"]["tool_calls"]]


def fn(name=None, arguments=None) -> dict:
    return {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}


def test_openais_calls_each_at_its_own_index_interleaved():
    assert calls_of(
        [{"index": 0, "id": "a", "function": fn("get_weather", "")}],
        [{"index": 1, "id": "b", "function": fn("search_tickets", "")}],
        [{"index": 0, "function": fn(arguments='{"city": ')}, {"index": 1, "function": fn(arguments='{"query": ')}],
        [{"index": 0, "function": fn(arguments='"Lagos"}')}, {"index": 1, "function": fn(arguments='"printer"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}'), ("b", "search_tickets", '{"query": "printer"}')]


def test_ollamas_calls_all_at_index_0_with_new_ids_are_separate_calls():
    assert calls_of(
        [{"index": 0, "id": "a", "function": fn("get_weather", '{"city": "Lagos"}')}],
        [{"index": 0, "id": "b", "function": fn("search_tickets", '{"query": "printer"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}'), ("b", "search_tickets", '{"query": "printer"}')]



def test_a_new_id_in_a_piece_of_its_own_after_a_complete_call_begins_the_next_call_under_that_id():
    # Every call at index 0, its id (and type) sent ahead of its name and arguments: the second
    # call keeps its own id, not none (its result would be paired with no call).
    assert calls_of(
        [{"index": 0, "id": "a", "type": "function"}],
        [{"index": 0, "function": fn("get_weather", '{"city": "Lagos"}')}],
        [{"index": 0, "id": "b", "type": "function"}],
        [{"index": 0, "function": fn("get_weather", '{"city": "London"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}'), ("b", "get_weather", '{"city": "London"}')]

def test_calls_at_index_0_without_ids_split_on_a_new_name_after_complete_arguments():
    # The same tool twice, both whole in one chunk: a new name after complete JSON starts a call.
    assert calls_of(
        [{"index": 0, "function": fn("get_weather", '{"city": "Lagos"}')},
         {"index": 0, "function": fn("get_weather", '{"city": "London"}')}],
    ) == [("", "get_weather", '{"city": "Lagos"}'), ("", "get_weather", '{"city": "London"}')]


def test_pieces_without_an_index_continue_the_call_in_progress_until_a_new_id():
    assert calls_of(
        [{"id": "a", "type": "function", "function": fn("get_weather", "")}],
        [{"function": fn(arguments='{"city": ')}],
        [{"function": fn(arguments='"Lagos"}')}],
        [{"id": "b", "type": "function", "function": fn("search_tickets")}],
        [{"function": fn(arguments='{"query": "printer"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}'), ("b", "search_tickets", '{"query": "printer"}')]


def test_one_call_without_an_index_in_many_pieces_is_one_call():
    assert calls_of(
        [{"id": "a", "function": fn("get_weather")}],
        [{"function": fn(arguments="{")}], [{"function": fn(arguments='"city"')}], [{"function": fn(arguments=': "Lagos"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}')]


def test_a_name_in_pieces_before_the_arguments_is_one_name():
    assert calls_of(
        [{"index": 0, "id": "a", "function": fn("get_")}], [{"index": 0, "function": fn("weather", '{"city": "Lagos"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}')]


def test_a_server_repeating_the_id_and_name_in_every_piece_gives_one_call_named_once():
    assert calls_of(
        [{"index": 0, "id": "a", "function": fn("get_weather", '{"city": ')}],
        [{"index": 0, "id": "a", "function": fn("get_weather", '"Lagos"}')}],
    ) == [("a", "get_weather", '{"city": "Lagos"}')]


def test_a_new_id_on_every_piece_of_one_call_keeps_it_one_call():
    # vllm.rs and vLLM's harmony streaming: a fresh id with each piece, at the same index.
    assert calls_of(
        [{"index": 0, "id": "a1", "function": fn("get_weather", '{"city": ')}],
        [{"index": 0, "id": "a2", "function": fn(arguments='"Lagos"}')}],
        [{"index": 0, "id": "b1", "function": fn("search_tickets", '{"query": ')}],
        [{"index": 0, "id": "b2", "function": fn(arguments='"printer"}')}],
    ) == [("a1", "get_weather", '{"city": "Lagos"}'), ("b1", "search_tickets", '{"query": "printer"}')]


def test_a_name_repeated_in_every_piece_without_ids_is_named_once():
    assert calls_of(
        [{"index": 0, "function": fn("get_weather", '{"city": ')}],
        [{"index": 0, "function": fn("get_weather", '"Lagos"}')}],
        [{"index": 0, "function": fn("get_weather", '{"city": "Paris"}')}],
    ) == [("", "get_weather", '{"city": "Lagos"}'), ("", "get_weather", '{"city": "Paris"}')]


def test_a_call_sent_without_arguments_and_a_new_id_naming_another_tool_are_two_calls():
    assert calls_of(
        [{"index": 0, "id": "a", "function": fn("list_orders")}],
        [{"index": 0, "id": "b", "function": fn("get_weather", '{"city": "Lagos"}')}],
    ) == [("a", "list_orders", ""), ("b", "get_weather", '{"city": "Lagos"}')]


def test_the_calls_shown_while_streaming_are_split_the_same_way():
    answer = StreamedAnswer()
    for call_id, name, arguments in (("a", "get_weather", '{"city": "Lagos"}'), ("b", "search_tickets", "{")):
        answer.add({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": call_id, "function": fn(name, arguments)}]}}]})
    assert answer.calls_so_far() == [("get_weather", '{"city": "Lagos"}'), ("search_tickets", "{")]


VLLM_ERROR = {"object": "error", "message": "guided decoding failed", "type": "BadRequestError", "param": None,
              "code": 400}


def test_vllms_error_chunk_is_raised_with_its_message():
    lines = f"data: {json.dumps(VLLM_ERROR)}\n\ndata: [DONE]\n\n".split("\n")
    with pytest.raises(StreamError, match="the server sent an error in the stream: 400: guided decoding failed"):
        list(sse_chunks(lines))


def test_the_providers_words_are_read_from_every_error_shape():
    assert provider_error(VLLM_ERROR) == "400: guided decoding failed"
    assert provider_error({"error": {"code": 502, "message": "upstream failed"}}) == "502: upstream failed"
    assert provider_error({"error": "plain words"}) == "plain words"
    assert provider_error({"object": "chat.completion.chunk", "choices": []}) == ""
