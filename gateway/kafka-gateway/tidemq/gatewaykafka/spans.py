"""One SERVER span per Kafka request (docs/tracing.md, "Kafka requests").

Named `kafka/<API>` (`kafka/Produce`, `kafka/Fetch`), so the quiet list (sampling.py) names a
Kafka API as it names a gRPC method: a Fetch, a long poll like Pull and Pop, and a Heartbeat
are not recorded as roots by default. Attributes: the API (`kafka.api_key`, its name
`kafka.api`, `kafka.api_version`), the client (`messaging.client.id`, and the software it
named in ApiVersions), the topics and partitions the request names (`messaging.destination.name`
for one topic, `kafka.topics` for several, `kafka.partition_count`), the group for the group
APIs; an answer carrying Kafka error codes sets the span's status to ERROR naming them.
The broker calls a handler makes run in the span's context (handlers.py copies it to the
thread pool), so a Produce's trace holds the SDK's publish span and the broker's Send.

A Produce carries records of many traces (an instrumented Kafka client makes a PRODUCER span
per record and puts its context in the record's `traceparent` header), and a span has one
parent: so the Produce span is not the child of any of them but LINKS to each record's
context (at most MAX_RECORD_LINKS per request, the rest counted), each link naming the
record's topic, partition and offset. The records keep their headers as they came.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from tidemq.common.tracing import get_tracer
from tidemq.gatewaykafka import codec

tracer = get_tracer("tidemq.gatewaykafka")
MAX_TOPICS = 64          # topic names listed on one span
MAX_RECORD_LINKS = 128   # links from one Produce span to its records' traceparent contexts
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
_W3C = TraceContextTextMapPropagator()
ERROR_NAMES = {code: name for name, code in codec.ERRORS.items()}
# API key -> (the request's list of topics, the topic's name field, its partitions field)
TOPIC_FIELDS = {
    0: ("topic_data", "name", "partition_data"),        # Produce
    1: ("topics", "topic", "partitions"),               # Fetch
    2: ("topics", "name", "partitions"),                # ListOffsets
    3: ("topics", "name", None),                        # Metadata
    8: ("topics", "name", "partitions"),                # OffsetCommit
    9: ("topics", "name", "partition_indexes"),         # OffsetFetch
    19: ("topics", "name", None),                       # CreateTopics
    37: ("topics", "name", None),                       # CreatePartitions
}
GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14})   # their request's group_id


def span_name(api: str) -> str:
    return f"kafka/{api}"


def request_attributes(api_key: int, api: str, version: int, request: Any, client_id: str,
                       client_software: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {"rpc.system": "kafka", "kafka.api_key": api_key,
                                  "kafka.api": api, "kafka.api_version": version}
    if client_id:
        attributes["messaging.client.id"] = client_id
    if client_software:
        attributes["kafka.client_software"] = client_software
    fields = TOPIC_FIELDS.get(api_key)
    listed = getattr(request, fields[0], None) if fields else None
    if listed:
        topics = [getattr(t, fields[1], None) or "" for t in listed]
        if fields[2] is not None:
            attributes["kafka.partition_count"] = sum(len(getattr(t, fields[2], None) or ())
                                                      for t in listed)
        if len(set(topics)) == 1:
            attributes["messaging.destination.name"] = topics[0]
        attributes["kafka.topics"] = sorted(set(topics))[:MAX_TOPICS]
    elif api_key == 20 and getattr(request, "topic_names", None):   # DeleteTopics
        attributes["kafka.topics"] = sorted(set(request.topic_names))[:MAX_TOPICS]
    if api_key in GROUP_APIS and getattr(request, "group_id", None):
        attributes["messaging.consumer.group.name"] = request.group_id
    return attributes


def error_codes(fields: Any) -> set[int]:
    """Every non-zero `error_code` of an answer, however deep."""
    found: set[int] = set()
    if isinstance(fields, dict):
        code = fields.get("error_code")
        if code:
            found.add(code)
        for value in fields.values():
            if isinstance(value, list | dict):
                found |= error_codes(value)
    elif isinstance(fields, list):
        for item in fields:
            found |= error_codes(item)
    return found


def describe_answer(span: Span, fields: Any) -> bool:
    """Mark the span with the answer's error codes; True when it has any."""
    codes = error_codes(fields)
    if codes and span.is_recording():
        names = sorted(ERROR_NAMES.get(c, str(c)) for c in codes)
        span.set_attribute("kafka.error_codes", sorted(codes))
        span.set_status(Status(StatusCode.ERROR, ", ".join(names)))
    return bool(codes)


def record_context(headers: Iterable[tuple[str, bytes | None]]) -> SpanContext | None:
    """The span context a record's W3C `traceparent` (and `tracestate`) headers name; None
    without one, or for one that is not valid W3C trace context (ignored, as propagators do)."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in TRACE_HEADERS and value and name not in carrier:
            try:
                carrier[name] = value.decode("ascii")
            except UnicodeDecodeError:
                return None
    if "traceparent" not in carrier:
        return None
    context = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return context if context.is_valid else None


# (topic, partition, base offset or -1 when not stored, the records' contexts by position)
RecordContexts = tuple[str, int, int, Sequence[tuple[int, SpanContext]]]


def link_records(span: Span, produced: Iterable[RecordContexts]) -> int:
    """Link `span` to each produced record's context, MAX_RECORD_LINKS at most; the number
    left out is the span's `kafka.trace_links_dropped`. Returns the links added."""
    added = dropped = 0
    for topic, partition, base_offset, contexts in produced:
        for position, context in contexts:
            if added >= MAX_RECORD_LINKS:
                dropped += 1
                continue
            attributes: dict[str, Any] = {"messaging.destination.name": topic,
                                          "messaging.destination.partition.id": str(partition)}
            if base_offset >= 0:
                attributes["messaging.kafka.offset"] = base_offset + position
            span.add_link(context, attributes)
            added += 1
    if dropped:
        span.set_attribute("kafka.trace_links_dropped", dropped)
    return added
