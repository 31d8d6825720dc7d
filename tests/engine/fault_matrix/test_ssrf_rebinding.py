"""Fault matrix: DNS rebinding against an HTTP tool. The tool's host name answers the guard's
lookup with an allowlisted address and any later lookup with an internal one; the request must
reach only the address that was checked. (MCP servers and agent endpoints have the same test in
tests/tools/test_mcp.py and tests/notifications/test_notifications.py; webhooks send through the same
`toolsapp.net.post_bytes` as HTTP tools.)"""
import socket

import pytest

from runs.models import Run
from tests.tools.test_http_tools import http_tool, run_with_call, tool_server  # noqa: F401 (fixture)

NAME = "rebind.fault-matrix.test"


def test_an_http_tool_whose_name_resolves_elsewhere_after_the_check_reaches_only_the_checked_address(
    launch, script, tool_server, monkeypatch  # noqa: F811
):
    real_getaddrinfo = socket.getaddrinfo
    answers = []

    def rebinding_getaddrinfo(host, *args, **kwargs):
        if host not in (NAME, NAME.encode()):
            return real_getaddrinfo(host, *args, **kwargs)
        address = "127.0.0.1" if not answers else "127.0.0.2"  # the first answer is the checked one
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, tool_server.port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    with socket.socket() as internal:
        internal.bind(("127.0.0.2", tool_server.port))
        internal.listen()
        internal.settimeout(0.5)
        tool = http_tool(f"http://{NAME}:{tool_server.port}/stock")
        run, result = run_with_call(launch, script, tool, {"sku": "ABC-12"})
        with pytest.raises(TimeoutError):
            internal.accept()  # nobody came to the internal address

    assert answers[:1] == ["127.0.0.1"]
    assert run.status == Run.Status.SUCCEEDED
    assert result == {"ok": True, "result": {"sku": "ABC-12", "in_stock": 7}}
    assert len(tool_server.requests) == 1
