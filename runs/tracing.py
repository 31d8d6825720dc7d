"""OpenTelemetry in this process: one tracer provider, made on first use, that exports spans over
OTLP/HTTP in batches (the SDK's BatchSpanProcessor and OTLPSpanExporter).

Imported only when settings.TRACES_ENDPOINT is set (runs/services/trace_export.py checks first),
so a site without tracing never loads the SDK. The spans of one run come from any process that
drives or ends it (a worker, another worker after a crash, the web process applying a lever), so
span ids are chosen by the caller, derived from the run, instead of drawn at random: `emit`.

Why a slow or dead collector never slows a run: `emit` only appends the finished span to the
processor's bounded queue (when full, the span is dropped); the request, its retries and its
timeout (OTEL_EXPORTER_OTLP_TIMEOUT) happen in the processor's own thread. At exit what is still
queued gets EXIT_FLUSH_SECONDS, no more.
"""

import atexit
import os
import threading
from dataclasses import dataclass

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

EXIT_FLUSH_SECONDS = 2.0
SCOPE = "agentsite.runs"
SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True)
class Event:
    name: str
    time_ns: int
    attributes: dict


class _ChosenIds(IdGenerator):
    """The ids of the span being started, set by `emit` just before (per thread)."""

    def __init__(self):
        self.next = threading.local()

    def generate_trace_id(self) -> int:
        return self.next.ids[0]

    def generate_span_id(self) -> int:
        return self.next.ids[1]

    def is_trace_id_random(self) -> bool:
        return False  # keyed hashes, but not what W3C's "random" flag promises


class _Tracing:
    def __init__(self, endpoint: str):
        self.ids = _ChosenIds()
        resource = Resource.create(
            {
                "service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentsite",
                "process.pid": os.getpid(),
            }
        )
        # Every run is traced: a trace cut by a sampler in one process and not in another would
        # be worse than none. Sampling, if wanted, is the collector's (tail sampling).
        self.provider = TracerProvider(
            resource=resource, sampler=ALWAYS_ON, id_generator=self.ids, shutdown_on_exit=False
        )
        # Headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables.
        self.processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer(SCOPE)


_lock = threading.Lock()
_current: _Tracing | None = None


def _tracing() -> _Tracing:
    global _current
    current = _current
    if current is None:
        with _lock:
            if _current is None:
                _current = _Tracing(settings.TRACES_ENDPOINT)
                atexit.register(shutdown, _current)
            current = _current
    return current


def emit(
    name: str,
    *,
    trace_id: int,
    span_id: int,
    parent_id: int | None,
    kind: SpanKind,
    start_ns: int,
    end_ns: int,
    attributes: dict,
    events: list[Event] = (),
    error_type: str | None = None,
    links: list[tuple[int, int]] = (),
) -> None:
    """Queue one finished span with these ids and times (the processor's thread exports it)."""
    tracing = _tracing()
    if parent_id is None:
        context = Context()  # a root: never the child of whatever span this thread may be in
    else:
        parent = SpanContext(trace_id, parent_id, is_remote=True, trace_flags=SAMPLED)
        context = trace.set_span_in_context(NonRecordingSpan(parent), Context())
    tracing.ids.next.ids = (trace_id, span_id)
    span = tracing.tracer.start_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        start_time=start_ns,
        links=[Link(SpanContext(t, s, is_remote=True, trace_flags=SAMPLED)) for t, s in links],
    )
    for event in events:
        span.add_event(event.name, event.attributes, timestamp=event.time_ns)
    if error_type:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=max(end_ns, start_ns))


def flush() -> None:
    """Export what is queued now, waiting for it (tests and benchmarks; never on a run's path)."""
    if _current is not None:
        _current.processor.force_flush()


def shutdown(tracing: _Tracing | None = None) -> None:
    """Stop exporting, giving what is queued EXIT_FLUSH_SECONDS at most; forget the provider, so
    the next span makes a new one from the settings of then (tests point it elsewhere)."""
    global _current
    with _lock:
        tracing = tracing or _current
        if tracing is None:
            return
        if tracing is _current:
            _current = None
    # The processor's own shutdown waits up to 30 s on a hung collector: wait for it in a daemon
    # thread, EXIT_FLUSH_SECONDS at most.
    stopper = threading.Thread(target=tracing.processor.shutdown, name="otel-shutdown", daemon=True)
    stopper.start()
    stopper.join(EXIT_FLUSH_SECONDS)
