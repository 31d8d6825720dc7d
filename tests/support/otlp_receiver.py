"""A tiny OTLP/HTTP trace receiver in a thread, for the tracing tests and benchmarks: it accepts
POST /v1/traces and decodes each ExportTraceServiceRequest with opentelemetry-proto.

mode "keep" keeps every body and its spans; "discard" answers and forgets; "hang" accepts the
request and answers nothing until `release()` (a collector stuck on its disk).
"""

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def any_value(value):
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes(items) -> dict:
    return {kv.key: any_value(kv.value) for kv in items}


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict
    events: list[tuple[str, int, dict]]
    links: list[tuple[str, str]]
    error: bool
    resource: dict = field(default_factory=dict)
    status_message: str = ""

    def events_named(self, prefix: str) -> list[tuple[str, int, dict]]:
        return [e for e in self.events if e[0].startswith(prefix)]


def decode(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    Span(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        kind=s.kind,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=attributes(s.attributes),
                        events=[(e.name, e.time_unix_nano, attributes(e.attributes)) for e in s.events],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        error=s.status.code == 2,
                        resource=resource,
                        status_message=s.status.message,
                    )
                )
    return spans


class OtlpReceiver:
    def __init__(self, mode: str = "keep"):
        self.mode = mode
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []  # of each request, names in lower case
        self.requests = 0  # received, whatever the mode
        self.held = 0  # requests waiting for release() now
        self.released = threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.requests += 1
                    if receiver.mode == "keep" and self.path == "/v1/traces":
                        receiver.bodies.append(body)
                if receiver.mode == "hang":
                    with receiver.lock:
                        receiver.held += 1
                    receiver.released.wait(120)
                    with receiver.lock:
                        receiver.held -= 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)

    def start(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def release(self) -> None:
        """A hanging receiver answers what it holds, and everything after."""
        self.mode = "keep"
        self.released.set()

    @property
    def url(self) -> str:
        """What OTEL_EXPORTER_OTLP_ENDPOINT names (the SDK adds /v1/traces)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def traces_url(self) -> str:
        return f"{self.url}/v1/traces"

    def spans(self) -> list[Span]:
        with self.lock:
            bodies = list(self.bodies)
        return [span for body in bodies for span in decode(body)]

    def wait_for(self, predicate, timeout: float = 30.0):
        """The first truthy predicate(spans), or AssertionError with what came."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            value = predicate(spans)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; spans received: {[(s.name, s.span_id) for s in spans]}")
            time.sleep(0.05)
