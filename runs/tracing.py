"""OpenTelemetry in this process: the SDK's OTLP/HTTP exporter behind its BatchSpanProcessor,
made on first use.

Imported only when settings.TRACES_ENDPOINT is set (runs/services/trace_export.py checks first),
so a site without tracing never loads the SDK. The spans of a run are not timed live: they are
built from committed records (trace_export.py), by whichever process commits them (a worker,
another worker after a crash, the web process applying a lever), with ids derived from the run
and times from the rows. So finished spans (the SDK's ReadableSpan, with these ids and times) go
straight to the processor, without a Tracer: a tracer draws ids at random and times spans
itself, and its per-span bookkeeping cost more than the rest of the export. Most are handed over
still to build (`emit_later`) and built by the exporter in its thread, a batch at a time.

Why a slow or dead collector never slows a run: `emit` only appends the span to the processor's
bounded queue (when full, the span is dropped); the request, its retries and its timeout
(OTEL_EXPORTER_OTLP_TIMEOUT) happen in the processor's own thread. At exit what is still queued
gets EXIT_FLUSH_SECONDS, no more.
"""

import atexit
import logging
import os
import threading
from functools import lru_cache

from django.conf import settings
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

__all__ = ["Event", "emit", "emit_later", "flush", "shutdown"]

log = logging.getLogger(__name__)

EXIT_FLUSH_SECONDS = 2.0
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
ERROR = Status(StatusCode.ERROR)


class _ProcessResource(Resource):
    """This process's resource, its hash computed once. The encoder groups each batch by resource
    and hashes it for every span: the SDK's hash serialises the attributes to JSON each time, a
    fifth of the cost of encoding a span. A resource never changes, so neither does its hash."""

    _hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = super().__hash__()
        return self._hash


class _Tracing:
    def __init__(self, endpoint: str):
        created = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentsite", "process.pid": os.getpid()}
        )
        self.resource = _ProcessResource(created.attributes, created.schema_url)
        self.scope = InstrumentationScope("agentsite.runs")
        # Headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables, the
        # queue and batch sizes from OTEL_BSP_*. Every run is traced, no sampler: a trace cut in
        # one process and not in another would be worse than none (sample in the collector).
        self.processor = BatchSpanProcessor(_Exporter(self.resource, self.scope, endpoint=endpoint))


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


def emit(span: dict) -> None:
    """Queue one finished span, given as its fields (see `_readable`)."""
    tracing = _current or _tracing()
    tracing.processor.on_end(_readable(tracing.resource, tracing.scope, **span))


def emit_later(build, *args) -> None:
    """Queue a span that `build(*args)` makes, in the exporting thread, when its batch is encoded.
    `args` must not change meanwhile (the caller passes copies)."""
    (_current or _tracing()).processor.on_end(_Pending(build, args))


class _Pending:
    """A span still to build. The processor only queues what it is given, after checking that it
    is sampled: its context says so; the exporter builds it (`_Exporter.export`)."""

    __slots__ = ("build", "args")
    context = SpanContext(1, 1, False, SAMPLED)

    def __init__(self, build, args: tuple):
        self.build, self.args = build, args


class _Exporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter, given the spans still to build built first: in a batch, in
    this thread, off the run's path. One that cannot be built is logged and left out."""

    def __init__(self, resource: Resource, scope: InstrumentationScope, **options):
        super().__init__(**options)
        self.resource, self.scope = resource, scope

    def export(self, spans):
        built = []
        for span in spans:
            if isinstance(span, _Pending):
                try:
                    span = _readable(self.resource, self.scope, **span.build(*span.args))
                except Exception:
                    log.warning("could not build a span", exc_info=True)
                    continue
            built.append(span)
        return super().export(built)


def _readable(
    resource: Resource,
    scope: InstrumentationScope,
    *,
    name: str,
    trace_id: int,
    span_id: int,
    parent_id: int | None,
    kind: str,
    start_ns: int,
    end_ns: int,
    attributes: dict,
    events: list[Event] = (),
    error_type: str | None = None,
    links: list[tuple[int, int]] = (),
) -> ReadableSpan:
    """A finished span with these ids and times; `kind` a SpanKind's name."""
    if error_type:
        attributes = {**attributes, "error.type": error_type}
    return ReadableSpan(
        name,
        context=SpanContext(trace_id, span_id, False, SAMPLED),
        # Remote: the parent may be another process's (the run's span comes from whichever ends it).
        parent=_parent(trace_id, parent_id) if parent_id else None,
        resource=resource,
        attributes=attributes,
        events=events,
        links=[Link(SpanContext(t, s, is_remote=True, trace_flags=SAMPLED)) for t, s in links],
        kind=SpanKind[kind],
        # No status is OTLP's "unset" (one message fewer to encode per span).
        status=ERROR if error_type else None,
        start_time=start_ns,
        end_time=max(end_ns, start_ns),
        instrumentation_scope=scope,
    )


@lru_cache(maxsize=1024)  # a run's spans share one parent, the run's span
def _parent(trace_id: int, parent_id: int) -> SpanContext:
    return SpanContext(trace_id, parent_id, True, SAMPLED)


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
