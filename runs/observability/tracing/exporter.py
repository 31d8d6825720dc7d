"""OpenTelemetry in this process: the SDK's BatchSpanProcessor and its OTLP/HTTP exporter's client,
made on first use.

Imported only when settings.TRACES_ENDPOINT is set (runs/observability/tracing/run_spans.py checks first),
so a site without tracing never loads the SDK. The spans of a run are not timed live: they are
built from committed records (run_spans.py), by whichever process commits them (a worker,
another worker after a crash, the web process applying a lever), with ids derived from the run
and times from the rows. So no Tracer: a tracer draws ids at random and times spans itself, and
its per-span bookkeeping cost more than the rest of the export. The processor queues spans still
to build (`emit_later`); the exporter builds them in its own thread, a batch at a time, encodes
them (runs/observability/tracing/otlp_encoder.py) and sends them with the SDK exporter's HTTP client (its retries,
timeout, compression, headers and certificates, from the OTEL_EXPORTER_OTLP_* variables).

Why a slow or dead collector never slows a run: `emit` only appends the span to the processor's
bounded queue (when full, the span is dropped); the request, its retries and its timeout
(OTEL_EXPORTER_OTLP_TIMEOUT) happen in the processor's own thread. At exit what is still queued
gets EXIT_FLUSH_SECONDS, no more.
"""

import atexit
import logging
import os
import threading

from django.conf import settings
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags

from runs.observability.tracing import otlp_encoder

__all__ = ["emit", "emit_later", "flush", "shutdown"]

log = logging.getLogger("runs.tracing")  # its name from before the move: operators filter on it

EXIT_FLUSH_SECONDS = 2.0
SCOPE = "agentsite.runs"  # the instrumentation scope of every span
PROJECT_NAME = "openinference.project.name"  # the resource attribute OpenInference backends group by


class _Tracing:
    def __init__(self, endpoint: str):
        # service.name, the SDK's telemetry.sdk.* and OTEL_RESOURCE_ATTRIBUTES, as the SDK reads them.
        attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentsite", "process.pid": os.getpid()}
        project = os.environ.get("PHOENIX_PROJECT_NAME", "").strip()
        if project:
            # The project Arize Phoenix (and other OpenInference backends) files the traces under,
            # by the variable Phoenix's own documentation tells its users to set.
            attributes[PROJECT_NAME] = project
        resource = Resource.create(attributes)
        # Headers, timeout and compression come from the OTEL_EXPORTER_OTLP_* variables, the
        # queue and batch sizes from OTEL_BSP_*. Every run is traced, no sampler: a trace cut in
        # one process and not in another would be worse than none (sample in the collector).
        self.processor = BatchSpanProcessor(_Exporter(resource, endpoint=endpoint))


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
    """Queue one finished span, given as its fields (see runs/observability/tracing/otlp_encoder.py)."""
    (_current or _tracing()).processor.on_end(_Pending(_as_given, (span,)))


def emit_later(build, *args) -> None:
    """Queue a span that `build(*args)` makes (its fields), in the exporting thread, when its batch
    is encoded. `args` must not change meanwhile (the caller passes copies)."""
    (_current or _tracing()).processor.on_end(_Pending(build, args))


def _as_given(span: dict) -> dict:
    return span


class _Pending:
    """A span still to build. The processor only queues what it is given, after checking that it
    is sampled: its context says so; the exporter builds it (`_Exporter.export`)."""

    __slots__ = ("build", "args")
    context = SpanContext(1, 1, False, TraceFlags(TraceFlags.SAMPLED))

    def __init__(self, build, args: tuple):
        self.build, self.args = build, args


class _Exporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter, given spans still to build: built in a batch, in this thread,
    off the run's path, encoded by runs/observability/tracing/otlp_encoder.py, sent by the exporter's own client. One
    that cannot be built is logged and left out, not the rest of its batch."""

    def __init__(self, resource: Resource, **options):
        super().__init__(**options)
        self.resource, self.schema_url = otlp_encoder.resource(resource.attributes), resource.schema_url

    def export(self, spans) -> SpanExportResult:
        """The SDK's export (its shutdown check, its own metrics when enabled, its client), with
        this encoding."""
        if self._shutdown:
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                message = otlp_encoder.request(self.resource, self.schema_url, SCOPE, _built(spans))
            except Exception as error:
                log.warning("could not encode a batch of %d spans", len(spans), exc_info=True)
                result.error = error
                return SpanExportResult.FAILURE
            if not message.resource_spans[0].scope_spans[0].spans:  # none could be built
                return SpanExportResult.SUCCESS
            sent = self._client.export(message.SerializeToString())
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


def _built(spans):
    for span in spans:
        try:
            yield span.build(*span.args)
        except Exception:
            log.warning("could not build a span", exc_info=True)


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
