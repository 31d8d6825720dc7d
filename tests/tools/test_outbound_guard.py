"""The outbound-request guard beyond plain addresses: IPv6 forms that embed an internal IPv4
address, credentials along redirects to another origin, and malformed allowlist entries.

Servers are real, on 127.0.0.1 and 127.0.0.2 (two origins); they are reachable only because each
test names them in OUTBOUND_ALLOWLIST.
"""
import ipaddress
import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from runs.models import Run
from tests.tools.local_http import LocalServer
from tests.tools.test_http_tools import http_tool, internal_server, no_connections, run_with_call  # noqa: F401
from toolsapp import net

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-9f8e7d6c"


class Recorder(LocalServer):
    """Records each POST; /to?url=X answers 307 to X, anything else 200 with {"ok": true} (or,
    with `redirect_all` set, 307 to that origin and the same path)."""

    def __init__(self, host="127.0.0.1", port=0):
        self.requests: list[dict] = []
        self.redirect_all = ""
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if self.path.startswith("/to?url=") or recorder.redirect_all:
                    self.send_response(307)
                    self.send_header("Location", recorder.redirect_all + self.path if recorder.redirect_all
                                     else self.path.split("=", 1)[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(Handler, host, port)
        self.url = f"http://{host}:{self.port}"



@pytest.fixture
def two_origins(settings):
    first, second = Recorder("127.0.0.1"), Recorder("127.0.0.2")
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{first.port}", f"127.0.0.2:{second.port}"]
    yield first, second
    first.stop()
    second.stop()


# --- IPv6 addresses that lead to an internal IPv4 address ----------------------------------------


@pytest.mark.parametrize("address", [
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
    "64:ff9b:1::a00:1",  # local-use NAT64 (RFC 8215)
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::127.0.0.1",  # IPv4-compatible
    "::a00:1",  # IPv4-compatible 10.0.0.1
    "::ffff:a9fe:a9fe",  # IPv4-mapped 169.254.169.254
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1 (obfuscated in the address)
])
def test_ipv6_forms_of_internal_ipv4_addresses_are_refused_before_connecting(address, internal_server, no_connections):  # noqa: F811
    with pytest.raises(net.Blocked, match="private, loopback"):
        net.post_json(f"http://[{address}]:{internal_server.port}/x", {}, timeout=2)
    assert no_connections == [] and internal_server.requests == []


def test_an_ipv6_form_counts_as_the_ipv4_address_it_embeds():
    # A NAT64 network reaches public IPv4 hosts through 64:ff9b::/96: those stay reachable.
    assert net._public(ipaddress.ip_address("64:ff9b::808:808"))  # 8.8.8.8
    assert net._public(ipaddress.ip_address("2002:808:808::1"))
    assert not net._public(ipaddress.ip_address("64:ff9b::c0a8:101"))  # 192.168.1.1


def test_an_allowlisted_ipv4_address_also_allows_its_mapped_form(settings, internal_server):  # noqa: F811
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{internal_server.port}"]
    assert net.check_url(f"http://[::ffff:127.0.0.1]:{internal_server.port}/x").address == "::ffff:7f00:1"


# --- redirects to another origin carry no credentials --------------------------------------------


def test_a_307_to_another_host_does_not_carry_the_tools_secret(launch, script, settings, monkeypatch, two_origins):
    first, second = two_origins
    monkeypatch.setenv("TOOL_SECRET_STOCK", SECRET)
    settings.TOOL_SECRET_HOSTS = {"TOOL_SECRET_STOCK": ["127.0.0.1"]}
    tool = http_tool(f"{first.url}/to?url={second.url}/stock")
    tool.config["secret_env"] = "TOOL_SECRET_STOCK"
    tool.save()

    run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})

    assert run.status == Run.Status.SUCCEEDED and result == {"ok": True, "result": {"ok": True}}
    assert first.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    [forwarded] = second.requests
    assert "Authorization" not in forwarded["headers"] and SECRET not in json.dumps(forwarded["headers"])
    assert json.loads(forwarded["body"])["arguments"] == {"sku": "ABC-12"}  # the POST and its body are kept


def test_a_redirect_within_the_same_origin_keeps_the_authorization(two_origins):
    first, _ = two_origins
    response = net.post_json(f"{first.url}/to?url=/stock", {}, timeout=5, headers={"Authorization": "Bearer x"})
    assert response.status == 200
    assert [r["headers"].get("Authorization") for r in first.requests] == ["Bearer x", "Bearer x"]


def test_a_body_holding_a_secret_is_not_resent_to_another_origin(two_origins):
    first, second = two_origins
    with pytest.raises(net.OutboundError, match="holds a secret"):
        net.post_json(
            f"{first.url}/to?url={second.url}/x", {"note": f"token={SECRET}"}, timeout=5,
            headers={"X-Api-Key": SECRET}, secrets=(SECRET,),
        )
    assert len(first.requests) == 1 and second.requests == []


def test_headers_holding_a_secret_are_dropped_on_a_cross_origin_redirect(two_origins):
    first, second = two_origins
    net.post_json(f"{first.url}/to?url={second.url}/x", {}, timeout=5,
                  headers={"X-Api-Key": SECRET, "Cookie": "a=b", "X-Trace": "1"}, secrets=(SECRET,))
    [received] = second.requests
    assert received["headers"].get("X-Trace") == "1"
    assert "X-Api-Key" not in received["headers"] and "Cookie" not in received["headers"]


# --- malformed allowlist entries are an error at start ------------------------------------------


def _start_django(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('started')"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", **env},
    )


def test_malformed_allowlist_entries_stop_the_process_at_start():
    bad = ["10.0.0.0/33", "127.0.0.1:99999", "http://tools.internal", "tools internal", "[::1"]
    started = _start_django(OUTBOUND_ALLOWLIST=",".join(["tools.internal", *bad]))
    assert started.returncode != 0 and "started" not in started.stdout
    assert "OUTBOUND_ALLOWLIST is malformed" in started.stderr
    assert [entry for entry in bad if repr(entry) not in started.stderr] == []
    assert "'tools.internal'" not in started.stderr  # a good entry is not reported


@pytest.mark.worker  # starts Django in a process of its own
def test_well_formed_allowlist_entries_start():
    started = _start_django(OUTBOUND_ALLOWLIST="tools.internal,127.0.0.1:9000,[::1]:9000,::1,10.1.0.0/16")
    assert started.returncode == 0, started.stderr


def test_a_malformed_entry_set_at_run_time_refuses_instead_of_being_skipped(settings, internal_server):  # noqa: F811
    settings.OUTBOUND_ALLOWLIST = ["10.0.0.0/33", f"127.0.0.1:{internal_server.port}"]
    with pytest.raises(net.Blocked, match="malformed"):
        net.check_url(f"{internal_server.url}/x")


# --- routes the fault matrix lists that had no test yet ----------------------------------------------


def test_an_http_tool_whose_name_resolves_elsewhere_after_the_check_reaches_only_the_checked_address(
    launch, script, settings, monkeypatch
):
    # DNS rebinding: the check sees the allowlisted 127.0.0.1; any later answer is 127.0.0.2,
    # where an internal service listens on the same port. The request must go to the address checked.
    import socket

    public = Recorder("127.0.0.1")
    internal = Recorder("127.0.0.2", port=public.port)
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{public.port}"]
    real_getaddrinfo, answers = socket.getaddrinfo, []

    def rebinding(host, *args, **kwargs):
        if host != "tools.rebind.test":
            return real_getaddrinfo(host, *args, **kwargs)
        answers.append("127.0.0.1" if not answers else "127.0.0.2")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[-1], public.port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        tool = http_tool(f"http://tools.rebind.test:{public.port}/stock")
        run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
    finally:
        public.stop()
        internal.stop()
    assert result == {"ok": True, "result": {"ok": True}}
    assert len(public.requests) == 1 and public.requests[0]["headers"]["Host"] == f"tools.rebind.test:{public.port}"
    assert internal.requests == []


def test_an_agent_endpoint_redirecting_to_an_internal_address_reaches_nothing(launch, settings):
    first, internal = Recorder("127.0.0.1"), Recorder("127.0.0.2")  # internal: never allowlisted
    settings.OUTBOUND_ALLOWLIST = [f"127.0.0.1:{first.port}"]
    first.redirect_all = internal.url
    try:
        run = launch("hello", models=["gpt-x"], base_url=f"{first.url}/v1")
    finally:
        first.stop()
        internal.stop()
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert first.requests and internal.requests == []
    assert "127.0.0.2" in run.stop_detail and "refused" in run.stop_detail
