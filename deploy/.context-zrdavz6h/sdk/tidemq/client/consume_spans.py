"""Consumer spans of the OpenTelemetry messaging conventions, so a message's trace goes on
past the broker: a `receive` span per pull or pop that returned messages, linked to each
message's publish span (one read carries messages of many traces, so links, not a parent),
and a `process` span per batch a listener handles, a child of the publish span when the batch
is one message (the usual case) so the message's own trace shows who processed it.

The routine transport spans of reads (Pull, Pop) are not sampled as roots
(`tidemq.common.sampling`), so an empty long poll leaves nothing on the dashboard. Without a
tracer provider every span here is a no-op and no property is decoded for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from tidemq.common.tracing import MESSAGING_SYSTEM, extract_context, get_tracer

_tracer = get_tracer("tidemq.client")
MAX_LINKS = 128   # a pull of more messages links the first ones only


def _published(message) -> trace.SpanContext | None:
    carrier = message.trace_carrier
    if not carrier:
        return None
    context = trace.get_current_span(extract_context(carrier)).get_span_context()
    return context if context.is_valid else None


def _attributes(operation: str, topic: str, group: str, count: int, client_id: str) -> dict:
    attributes = {"messaging.system": MESSAGING_SYSTEM, "messaging.operation": operation,
                  "messaging.destination.name": topic, "messaging.consumer.group.name": group,
                  "messaging.batch.message_count": count}
    if client_id:  # which member of the group (the dashboard's message view shows it)
        attributes["messaging.client.id"] = client_id
    return attributes


def record_receive(topic: str, group: str, messages: Sequence, operation: str = "receive",
                   client_id: str = "", *, own_trace: bool = False) -> None:
    """One CONSUMER span for a read that returned `messages`; `own_trace`: a root of its own
    rather than a child of the current span (a server whose long-poll span is quiet, like
    gateway-grpc's ReceiveMessage, would otherwise drop it with its parent)."""
    if not messages:
        return
    span = _tracer.start_span(f"{topic} {operation}", kind=SpanKind.CONSUMER,
                              context=Context() if own_trace else None,
                              attributes=_attributes(operation, topic, group, len(messages),
                                                     client_id))
    if span.is_recording():
        for message in messages[:MAX_LINKS]:
            published = _published(message)
            if published is not None:
                span.add_link(published, {"messaging.message.id": message.unique_id})
    span.end()


@contextmanager
def processing(topic: str, group: str, batch: Sequence, client_id: str = "",
               ) -> Iterator[trace.Span]:
    """The span of a listener handling `batch`; the caller sets its outcome with `outcome`."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and batch:
        published = _published(batch[0]) if len(batch) == 1 else None
        parent = trace.set_span_in_context(trace.NonRecordingSpan(published)) \
            if published is not None else None
        links = [Link(c) for c in (_published(m) for m in batch[:MAX_LINKS]) if c] \
            if len(batch) > 1 else []
        attributes = _attributes("process", topic, group, len(batch), client_id)
        if len(batch) == 1:
            attributes["messaging.message.id"] = batch[0].unique_id
            if batch[0].keys:
                attributes["tidemq.message.keys"] = list(batch[0].keys)
        with _tracer.start_as_current_span(f"{topic} process", context=parent,
                                           kind=SpanKind.CONSUMER, links=links,
                                           attributes=attributes,
                                           record_exception=True) as span:
            yield span
    else:
        yield trace.INVALID_SPAN


def outcome(span: trace.Span, status: str, failed: bool) -> None:
    """Record a listener's answer (CONSUME_SUCCESS / RECONSUME_LATER ...) on its span."""
    span.set_attribute("tidemq.consume.status", status)
    if failed:
        span.set_status(Status(StatusCode.ERROR, status))
