"""runs/observability/tracing/otlp_encoder.py writes what the SDK's own encoder writes: the same spans, encoded both ways
(ours from their fields, the SDK's `encode_spans` from ReadableSpans made of the same fields), are
the same OTLP request, field for field: spans written out here with every kind of value, and the
spans run_spans.py builds from a real run's records."""

import logging

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs.controls import levers
from runs.controls.levers import run_message, run_pause, run_resume
from runs.engine.loop import run_advance
from runs.models import Approval, Run
from runs.observability.tracing import otlp_encoder
from runs.supervision.approvals import decide
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import FAST, call, calls

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
        error_message="budget_exceeded: the run's budget is spent",
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
            "a tuple": ("a", "b"),
            "a str subclass": Run.Status.SUCCEEDED,
            "none in a list": [None, 1],
            "int keys": {1: "one"},
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
        attributes={"agentsite.tool.status": "rejected", "error.type": "overridden by the span's own"},
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
        status=Status(StatusCode.ERROR, fields.get("error_message")) if fields.get("error_type") else None,
        start_time=fields["start_ns"],
        end_time=max(fields["end_ns"], fields["start_ns"]),
        instrumentation_scope=scope,
    )


def encoded_both_ways(spans: list[dict], schema_url: str = ""):
    resource = Resource.create({"service.name": "agentsite", "process.pid": 4242}, schema_url=schema_url)
    scope = InstrumentationScope("agentsite.runs")
    ours = otlp_encoder.request(otlp_encoder.resource(resource.attributes), resource.schema_url, scope.name, spans)
    sdk = encode_spans([readable(resource, scope, span) for span in spans])
    return ours, sdk


def test_our_request_is_the_sdks_own_encoding_of_the_same_spans():
    ours, sdk = encoded_both_ways(SPANS, schema_url="https://opentelemetry.io/schemas/1.30.0")
    assert ours == sdk
    assert ours.SerializeToString(deterministic=True) == sdk.SerializeToString(deterministic=True)
    assert len(ours.resource_spans[0].scope_spans[0].spans) == 3  # not two empty requests compared
    attributes = ours.resource_spans[0].scope_spans[0].spans[2].attributes
    assert [kv.value.string_value for kv in attributes if kv.key == "error.type"] == ["tool_error"]  # once


def test_the_spans_of_a_real_run_encode_as_the_sdk_encodes_them(launch, script, alice, settings, monkeypatch):
    """What run_spans.py builds from a run with a fallback, parallel calls, an approval, levers,
    and from a run that every model failed: every span, both ways."""
    from runs.observability.tracing import exporter as tracing

    built = []
    monkeypatch.setattr(tracing, "emit", built.append)
    monkeypatch.setattr(tracing, "emit_later", lambda build, *args: built.append(build(*args)))
    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: None)
    monkeypatch.setattr(levers, "run_dispatch", lambda run_id: None)
    settings.TRACES_ENDPOINT = "http://127.0.0.1:9/v1/traces"  # never reached: the spans are caught above
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    weather = [call("get_weather", {"city": "Lagos"}, "w1"), call("get_weather", {"city": "London"}, "w2")]
    cancel = call("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, "c1")
    good = script(calls(*weather), calls(cancel), {"content": "Cancelled ORD-1001; Lagos 31, London 12."})
    run = launch("Weather, then cancel ORD-1001", models=[bad, good])
    run_pause(run_id=run.pk, user=alice)
    run_message(run_id=run.pk, user=alice, text="the customer called back")
    run_resume(run_id=run.pk, user=alice)
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=alice, approve=True)
    run_advance(run_id=run.pk)
    failed = launch("Nobody answers", models=[bad])
    assert (Run.objects.get(pk=run.pk).status, failed.status) == (Run.Status.SUCCEEDED, Run.Status.FAILED)

    names = sorted(span["name"].split()[0] for span in built)
    assert names == ["chat"] * 4 + ["execute_tool"] * 3 + ["invoke_agent"] * 2
    ours, sdk = encoded_both_ways(built)
    assert ours == sdk
    assert len(ours.resource_spans[0].scope_spans[0].spans) == len(built)


def test_an_attribute_that_cannot_be_encoded_is_left_out_and_logged_as_the_sdk_does(caplog):
    odd = dict(SPANS[1], attributes={"fine": 1, "object": object(), "too big": 2**64, "also fine": "x"})
    with caplog.at_level(logging.WARNING, logger="runs.observability.tracing.otlp_encoder"):
        ours, sdk = encoded_both_ways([odd])
    (span,) = ours.resource_spans[0].scope_spans[0].spans
    assert [kv.key for kv in span.attributes] == ["fine", "also fine"]
    assert ours == sdk
    assert "could not encode the attribute 'object' of the span 'chat llama3'" in caplog.text


@pytest.mark.parametrize("broken", [None, ("not", "fields"), dict(SPANS[1], kind="SIDEWAYS"), {"name": "half"}])
def test_a_span_that_cannot_be_encoded_is_left_out_and_logged_not_the_others(caplog, broken):
    with caplog.at_level(logging.WARNING, logger="runs.observability.tracing.otlp_encoder"):
        message = otlp_encoder.request(otlp_encoder.resource({}), "", "agentsite.runs", [SPANS[0], broken, SPANS[2]])
    spans = message.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in spans] == ["invoke_agent support", "execute_tool cancel_order"]
    assert "could not encode the span" in caplog.text
