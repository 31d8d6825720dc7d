"""The demo model's script logic without sockets: a request in, a Reply out."""

import json

import pytest

from runs.demo_model.answers import Reply, answer, usage_of
from runs.demo_model.model import DemoModel
from runs.demo_model.scripts import Script, validate_entries


def post(model: DemoModel, body: dict) -> tuple[Reply, dict | str]:
    reply = model.handle("POST", "/v1/chat/completions", json.dumps(body).encode())
    try:
        return reply, json.loads(reply.body)
    except ValueError:
        return reply, reply.body.decode()


def test_delay_is_server_latency_plus_entry_or_script_latency():
    model = DemoModel(latency=0.5)
    name = model.create_script([{"content": "a", "latency": 0.2}, {"content": "b"}], latency=0.1)["model"]
    reply, data = post(model, {"model": name, "messages": []})
    assert (reply.status, reply.delay, data["choices"][0]["message"]["content"]) == (200, 0.7, "a")
    assert post(model, {"model": name, "messages": []})[0].delay == pytest.approx(0.6)
    assert post(model, {"model": "demo", "messages": []})[0].delay == 0.5
    model.latency = 0.0
    assert post(model, {"model": "demo", "messages": []})[0].delay == 0.0


def test_errors_are_replies_without_delay():
    model = DemoModel(latency=1.0)
    reply, data = post(model, {"model": "script:nope", "messages": []})
    assert (reply.status, reply.delay, data["error"]["code"]) == (404, 0.0, "model_not_found")
    reply = model.handle("POST", "/v1/chat/completions", b"[1]")
    assert (reply.status, json.loads(reply.body)["error"]["message"]) == (400, "request body must be a JSON object")
    assert model.handle("GET", "/v1/nowhere?x=1").status == 404
    assert model.handle("PUT", "/v1/models").status == 501


def test_a_refused_stream_is_recorded_but_consumes_no_entry():
    model = DemoModel()
    created = model.create_script([{"content": "only"}], streaming="refuse")
    body = {"model": created["model"], "messages": [], "stream": True}
    reply, data = post(model, body)
    assert reply.status == 400 and data["error"]["code"] == "unsupported_parameter"
    assert post(model, dict(body, stream=False))[1]["choices"][0]["message"]["content"] == "only"
    assert model.script_requests(created["id"]) == [body, dict(body, stream=False)]
    assert json.loads(model.handle("GET", f"/v1/scripts/{created['id']}/requests/").body) == [body, dict(body, stream=False)]


def test_models_endpoint_knows_scripts():
    model = DemoModel()
    name = model.create_script([])["model"]
    assert json.loads(model.handle("GET", f"/v1/models/{name}").body)["id"] == name
    assert model.handle("GET", "/v1/models/script:unknown").status == 404
    assert json.loads(model.handle("GET", "/v1/models/anything").body)["owned_by"].endswith("not a language model)")


def test_take_if_tool_choice_and_repeat():
    script = Script("s", [{"if_tool_choice": "required", "content": "r", "repeat": True}, {"content": "auto"}], 0.0)
    assert script.take("auto")["content"] == "auto"
    assert script.take("required")["content"] == "r"
    assert script.take(None) == {"content": "script exhausted"}
    assert len(script.entries) == 1


def test_validate_entries_and_create_script():
    assert validate_entries("x") == "'responses' must be a list of entries"
    assert validate_entries([{"latency": True}]) == "responses[0].latency must be a number"
    assert validate_entries([{}, {"status": 99}]) == "responses[1].status must be an HTTP status code"
    assert validate_entries([{"tool_calls": ["x"]}]) == "responses[0].tool_calls must be a list of objects"
    with pytest.raises(ValueError):
        DemoModel().create_script([{"headers": []}])
    reply = DemoModel().handle("POST", "/v1/scripts", b'{"responses": [], "latency": "1"}')
    assert (reply.status, json.loads(reply.body)["error"]["message"]) == (400, "'latency' must be a number")


def test_answer_error_raw_and_headers():
    reply = answer({"status": 503, "headers": {"Retry-After": "1"}}, "m", [])
    body = json.loads(reply.body)["error"]
    assert (reply.status, reply.headers, body["message"], body["type"]) == (
        503, {"Retry-After": "1"}, "Service Unavailable", "server_error"
    )
    assert answer({"raw": {"a": 1}}, "m", []) == Reply(200, b'{"a": 1}', {})
    assert answer({"raw": b"\xff", "status": 502}, "m", []).body == b"\xff"


def test_usage_estimate_counts_text_parts_and_arguments():
    messages = [{"role": "user", "content": [{"type": "text", "text": "abcd" * 3}, {"type": "image"}]}, "junk"]
    calls = [{"function": {"arguments": "12345678"}}]
    assert usage_of({}, messages, "abcd", calls) == {"prompt_tokens": 3 + 20, "completion_tokens": 4, "total_tokens": 27}
    assert usage_of({"usage": {"total_tokens": 1}}, [], None, None)["total_tokens"] == 1


def _events(reply: Reply) -> list:
    return [json.loads(part[6:]) for _, part in reply.parts if part.startswith(b"data: {")]


def test_a_streamed_entry_is_sent_in_chunks_that_add_up_to_the_plain_answer():
    model = DemoModel()
    entry = {"content": "Hello streaming world", "tool_calls": [{"name": "t", "arguments": {"a": 1}, "id": "c1"}],
             "stream": {"chunk_chars": 4, "chunk_delay": 0.1}}
    name = model.create_script([entry, dict(entry)])["model"]
    body = {"model": name, "messages": [], "stream": True, "stream_options": {"include_usage": True}}
    reply, _ = post(model, body)
    assert reply.headers["Content-Type"] == "text/event-stream" and not reply.cut
    events = _events(reply)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    arguments = "".join(call["function"]["arguments"] for e in events if e["choices"]
                        for call in e["choices"][0]["delta"].get("tool_calls") or ())
    plain = post(model, dict(body, stream=False))[1]
    assert text == "Hello streaming world" == plain["choices"][0]["message"]["content"]
    assert json.loads(arguments) == {"a": 1}
    assert events[-1]["usage"] == plain["usage"] and reply.parts[-1][1] == b"data: [DONE]\n\n"
    assert [wait for wait, _ in reply.parts[1:]] == [0.1] * (len(reply.parts) - 1)


def test_a_stream_can_be_cut_and_can_leave_out_its_usage():
    model = DemoModel()
    name = model.create_script([{"content": "abcdefgh", "stream": {"chunk_chars": 2, "cut_after": 3}},
                                {"content": "abc", "stream": {"usage": False}}])["model"]
    body = {"model": name, "messages": [], "stream": True, "stream_options": {"include_usage": True}}
    cut, _ = post(model, body)
    assert cut.cut and len(cut.parts) == 3
    whole, _ = post(model, body)
    assert not whole.cut and all("usage" not in e for e in _events(whole))


def test_an_ignoring_script_answers_a_stream_request_plainly_and_bad_settings_are_refused():
    model = DemoModel()
    name = model.create_script([{"content": "plain"}], streaming="ignore")["model"]
    reply, data = post(model, {"model": name, "messages": [], "stream": True})
    assert reply.parts is None and data["choices"][0]["message"]["content"] == "plain"
    with pytest.raises(ValueError, match="'streaming' must be one of stream, refuse, ignore"):
        model.create_script([], streaming="sometimes")
    assert validate_entries([{"stream": True}]) == "responses[0].stream must be an object"
