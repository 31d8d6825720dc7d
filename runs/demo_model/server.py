"""The demo model's HTTP layer: a thread per connection, framing by h11.

What the server answers is decided in :mod:`runs.demo_model.model` (endpoints)
and :mod:`runs.demo_model.scripts` (the script entry format); this module only
reads requests, waits each reply's delay and writes it.  HTTP/1.1 framing
(request line, headers, ``Content-Length`` or chunked bodies, keep-alive,
``Expect: 100-continue``) is h11's, the protocol library of httpx and uvicorn
(installed with the openai client).  A thread per connection keeps the
simulated latency a plain ``time.sleep`` and lets hundreds of keep-alive
connections wait at once.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
from typing import Self

import h11

from .answers import REASONS, Reply, error_reply
from .model import OWNED_BY, DemoModel

__all__ = ["OWNED_BY", "DemoModelServer", "start_server"]

_RECV_BYTES = 65536
_CONTINUE = h11.InformationalResponse(status_code=100, headers=[], reason="Continue")


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False  # stop() closes the live keep-alive connections itself
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, model: DemoModel):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.model = model
        self.conns: set = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address):  # quiet on client disconnects
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _Handler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def setup(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.conns_lock:
            self.server.conns.add(self.request)

    def finish(self):
        with self.server.conns_lock:
            self.server.conns.discard(self.request)

    def handle(self):
        conn = h11.Connection(h11.SERVER)
        while True:
            try:
                request = self._receive(conn)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    reply = error_reply(exc.error_status_hint, f"malformed request: {exc}")
                    reply.headers["Connection"] = "close"
                    self._send(conn, reply)
                return
            if request is None:
                return
            method, target, raw = request
            reply = self.server.model.handle(method, target, raw)
            if reply.delay > 0:
                time.sleep(reply.delay)
            if reply.parts is not None:
                if not self._send_parts(conn, reply):
                    return  # cut on purpose, or the client went away
                conn.start_next_cycle()
                continue
            self._send(conn, reply, with_body=method != "HEAD")
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return  # h11 says close: "Connection: close", HTTP/1.0, ...
            conn.start_next_cycle()

    def _receive(self, conn: h11.Connection) -> tuple[str, str, bytes] | None:
        """The next request as (method, target, body), or None once the client has gone."""
        head, chunks = None, []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    self.request.sendall(conn.send(_CONTINUE))
                conn.receive_data(self.request.recv(_RECV_BYTES))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return head.method.decode("ascii"), head.target.decode("latin-1"), b"".join(chunks)
            else:  # ConnectionClosed
                return None

    def _send(self, conn: h11.Connection, reply: Reply, with_body: bool = True) -> None:
        try:
            response = _response(reply)
        except h11.LocalProtocolError as exc:  # a script's status or header HTTP cannot carry
            reply = error_reply(500, f"demo model server error: {exc!r}")
            response = _response(reply)
        data = conn.send(response)
        if reply.body and with_body and reply.status not in (204, 304):  # these have no body in HTTP
            data += conn.send(h11.Data(data=reply.body))
        data += conn.send(h11.EndOfMessage())
        self.request.sendall(data)


    def _send_parts(self, conn: h11.Connection, reply: Reply) -> bool:
        """A streamed reply, chunk by chunk; False when the connection must close (a cut reply
        drops it before the body's end, as a server that died mid-answer would)."""
        try:
            self.request.sendall(conn.send(_response(reply, streamed=True)))
            for wait, part in reply.parts:
                if wait > 0:
                    time.sleep(wait)
                self.request.sendall(conn.send(h11.Data(data=part)))
            if reply.cut:
                self.request.shutdown(socket.SHUT_RDWR)
                return False
            self.request.sendall(conn.send(h11.EndOfMessage()))
        except OSError:
            return False
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE


def _response(reply: Reply, streamed: bool = False) -> h11.Response:
    ctype = "application/json"
    headers = []
    for k, v in reply.headers.items():
        k = str(k).replace("\r", "").replace("\n", "").strip()
        lk = k.lower()
        v = str(v).replace("\r", " ").replace("\n", " ").strip()
        if lk == "content-type":
            ctype = v
        elif lk not in ("content-length", "transfer-encoding"):
            headers.append((k, v))
    headers.append(("Content-Type", ctype))
    # A streamed body has no length: HTTP/1.1 sends it chunked (h11 chooses so without one).
    if not streamed:
        headers.append(("Content-Length", str(len(reply.body))))
    return h11.Response(status_code=reply.status, headers=headers, reason=REASONS.get(reply.status, "Unknown"))


class DemoModelServer:
    """A running (or ready to run) offline demo model server.

    Attributes: ``url`` (base URL ending in ``/v1``), ``host``, ``port``,
    ``latency`` (seconds added before every chat response; settable), ``model``
    (the :class:`~runs.demo_model.model.DemoModel` it serves).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0, pace: str = "instant"):
        self.model = DemoModel(latency, pace)
        self._tcp = _TCPServer((host, port), self.model)
        self.host = host
        self.port = self._tcp.server_address[1]
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def latency(self) -> float:
        return self.model.latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        self.model.latency = float(seconds)

    @property
    def url(self) -> str:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    def start(self) -> DemoModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._tcp.serve_forever, kwargs={"poll_interval": 0.05},
                name=f"demo-model:{self.port}", daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until stop() (or KeyboardInterrupt)."""
        self._tcp.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._tcp.shutdown()
            self._thread.join(timeout=5)
        with self._tcp.conns_lock:
            conns = list(self._tcp.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._tcp.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<DemoModelServer {self.url}>"

    def create_script(self, responses: list, latency: float = 0.0, record: bool = True,
                      streaming: str = "stream", context_window: int | None = None) -> dict:
        """Same as ``POST /v1/scripts``; returns ``{"id": ..., "model": "script:<id>"}``."""
        return self.model.create_script(responses, latency, record, streaming, context_window)

    def script_requests(self, script_id: str) -> list:
        """Same as ``GET /v1/scripts/<id>/requests``, parsed (KeyError if unknown)."""
        return self.model.script_requests(script_id)


def start_server(host: str = "127.0.0.1", port: int = 0, latency: float = 0.0, pace: str = "instant") -> DemoModelServer:
    """Start the offline demo model server in a daemon thread and return it."""
    return DemoModelServer(host, port, latency, pace).start()
