"""HTTP tools against real local HTTP servers, and the guard against server-side request forgery.

Every server here listens on 127.0.0.1, a loopback address: it is reachable only because the test
names its port in OUTBOUND_ALLOWLIST. A second server that is never allowlisted stands for the
internal service an attacker would like to reach; the tests check it received nothing.
"""
import json
import socket
import time
from http.server import BaseHTTPRequestHandler

import pytest

from runs.models import Run
from tests.tools.local_http import LocalServer
from toolsapp import net
from toolsapp.models import Tool

SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}},
    "required": ["sku"],
    "additionalProperties": False,
}


class ToolServer(LocalServer):
    """A real HTTP server that records what it receives and answers by path."""

    def __init__(self):
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                route = self.path.split("?")[0]
                if route == "/stock":
                    args = json.loads(body)["arguments"]
                    self._json(200, {"sku": args["sku"], "in_stock": 7})
                elif route == "/redirect307":
                    self.send_response(307)
                    self.send_header("Location", self.path.split("?to=", 1)[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif route == "/redirect302":
                    self.send_response(302)
                    self.send_header("Location", "/stock")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif route == "/big":
                    self._raw(200, b"[" + b"1," * 600_000 + b"1]")
                elif route == "/deep":
                    self._raw(200, b"[" * 200_000 + b"]" * 200_000)
                elif route == "/slow":
                    time.sleep(3)
                    self._json(200, {})
                elif route == "/html":
                    self._raw(200, b"<html>hello</html>", "text/html")
                elif route == "/fail":
                    self._json(503, {"error": "maintenance until noon"})
                else:
                    self._json(404, {"error": "no such path"})

            def _json(self, status, data):
                self._raw(status, json.dumps(data).encode())

            def _raw(self, status, data, content_type="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client stopped reading (size cap)

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}"



@pytest.fixture
def tool_server(settings):
    server = ToolServer()
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{server.port}"]
    yield server
    server.stop()


@pytest.fixture
def internal_server():
    """Not allowlisted: must never receive a request."""
    server = ToolServer()
    yield server
    server.stop()


@pytest.fixture
def no_connections(monkeypatch):
    """Fail if anything opens a TCP connection (for addresses no test server can listen on)."""
    attempts = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise AssertionError(f"a connection was attempted to {address}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def http_tool(url, name="check_stock", **fields):
    return Tool.objects.create(
        name=name, description="Stock level of one product.", parameters=SCHEMA, kind="http",
        config={"url": url}, timeout_seconds=fields.pop("timeout_seconds", 5), **fields,
    )


def run_with_call(launch, script, tool, arguments):
    """A run whose model calls `tool` once, then answers -> (run, the result the model read)."""
    model = script({"tool_calls": [{"id": "call_1", "name": tool.name, "arguments": arguments}]}, {"content": "done"})
    run = launch("check stock", models=[model], tools=[tool.name], summarize_on_stop=False)
    requests = script.requests(model)
    results = [m for m in requests[-1]["messages"] if m["role"] == "tool"] if len(requests) > 1 else []
    return run, (json.loads(results[0]["content"]) if results else None)


# --- a working HTTP tool through the loop -------------------------------------------------------


def test_http_tool_result_reaches_the_model_with_the_idempotency_key_sent(launch, script, tool_server):
    tool = http_tool(tool_server.url + "/stock")
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})

    assert run.status == Run.Status.SUCCEEDED
    assert result == {"ok": True, "result": {"sku": "ABC-12", "in_stock": 7}}
    [received] = tool_server.requests
    body = json.loads(received["body"])
    assert body["arguments"] == {"sku": "ABC-12"} and body["tool"] == "check_stock"
    assert body["run_id"] == run.pk and body["call_id"] == "call_1"
    assert received["headers"]["Idempotency-Key"] == body["idempotency_key"] != ""
    assert received["headers"]["Host"] == f"127.0.0.1:{tool_server.port}"


def test_invalid_arguments_never_reach_the_http_server(launch, script, tool_server):
    tool = http_tool(tool_server.url + "/stock")
    run, result = run_with_call(launch, script, tool, {"sku": "not a sku"})
    assert result["ok"] is False and "does not match" in result["error"]
    assert tool_server.requests == []


def test_a_destructive_http_tool_waits_for_an_operator_before_any_request(launch, script, tool_server):
    tool = http_tool(tool_server.url + "/stock", destructive=True)
    run, _ = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert tool_server.requests == []


def test_the_secret_comes_from_the_environment_and_is_never_stored(launch, script, tool_server, monkeypatch, settings):
    monkeypatch.setenv("TOOL_SECRET_STOCK", "s3cr3t-value")
    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_STOCK": ["127.0.0.1"]}  # the operator allows this host
    tool = http_tool(tool_server.url + "/stock")
    tool.config["secret_env"] = "TOOL_SECRET_STOCK"
    tool.save()
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is True
    assert tool_server.requests[0]["headers"]["Authorization"] == "Bearer s3cr3t-value"
    assert "s3cr3t-value" not in json.dumps(Tool.objects.get(pk=tool.pk).config)


@pytest.mark.parametrize("path, message", [
    ("/fail", "answered HTTP 503: {\"error\": \"maintenance until noon\"}"),
    ("/html", "is not JSON"),
    ("/big", "larger than"),
    ("/deep", "is JSON nested deeper than 64 levels"),
    ("/redirect302", "302 redirect"),
])
def test_bad_answers_come_back_to_the_model_as_errors(launch, script, tool_server, settings, path, message):
    settings.TOOL_HTTP_MAX_RESPONSE_BYTES = 1_000_000
    tool = http_tool(tool_server.url + path)
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert run.status == Run.Status.SUCCEEDED  # the model read the error and answered
    assert result["ok"] is False and message in result["error"]


def test_a_slow_http_tool_times_out(launch, script, tool_server):
    tool = http_tool(tool_server.url + "/slow", timeout_seconds=0.5)
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is False and "timed out" in result["error"]


# --- server-side request forgery ----------------------------------------------------------------


def test_loopback_target_is_refused_and_receives_nothing(launch, script, tool_server, internal_server):
    tool = http_tool(internal_server.url + "/stock")
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is False
    assert "refused before sending" in result["error"] and "127.0.0.1" in result["error"]
    assert internal_server.requests == []


def test_cloud_metadata_address_is_refused_without_connecting(launch, script, no_connections):
    tool = http_tool("http://169.254.169.254/latest/meta-data/")
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is False and "169.254.169.254" in result["error"]
    assert no_connections == []


def test_redirect_to_a_private_address_is_refused_and_nothing_is_requested(
    launch, script, tool_server, internal_server
):
    tool = http_tool(f"{tool_server.url}/redirect307?to={internal_server.url}/stock")
    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    assert result["ok"] is False and "refused before sending" in result["error"]
    assert [r["path"].split("?")[0] for r in tool_server.requests] == ["/redirect307"]
    assert internal_server.requests == []


def test_allowed_redirect_keeps_the_post_and_its_body(tool_server):
    response = net.post_json(f"{tool_server.url}/redirect307?to=/stock", {"arguments": {"sku": "X"}}, timeout=5)
    assert response.status == 200 and response.json()["sku"] == "X"
    assert [json.loads(r["body"]) for r in tool_server.requests] == [{"arguments": {"sku": "X"}}] * 2


@pytest.mark.parametrize("url", [
    "http://localhost:{port}/stock",
    "http://127.0.0.2:{port}/stock",
    "http://[::ffff:127.0.0.1]:{port}/stock",
    "http://2130706433:{port}/stock",  # 127.0.0.1 written as one number
    "http://0.0.0.0:{port}/stock",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://100.100.100.200/",  # Alibaba Cloud metadata (shared address space)
    "http://[fd00:ec2::254]/",  # AWS metadata over IPv6
    "http://[fe80::1]/",
    "http://224.0.0.1/",
])
def test_non_public_addresses_are_refused_before_connecting(url, internal_server, no_connections):
    with pytest.raises(net.Blocked):
        net.post_json(url.format(port=internal_server.port), {}, timeout=2)
    assert no_connections == []


@pytest.mark.parametrize("url, reason", [
    ("ftp://example.com/x", "only http and https"),
    ("http://user:pw@example.com/", "credentials"),
    ("http:///nohost", "no host"),
    ("http://example.com:99999/", "not a valid URL"),
])
def test_malformed_urls_are_refused_with_a_reason(url, reason, no_connections):
    with pytest.raises(net.Blocked, match=reason):
        net.check_url(url)


def test_allowlist_entries(settings, internal_server):
    port = internal_server.port
    for entries, allowed in [
        ([f"127.0.0.1:{port}"], True),
        ([f"127.0.0.1:{port + 1}"], False),
        (["127.0.0.0/8"], True),
        (["10.0.0.0/8"], False),
        (["localhost"], False),  # names the host, not the address the URL uses
    ]:
        settings.OUTBOUND_ALLOWLIST = entries
        try:
            net.check_url(f"{internal_server.url}/x")
            outcome = True
        except net.Blocked:
            outcome = False
        assert outcome is allowed, entries
    settings.OUTBOUND_ALLOWLIST = ["localhost"]
    assert net.check_url(f"http://localhost:{port}/x").address in ("127.0.0.1", "::1")
