"""Tests of the offline demo model server (standard library only, no Django)."""

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runs.demo_model import OWNED_BY, start_server

ROOT = Path(__file__).resolve().parents[3]

WEATHER_TOOLS = ["get_weather"]
TICKET_TOOLS = ["search_tickets", "create_ticket", "get_ticket"]
ORDER_TOOLS = ["lookup_order", "cancel_order"]


@pytest.fixture(scope="module")
def server():
    srv = start_server()
    yield srv
    srv.stop()


# -- helpers -----------------------------------------------------------------


def request(method, url, body=None, raw_body=None):
    """-> (status, headers, parsed JSON or raw text)."""
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, headers, payload = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        status, headers, payload = exc.code, exc.headers, exc.read()
    text = payload.decode()
    try:
        return status, headers, json.loads(text)
    except ValueError:
        return status, headers, text


def chat(server, messages, tools=None, model="demo", **extra):
    body = {"model": model, "messages": messages, **extra}
    if tools is not None:
        body["tools"] = [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in tools
        ]
    return request("POST", server.url + "/chat/completions", body)


def ok_chat(server, messages, tools=None, model="demo", **extra):
    status, _, data = chat(server, messages, tools, model, **extra)
    assert status == 200, data
    return data


def script(server, responses, **extra):
    status, _, data = request("POST", server.url + "/scripts", {"responses": responses, **extra})
    assert status == 200, data
    assert data["model"] == f"script:{data['id']}"
    return data["model"]


def user(text):
    return {"role": "user", "content": text}


def assistant_turn(data):
    """The assistant message as an agent would send it back."""
    msg = data["choices"][0]["message"]
    out = {"role": "assistant", "content": msg["content"] or ""}
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    return out


def tool_results(data, *results):
    calls = data["choices"][0]["message"]["tool_calls"]
    assert len(calls) == len(results)
    return [
        {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(r)} for c, r in zip(calls, results)
    ]


def calls_of(data):
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in data["choices"][0]["message"]["tool_calls"]
    ]


def content_of(data):
    choice = data["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert "tool_calls" not in choice["message"]
    return choice["message"]["content"]


# -- basics ------------------------------------------------------------------


def test_models_says_it_is_a_script(server):
    status, _, data = request("GET", server.url + "/models")
    assert status == 200
    assert data["object"] == "list"
    assert data["data"][0]["id"] == "demo"
    assert data["data"][0]["owned_by"] == OWNED_BY == "offline demo model (a script, not a language model)"


def test_url_and_response_shape(server):
    assert server.url == f"http://127.0.0.1:{server.port}/v1"
    data = ok_chat(server, [user("hello")], tools=WEATHER_TOOLS, model="my-model")
    assert data["id"].startswith("chatcmpl-")
    assert data["object"] == "chat.completion"
    assert isinstance(data["created"], int)
    assert data["model"] == "my-model"
    choice = data["choices"][0]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["refusal"] is None
    assert "not a language model" in choice["message"]["content"]
    assert "Cancel order ORD-1001" in choice["message"]["content"]
    usage = data["usage"]
    assert usage["prompt_tokens"] == len("hello") // 4 + 10
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_streaming_is_refused_by_a_script_that_says_so(server):
    model = server.create_script([{"content": "plain"}], streaming="refuse")["model"]
    status, _, data = request("POST", server.url + "/chat/completions",
                              {"model": model, "messages": [user("hi")], "stream": True})
    assert status == 400
    assert "streaming is switched off" in data["error"]["message"]
    assert data["error"]["type"] == "invalid_request_error"


def test_the_demo_model_streams_through_the_official_client(server):
    import openai

    client = openai.OpenAI(base_url=server.url, api_key="demo")
    chunks = list(client.chat.completions.create(model="demo", messages=[user("hello")], stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    plain = client.chat.completions.create(model="demo", messages=[user("hello")])
    assert text == plain.choices[0].message.content and len([c for c in chunks if c.choices]) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_bad_requests(server):
    status, _, data = request("POST", server.url + "/chat/completions", raw_body=b"{oops")
    assert status == 400 and "not valid JSON" in data["error"]["message"]
    status, _, data = request("POST", server.url + "/chat/completions", {"model": "demo"})
    assert status == 400 and "messages" in data["error"]["message"]
    status, _, data = request("GET", server.url + "/nowhere")
    assert status == 404 and "error" in data
    status, _, data = request("POST", server.url + "/scripts", {"responses": ["not a dict"]})
    assert status == 400


def test_keep_alive_on_one_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    body = json.dumps({"model": "demo", "messages": [user("hi")]})
    for _ in range(5):
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        assert int(resp.getheader("Content-Length")) > 0
        json.loads(resp.read())
    sock = conn.sock
    assert sock is not None  # still the same open connection
    conn.close()


# -- demo scenarios ------------------------------------------------------------


def test_weather_conversation_turn_by_turn(server):
    messages = [{"role": "system", "content": "You are helpful."}, user("What's the weather in Lagos and London?")]
    first = ok_chat(server, messages, tools=WEATHER_TOOLS)
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert first["choices"][0]["message"]["content"] is None
    assert calls_of(first) == [("get_weather", {"city": "Lagos"}), ("get_weather", {"city": "London"})]
    ids = [c["id"] for c in first["choices"][0]["message"]["tool_calls"]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)

    messages += [assistant_turn(first)] + tool_results(
        first,
        {"ok": True, "result": {"city": "Lagos", "temperature_c": 31, "conditions": "sunny"}},
        {"ok": True, "result": {"city": "London", "temperature_c": 12, "conditions": "light rain"}},
    )
    final = ok_chat(server, messages, tools=WEATHER_TOOLS)
    assert content_of(final) == "Lagos: 31°C, sunny. London: 12°C, light rain."


def test_weather_one_city_and_errors(server):
    first = ok_chat(server, [user("weather in london please")], tools=WEATHER_TOOLS)
    assert calls_of(first) == [("get_weather", {"city": "London"})]

    messages = [user("How is the weather?")]
    first = ok_chat(server, messages, tools=WEATHER_TOOLS)
    assert [a["city"] for _, a in calls_of(first)] == ["Lagos", "London"]
    messages += [assistant_turn(first)] + tool_results(
        first,
        {"ok": False, "error": "no weather data for 'Lagos'"},
        {"truncated": True, "preview": "{\"city\": \"Lon", "original_size": 90000},
    )
    text = content_of(ok_chat(server, messages, tools=WEATHER_TOOLS))
    assert "Lagos: error (no weather data for 'Lagos')." in text
    assert "London:" in text


def test_ticket_scenario_to_created(server):
    task = "Create a ticket about the login page being slow"
    messages = [user(task)]
    step = ok_chat(server, messages, tools=TICKET_TOOLS)
    assert calls_of(step) == [("search_tickets", {"query": task[:60]})]
    messages += [assistant_turn(step)] + tool_results(step, {"ok": True, "result": {"tickets": []}})

    step = ok_chat(server, messages, tools=TICKET_TOOLS)
    [(name, args)] = calls_of(step)
    assert name == "create_ticket"
    assert args == {"title": "[TEST] The login page being slow", "body": task, "priority": "low"}
    messages += [assistant_turn(step)] + tool_results(
        step, {"ok": True, "result": {"ticket_id": 42, "title": args["title"], "created": True}}
    )

    step = ok_chat(server, messages, tools=TICKET_TOOLS)
    assert calls_of(step) == [("get_ticket", {"ticket_id": 42})]
    messages += [assistant_turn(step)] + tool_results(step, {"ok": True, "result": {"ticket_id": 42}})

    final = ok_chat(server, messages, tools=TICKET_TOOLS)
    assert content_of(final) == "Created ticket #42: [TEST] The login page being slow"


def test_ticket_create_failure_and_missing_tool(server):
    messages = [user("Open a ticket: printer on fire")]
    step = ok_chat(server, messages, tools=["create_ticket"])  # no search offered: goes straight to create
    [(name, args)] = calls_of(step)
    assert name == "create_ticket" and args["title"] == "[TEST] Printer on fire"
    messages += [assistant_turn(step)] + tool_results(step, {"ok": False, "error": "title must start with"})
    text = content_of(ok_chat(server, messages, tools=["create_ticket"]))
    assert "title must start with" in text

    text = content_of(ok_chat(server, [user("create a ticket")], tools=["get_weather"]))
    assert "create_ticket" in text and "not offered" in text


def _cancel_until_final(server, cancel_result):
    messages = [user("Please cancel order ord-1001, thanks")]
    step = ok_chat(server, messages, tools=ORDER_TOOLS)
    assert calls_of(step) == [("lookup_order", {"order_id": "ORD-1001"})]
    messages += [assistant_turn(step)] + tool_results(
        step, {"ok": True, "result": {"order_id": "ORD-1001", "status": "paid"}}
    )
    step = ok_chat(server, messages, tools=ORDER_TOOLS)
    assert calls_of(step) == [("cancel_order", {"order_id": "ORD-1001", "reason": "Customer asked to cancel"})]
    messages += [assistant_turn(step)] + tool_results(step, cancel_result)
    return content_of(ok_chat(server, messages, tools=ORDER_TOOLS))


def test_cancel_approved(server):
    text = _cancel_until_final(server, {"ok": True, "result": {"status": "cancelled"}})
    assert text.startswith("Cancelled order ORD-1001.")
    assert "cancelled" in text[len("Cancelled order ORD-1001."):]


def test_cancel_rejected_by_operator(server):
    text = _cancel_until_final(server, {"ok": False, "error": "rejected by operator: not allowed today"})
    assert text == (
        "I did not cancel order ORD-1001: the operator rejected it "
        "(rejected by operator: not allowed today)."
    )


def test_cancel_other_error_and_failed_lookup(server):
    text = _cancel_until_final(server, {"ok": False, "error": "order ORD-1001 has shipped"})
    assert "order ORD-1001 has shipped" in text and not text.startswith("Cancelled")

    messages = [user("Cancel order ORD-7")]
    step = ok_chat(server, messages, tools=ORDER_TOOLS)
    messages += [assistant_turn(step)] + tool_results(step, {"ok": False, "error": "order ORD-7 not found"})
    text = content_of(ok_chat(server, messages, tools=ORDER_TOOLS))
    assert "order ORD-7 not found" in text and "did not cancel" in text


def test_stuck_repeats_identical_arguments(server):
    messages = [user("stuck")]
    seen_ids = set()
    for _ in range(4):
        step = ok_chat(server, messages, tools=TICKET_TOOLS)
        assert calls_of(step) == [("get_ticket", {"ticket_id": 999999})]
        seen_ids.add(step["choices"][0]["message"]["tool_calls"][0]["id"])
        messages += [assistant_turn(step)] + tool_results(step, {"ok": False, "error": "ticket 999999 does not exist"})
    assert len(seen_ids) == 4


def test_no_tools_or_tool_choice_none_gives_summary(server):
    messages = [user("What's the weather in Lagos and London?")]
    step = ok_chat(server, messages, tools=WEATHER_TOOLS)
    messages += [assistant_turn(step)] + tool_results(
        step,
        {"ok": True, "result": {"city": "Lagos", "temperature_c": 31, "conditions": "sunny"}},
        {"ok": False, "error": "boom"},
    )
    for kwargs in ({}, {"tools": WEATHER_TOOLS, "tool_choice": "none"}):
        text = content_of(ok_chat(server, messages, **kwargs))
        assert text.startswith("Summary from the offline demo model (a script, not a language model): ")
        assert "2 tool calls were made (get_weather x2)" in text
        assert "boom" in text


def test_verification_failed_is_acknowledged(server):
    messages = [
        user("Create a ticket about X"),
        {"role": "assistant", "content": "Created ticket #5: [TEST] X"},
        user("Verification failed: ticket #5 does not exist"),
    ]
    text = content_of(ok_chat(server, messages, tools=TICKET_TOOLS))
    assert text == "I re-checked: Verification failed: ticket #5 does not exist"


# -- scripts -------------------------------------------------------------------


def test_script_content_and_tool_calls(server):
    model = script(
        server,
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}, "id": "call_1"}], "content": "looking"},
            {"tool_calls": [{"name": "get_weather", "arguments": "{not json"}, {"name": "x", "arguments": []}]},
            {"content": "done"},
        ],
    )
    data = ok_chat(server, [user("a")], model=model)
    assert data["model"] == model
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "looking"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lagos"}'}}
    ]
    data = ok_chat(server, [user("a")], model=model)
    calls = data["choices"][0]["message"]["tool_calls"]
    assert data["choices"][0]["message"]["content"] is None
    assert calls[0]["function"]["arguments"] == "{not json"
    assert calls[1]["function"]["arguments"] == "[]"
    assert calls[0]["id"] != calls[1]["id"] and calls[0]["id"].startswith("call_")
    data = ok_chat(server, [user("a")], model=model)
    assert content_of(data) == "done"
    # exhausted
    data = ok_chat(server, [user("a")], model=model)
    assert content_of(data) == "script exhausted"


def test_script_finish_reason_override_and_refusal(server):
    model = script(
        server,
        [
            {"content": "partial", "finish_reason": "length"},
            {"content": "", "finish_reason": "content_filter"},
            {"refusal": "I can't help with that"},
        ],
    )
    choice = ok_chat(server, [user("a")], model=model)["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("partial", "length")
    choice = ok_chat(server, [user("a")], model=model)["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "content_filter")
    choice = ok_chat(server, [user("a")], model=model)["choices"][0]
    assert choice["message"]["refusal"] == "I can't help with that"
    assert choice["message"]["content"] is None
    assert choice["finish_reason"] == "stop"


def test_script_error_status_headers_and_raw(server):
    model = script(
        server,
        [
            {"status": 500, "error": "boom", "headers": {"Retry-After": "0.01"}},
            {"status": 429, "error": {"message": "slow down", "code": "rate_limit_exceeded"}},
            {"raw": "this is not json"},
            {"raw": "<html>bad gateway</html>", "status": 502},
            {"content": "after"},
        ],
    )
    status, headers, data = chat(server, [user("a")], model=model)
    assert status == 500
    assert headers["Retry-After"] == "0.01"
    assert data["error"]["message"] == "boom"
    assert data["error"]["type"] == "server_error"
    assert set(data["error"]) >= {"message", "type", "code"}
    status, _, data = chat(server, [user("a")], model=model)
    assert status == 429
    assert data["error"]["code"] == "rate_limit_exceeded"
    assert data["error"]["type"] == "rate_limit_error"
    status, headers, data = chat(server, [user("a")], model=model)
    assert (status, data) == (200, "this is not json")
    assert headers["Content-Type"] == "application/json"
    status, _, data = chat(server, [user("a")], model=model)
    assert (status, data) == (502, "<html>bad gateway</html>")
    assert content_of(ok_chat(server, [user("a")], model=model)) == "after"


def test_script_usage_override_and_estimate(server):
    model = script(server, [{"content": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 500}}, {"content": "abcdefgh"}])
    usage = ok_chat(server, [user("a")], model=model)["usage"]
    assert usage == {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    messages = [{"role": "system", "content": "s" * 40}, user("u" * 41)]
    usage = ok_chat(server, messages, model=model)["usage"]
    assert usage["prompt_tokens"] == 81 // 4 + 20
    assert usage["completion_tokens"] == 8 // 4 + 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_script_if_tool_choice(server):
    model = script(
        server,
        [
            {"if_tool_choice": "required", "status": 500, "error": "tool_choice required is not supported"},
            {"content": "answered with auto"},
            {"if_tool_choice": "required", "status": 500, "error": "required refused"},
            {"content": "never reached"},
        ],
    )
    # 1st entry does not apply to "auto": consumed anyway, the next one answers.
    assert content_of(ok_chat(server, [user("a")], tools=["t"], tool_choice="auto", model=model)) == "answered with auto"
    # 3rd entry applies to "required".
    status, _, data = chat(server, [user("a")], tools=["t"], tool_choice="required", model=model)
    assert status == 500 and data["error"]["message"] == "required refused"
    assert content_of(ok_chat(server, [user("a")], model=model)) == "never reached"

    # object tool_choice is compared as raw JSON
    forced = {"type": "function", "function": {"name": "t"}}
    model = script(server, [{"if_tool_choice": forced, "content": "forced"}])
    assert content_of(ok_chat(server, [user("a")], tools=["t"], tool_choice=forced, model=model)) == "forced"


def test_script_repeat_and_latency(server):
    model = script(server, [{"content": "once"}, {"content": "again", "repeat": True}])
    texts = [content_of(ok_chat(server, [user("a")], model=model)) for _ in range(4)]
    assert texts == ["once", "again", "again", "again"]

    model = script(server, [{"content": "slow", "latency": 0.2}, {"content": "default"}], latency=0.1)
    started = time.perf_counter()
    ok_chat(server, [user("a")], model=model)
    assert time.perf_counter() - started >= 0.2
    started = time.perf_counter()
    ok_chat(server, [user("a")], model=model)
    assert time.perf_counter() - started >= 0.1


def test_server_latency_attribute():
    srv = start_server(latency=0.15)
    try:
        assert srv.latency == 0.15
        started = time.perf_counter()
        ok_chat(srv, [user("a")])
        assert time.perf_counter() - started >= 0.15
        srv.latency = 0.0
        started = time.perf_counter()
        ok_chat(srv, [user("a")])
        assert time.perf_counter() - started < 0.15
    finally:
        srv.stop()


def test_requests_are_recorded(server):
    model = script(server, [{"content": "one"}, {"content": "two"}])
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    first = {"model": model, "messages": [user("a")], "tools": tools, "tool_choice": "auto"}
    second = {"model": model, "messages": [user("a"), {"role": "assistant", "content": "one"}, user("b")], "temperature": 0}
    request("POST", server.url + "/chat/completions", first)
    request("POST", server.url + "/chat/completions", second)
    status, _, data = request("GET", f"{server.url}/scripts/{model[len('script:'):]}/requests")
    assert status == 200
    assert data == [first, second]
    assert server.script_requests(model[len("script:"):]) == [first, second]


def test_recording_can_be_turned_off(server):
    model = script(server, [{"content": "x", "repeat": True}], record=False)
    ok_chat(server, [user("a")], model=model)
    status, _, data = request("GET", f"{server.url}/scripts/{model[len('script:'):]}/requests")
    assert (status, data) == (200, [])


def test_unknown_script(server):
    status, _, data = chat(server, [user("a")], model="script:doesnotexist")
    assert status == 404
    assert "model not found" in data["error"]["message"]
    status, _, data = request("GET", server.url + "/scripts/doesnotexist/requests")
    assert status == 404


def test_scripts_are_per_server(server):
    model = script(server, [{"content": "mine"}])
    other = start_server()
    try:
        status, _, _ = chat(other, [user("a")], model=model)
        assert status == 404
    finally:
        other.stop()


def test_stop_closes_the_server():
    srv = start_server()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("GET", "/v1/models")
    conn.getresponse().read()
    srv.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(srv.url + "/models", timeout=2)
    conn.close()


def test_command_line_serves():
    proc = subprocess.Popen(
        [sys.executable, "-m", "runs.demo_model", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        line = proc.stdout.readline().strip()
        assert "not a language model" in line
        url = line.rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        status, _, data = request("GET", url + "/models")
        assert status == 200 and data["data"][0]["id"] == "demo"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
