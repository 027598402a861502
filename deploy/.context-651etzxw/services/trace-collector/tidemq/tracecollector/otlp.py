"""Decode OTLP ExportTraceServiceRequest messages into SpanRecords.

Malformed spans (ids of the wrong length or all zero) are counted and skipped rather than
failing the whole batch, so one bad exporter cannot make the collector drop good spans; the
count goes back to the exporter as OTLP `partial_success.rejected_spans`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from tidemq.tracecollector.model import SpanRecord

UNKNOWN_SERVICE = "unknown_service"
_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
_ZERO_TRACE_ID = bytes(_TRACE_ID_BYTES)
_ZERO_SPAN_ID = bytes(_SPAN_ID_BYTES)
# Strip the enum prefixes: "SPAN_KIND_SERVER" -> "SERVER", "STATUS_CODE_ERROR" -> "ERROR".
_KIND_NAMES = {
    value.number: value.name.removeprefix("SPAN_KIND_")
    for value in trace_pb2.Span.SpanKind.DESCRIPTOR.values
}
_STATUS_NAMES = {
    value.number: value.name.removeprefix("STATUS_CODE_")
    for value in trace_pb2.Status.StatusCode.DESCRIPTOR.values
}


@dataclass(slots=True)
class DecodedBatch:
    spans: list[SpanRecord] = field(default_factory=list)
    rejected: int = 0
    first_error: str = ""

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if not self.first_error:
            self.first_error = reason


def any_value(value: common_pb2.AnyValue) -> Any:
    """Turn an OTLP AnyValue into the JSON value it stands for (bytes become hex)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return key_values(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    if which == "int_value":
        return int(value.int_value)
    return getattr(value, which)


def key_values(pairs) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _events(span: trace_pb2.Span) -> list[dict[str, Any]]:
    return [
        {"name": event.name, "time_ns": event.time_unix_nano,
         "attributes": key_values(event.attributes)}
        for event in span.events
    ]


def _links(span: trace_pb2.Span) -> list[dict[str, Any]]:
    return [
        {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(),
         "attributes": key_values(link.attributes)}
        for link in span.links
    ]


def _id_problem(span: trace_pb2.Span) -> str | None:
    if len(span.trace_id) != _TRACE_ID_BYTES or span.trace_id == _ZERO_TRACE_ID:
        return f"span {span.name!r} has an invalid trace_id ({len(span.trace_id)} bytes)"
    if len(span.span_id) != _SPAN_ID_BYTES or span.span_id == _ZERO_SPAN_ID:
        return f"span {span.name!r} has an invalid span_id ({len(span.span_id)} bytes)"
    if span.parent_span_id and len(span.parent_span_id) != _SPAN_ID_BYTES:
        return f"span {span.name!r} has an invalid parent_span_id"
    return None


def decode_span(span: trace_pb2.Span, service_name: str) -> SpanRecord:
    parent = span.parent_span_id
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=parent.hex() if parent and parent != _ZERO_SPAN_ID else None,
        name=span.name,
        service_name=service_name,
        kind=_KIND_NAMES.get(span.kind, "UNSPECIFIED"),
        start_ns=span.start_time_unix_nano,
        end_ns=max(span.end_time_unix_nano, span.start_time_unix_nano),
        status_code=_STATUS_NAMES.get(span.status.code, "UNSET"),
        status_message=span.status.message,
        attributes=key_values(span.attributes),
        events=_events(span),
        links=_links(span),
    )


def decode_request(resource_spans_list) -> DecodedBatch:
    """Decode `ExportTraceServiceRequest.resource_spans` into records plus a reject count."""
    batch = DecodedBatch()
    for resource_spans in resource_spans_list:
        resource = key_values(resource_spans.resource.attributes)
        service_name = str(resource.get("service.name") or UNKNOWN_SERVICE)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                problem = _id_problem(span)
                if problem:
                    batch.reject(problem)
                    continue
                batch.spans.append(decode_span(span, service_name))
    return batch
