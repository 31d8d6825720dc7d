"""runs/otlp_encoder.py writes what the SDK's own encoder writes: the same spans, encoded both ways
(ours from their fields, the SDK's `encode_spans` from ReadableSpans made of the same fields), are
the same OTLP request, field for field."""

import logging

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs import otlp_encoder

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
TRACE = 0x0123456789ABCDEF0123456789ABCDEF
RUN_SPAN = 0x1111111111111111

SPANS = [
    dict(  # a run's span: no parent, events, links to the runs it was forked from, failed
        name="invoke_agent support",
        trace_id=TRACE,
        span_id=RUN_SPAN,
        parent_id=None,
        kind="INTERNAL",
        start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_009_000_000_000,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.usage.input_tokens": 1200,
            "agentsite.run.cost_usd": 0.0125,
            "agentsite.run.takeovers": 0,
        },
        events=[
            ("agentsite.run.started", 1_700_000_000_500_000_000, {}),
            ("agentsite.lever.message", 1_700_000_001_000_000_000, {"agentsite.lever": "message", "n": 2}),
        ],
        links=[(0xFEDCBA98765432100123456789ABCDEF, 0x2222222222222222), (7, 9)],
        error_type="budget_exceeded",
    ),
    dict(  # a model call: a parent, every kind of value, a failed fallback as an event
        name="chat llama3",
        trace_id=TRACE,
        span_id=0x3333333333333333,
        parent_id=RUN_SPAN,
        kind="CLIENT",
        start_ns=1_700_000_001_000_000_000,
        end_ns=1_700_000_002_000_000_000,
        attributes={
            "gen_ai.request.model": "llama3",
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "empty": [],
            "numbers": [1, 2.5, True, "x"],
            "flag": True,
            "off": False,
            "negative": -3,
            "nothing": None,
            "raw": b"\x00\x01",
            "map": {"a": 1, "b": ["c"]},
            "": "an empty key",
            "unicode": "Lagos — 31°",
        },
        events=[("agentsite.model.failed", 1_700_000_001_000_000_000, {"error.type": "timeout"})],
    ),
    dict(  # a tool call that never ran: an instant, an end before its start is clamped to it
        name="execute_tool cancel_order",
        trace_id=TRACE,
        span_id=0x4444444444444444,
        parent_id=RUN_SPAN,
        kind="INTERNAL",
        start_ns=1_700_000_003_000_000_000,
        end_ns=1_700_000_002_000_000_000,
        attributes={"agentsite.tool.status": "rejected"},
        error_type="tool_error",
    ),
]


def readable(resource, scope, fields: dict) -> ReadableSpan:
    """The same span as the SDK holds it (its parents and links remote, as ours are)."""
    attributes = dict(fields["attributes"])
    if fields.get("error_type"):
        attributes["error.type"] = fields["error_type"]
    parent = fields["parent_id"]
    return ReadableSpan(
        fields["name"],
        context=SpanContext(fields["trace_id"], fields["span_id"], False, SAMPLED),
        parent=SpanContext(fields["trace_id"], parent, True, SAMPLED) if parent else None,
        resource=resource,
        attributes=attributes,
        events=[Event(name, attrs, timestamp=at) for name, at, attrs in fields.get("events", ())],
        links=[Link(SpanContext(t, s, True, SAMPLED)) for t, s in fields.get("links", ())],
        kind=SpanKind[fields["kind"]],
        status=Status(StatusCode.ERROR) if fields.get("error_type") else None,
        start_time=fields["start_ns"],
        end_time=max(fields["end_ns"], fields["start_ns"]),
        instrumentation_scope=scope,
    )


def test_our_request_is_the_sdks_own_encoding_of_the_same_spans():
    resource = Resource.create({"service.name": "agentsite", "process.pid": 4242})
    scope = InstrumentationScope("agentsite.runs")
    ours = otlp_encoder.request(otlp_encoder.resource(resource.attributes), resource.schema_url, scope.name, SPANS)
    sdk = encode_spans([readable(resource, scope, span) for span in SPANS])
    assert ours == sdk
    assert ours.SerializeToString(deterministic=True) == sdk.SerializeToString(deterministic=True)
    assert len(ours.resource_spans[0].scope_spans[0].spans) == 3  # not two empty requests compared


def test_a_span_that_cannot_be_encoded_is_left_out_and_logged_not_the_others(caplog):
    broken = dict(SPANS[1], name="chat broken", attributes={"fine": 1, "object": object()})
    with caplog.at_level(logging.WARNING, logger="runs.otlp_encoder"):
        message = otlp_encoder.request(otlp_encoder.resource({}), "", "agentsite.runs", [SPANS[0], broken, SPANS[2]])
    spans = message.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in spans] == ["invoke_agent support", "execute_tool cancel_order"]
    assert "could not encode the span 'chat broken'" in caplog.text
