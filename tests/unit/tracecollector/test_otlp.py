"""Decoding real OTLP protobuf messages (as exporters send them) into SpanRecords."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from tidemq.tracecollector.otlp import UNKNOWN_SERVICE, decode_request

TRACE = bytes(range(1, 17))
PARENT = bytes(range(1, 9))
CHILD = bytes(range(11, 19))


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _request(service: str | None, *spans: Span) -> ExportTraceServiceRequest:
    attributes = [_kv("service.name", AnyValue(string_value=service))] if service else []
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=attributes), scope_spans=[ScopeSpans(spans=list(spans))],
    )])


def test_decodes_ids_kind_status_attributes_events_and_links():
    span = Span(
        trace_id=TRACE, span_id=CHILD, parent_span_id=PARENT, name="SendMessage",
        kind=Span.SPAN_KIND_SERVER, start_time_unix_nano=100, end_time_unix_nano=250,
        status=Status(code=Status.STATUS_CODE_ERROR, message="disk full"),
        attributes=[
            _kv("messaging.destination", AnyValue(string_value="orders")),
            _kv("queue.id", AnyValue(int_value=3)),
            _kv("retry", AnyValue(bool_value=True)),
            _kv("ratio", AnyValue(double_value=0.5)),
            _kv("tags", AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="a")]))),
            _kv("raw", AnyValue(bytes_value=b"\x01\xff")),
        ],
        events=[Span.Event(name="retry", time_unix_nano=200,
                           attributes=[_kv("attempt", AnyValue(int_value=2))])],
        links=[Span.Link(trace_id=TRACE, span_id=PARENT)],
    )
    batch = decode_request(_request("broker", span).resource_spans)
    assert batch.rejected == 0
    [record] = batch.spans
    assert record.trace_id == TRACE.hex() and record.span_id == CHILD.hex()
    assert record.parent_span_id == PARENT.hex()
    assert (record.service_name, record.kind) == ("broker", "SERVER")
    assert (record.start_ns, record.end_ns, record.duration_ns) == (100, 250, 150)
    assert (record.status_code, record.status_message) == ("ERROR", "disk full")
    assert record.attributes == {
        "messaging.destination": "orders", "queue.id": 3, "retry": True, "ratio": 0.5,
        "tags": ["a"], "raw": "01ff",
    }
    assert record.events == [{"name": "retry", "time_ns": 200, "attributes": {"attempt": 2}}]
    assert record.links == [{"trace_id": TRACE.hex(), "span_id": PARENT.hex(), "attributes": {}}]


def test_root_span_has_no_parent_and_missing_service_is_named_unknown():
    batch = decode_request(_request(None, Span(trace_id=TRACE, span_id=PARENT, name="root",
                                               start_time_unix_nano=5)).resource_spans)
    [record] = batch.spans
    assert record.parent_span_id is None
    assert record.service_name == UNKNOWN_SERVICE
    assert record.end_ns == record.start_ns  # an unset end never yields a negative duration


def test_spans_with_bad_ids_are_rejected_alone():
    good = Span(trace_id=TRACE, span_id=CHILD, name="good")
    short_trace = Span(trace_id=b"\x01" * 8, span_id=CHILD, name="short")
    zero_span = Span(trace_id=TRACE, span_id=bytes(8), name="zero")
    batch = decode_request(_request("broker", short_trace, good, zero_span).resource_spans)
    assert [s.name for s in batch.spans] == ["good"]
    assert batch.rejected == 2
    assert "'short'" in batch.first_error and "trace_id" in batch.first_error
