"""HTTP framing of the offline demo model over raw sockets: chunked bodies, 100-continue, closing."""

import json
import socket

import pytest

from runs.demo_model import start_server

BODY = json.dumps({"model": "demo", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture(scope="module")
def server():
    srv = start_server()
    yield srv
    srv.stop()


def exchange(server, data: bytes, timeout: float = 5) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def split(response: bytes) -> tuple[str, dict, bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}, body


def test_chunked_request_body_is_decoded_and_recorded(server):
    model = server.create_script([{"content": "chunked ok"}])["model"]
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "x" * 100}]}).encode()
    chunked = b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, body[:10], len(body) - 10, body[10:])
    response = exchange(
        server,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + chunked,
    )
    status, headers, data = split(response)
    assert status == "HTTP/1.1 200 OK"
    assert int(headers["content-length"]) == len(data)
    assert json.loads(data)["choices"][0]["message"]["content"] == "chunked ok"
    assert server.script_requests(model.split(":", 1)[1]) == [json.loads(body)]


@pytest.mark.parametrize(
    "head",
    [
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",  # chunk size that is not hex
        b"Content-Length: -3\r\n\r\n",
    ],
)
def test_malformed_body_framing_is_400_and_closes(server, head):
    response = exchange(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + head)
    status, headers, data = split(response)
    assert status.startswith("HTTP/1.1 400")
    assert headers["connection"] == "close"
    assert json.loads(data)["error"]["type"] == "invalid_request_error"


def test_expect_100_continue(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY)
        )
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(BODY)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    assert split(out)[0] == "HTTP/1.1 200 OK"


def test_http_1_0_and_connection_close_end_the_connection(server):
    for request in (b"GET /v1/models HTTP/1.0\r\n\r\n", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
        status, headers, data = split(exchange(server, request))
        assert status == "HTTP/1.1 200 OK"
        assert headers["connection"] == "close"
        assert json.loads(data)["data"][0]["id"] == "demo"


def test_other_methods_are_501(server):
    status, headers, data = split(exchange(server, b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    assert status.startswith("HTTP/1.1 501") and data == b""
    status, _, data = split(
        exchange(server, b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    )
    assert status.startswith("HTTP/1.1 501")
    assert "unsupported method" in json.loads(data)["error"]["message"]


def test_headers_http_cannot_carry_become_a_500(server):
    model = server.create_script([{"content": "x", "headers": {"bad name": "v"}}, {"content": "next"}])["model"]
    body = json.dumps({"model": model, "messages": []}).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        status, _, data = split(sock.recv(65536))
        assert status.startswith("HTTP/1.1 500")
        assert "demo model server error" in json.loads(data)["error"]["message"]
        sock.sendall(request)  # the connection is still usable
        status, _, data = split(sock.recv(65536))
        assert json.loads(data)["choices"][0]["message"]["content"] == "next"
