"""OpenTelemetry in this process: the SDK's OTLP/HTTP exporter behind its BatchSpanProcessor,
made on first use.

Imported only when settings.TRACES_ENDPOINT is set (runs/services/trace_export.py checks first),
so a site without tracing never loads the SDK. The spans of a run are not timed live: they are
built from committed records (trace_export.py), by whichever process commits them (a worker,
another worker after a crash, the web process applying a lever), with ids derived from the run
and times from the rows. So `emit` hands finished spans (the SDK's ReadableSpan, with these ids
and times) straight to the processor, without a Tracer: a tracer draws ids at random and times
spans itself, and its per-span bookkeeping cost more than the rest of the export.

Why a slow or dead collector never slows a run: `emit` only appends the span to the processor's
bounded queue (when full, the span is dropped); the request, its retries and its timeout
(OTEL_EXPORTER_OTLP_TIMEOUT) happen in the processor's own thread. At exit what is still queued
gets EXIT_FLUSH_SECONDS, no more.
"""

import atexit
import os
import threading

from django.conf import settings
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

__all__ = ["Event", "SpanKind", "emit", "flush", "shutdown"]

EXIT_FLUSH_SECONDS = 2.0
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
ERROR = Status(StatusCode.ERROR)
UNSET = Status(StatusCode.UNSET)


class _Tracing:
    def __init__(self, endpoint: str):
        self.resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentsite", "process.pid": os.getpid()}
        )
        self.scope = InstrumentationScope("agentsite.runs")
        # Headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables, the
        # queue and batch sizes from OTEL_BSP_*. Every run is traced, no sampler: a trace cut in
        # one process and not in another would be worse than none (sample in the collector).
        self.processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))


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
    if error_type:
        attributes = {**attributes, "error.type": error_type}
    span = ReadableSpan(
        name,
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=SAMPLED),
        # Remote: the parent may be another process's (the run's span comes from whichever ends it).
        parent=SpanContext(trace_id, parent_id, is_remote=True, trace_flags=SAMPLED) if parent_id else None,
        resource=tracing.resource,
        attributes=attributes,
        events=events,
        links=[Link(SpanContext(t, s, is_remote=True, trace_flags=SAMPLED)) for t, s in links],
        kind=kind,
        status=ERROR if error_type else UNSET,
        start_time=start_ns,
        end_time=max(end_ns, start_ns),
        instrumentation_scope=tracing.scope,
    )
    tracing.processor.on_end(span)


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
