"""Trace events: what the broker does to a message after storing it — a pop consumer's ack
or nack (its invisible time changed: it comes back later), a retry after a
consumer gave it back (SendMessageBack, or a pop's revive), a move to the dead-letter queue,
a delayed message delivered when due, a transaction committed or rolled back — as a short
INTERNAL span in the message's own trace.

The message's trace context rides in its properties (TRACE_CONTEXT, the producer's publish
span), so each event span is a child of that publish span: the message's trace and the
collector's message view show it beside publish, store and process. Each span carries the
message's unique id (`messaging.message.id`, what the collector indexes) and `tidemq.event`.

Only the paths named above call in here, one call each; the normal Send and Pull paths never
do. Nothing is read from a record unless this process exports spans (tracing.exporting()),
and a message sent without a sampled trace context yields nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from tidemq.common import record
from tidemq.common.tracing import MESSAGING_SYSTEM, exporting, extract_context, get_tracer

_tracer = get_tracer("tidemq.broker.events")

RETRY, DEAD_LETTER, REDRIVE = "retry", "dead_letter", "redrive"
ACK, NACK = "ack", "nack"
DELAYED_DELIVERY = "delayed_delivery"
TRANSACTION_COMMIT, TRANSACTION_ROLLBACK = "transaction_commit", "transaction_rollback"
MAX_EVENTS_PER_BATCH = 256  # a timer tick delivering more describes the first ones only


def _record_event(event: str, traceparent: str, unique_id: str, topic: str,
                  attributes: Mapping[str, object], began_ns: int | None = None) -> None:
    if not traceparent:
        return
    parent = extract_context({"traceparent": traceparent})
    if not trace.get_current_span(parent).get_span_context().is_valid:
        return
    span = _tracer.start_span(f"{topic} {event}", context=parent, kind=SpanKind.INTERNAL,
                              start_time=began_ns)
    if span.is_recording():
        span.set_attributes({"messaging.system": MESSAGING_SYSTEM, "tidemq.event": event,
                             "messaging.destination.name": topic,
                             "messaging.message.id": unique_id, **attributes})
    span.end()


def message_moved(group: str, stored: record.Record, topic: str, reconsume_times: int,
                  dead_letter: bool, *, store_host: bytes = b"",
                  physical_offset: int = -1, began_ns: int | None = None) -> None:
    """A consumer gave `stored` back: it went to the group's retry topic, or its DLQ (at
    `physical_offset`, when already appended: its new msg id is named too, so the DLQ's
    msg id finds the message's journey). `began_ns`: when the move started — the span starts
    there, before a consumer can read the moved message, so the journey keeps its order."""
    if not exporting():
        return
    properties = stored.properties
    attributes: dict[str, object] = {"messaging.consumer.group.name": group,
                                     "tidemq.reconsume_times": reconsume_times,
                                     "tidemq.source_topic": stored.topic}
    if store_host and physical_offset >= 0:
        attributes["tidemq.stored_msg_id"] = record.offset_msg_id(store_host, physical_offset)
    _record_event(DEAD_LETTER if dead_letter else RETRY,
                  properties.get(record.PROP_TRACE_CONTEXT, ""),
                  properties.get(record.PROP_UNIQ_KEY, ""), topic, attributes, began_ns)


def message_redriven(group: str, stored: record.Record, topic: str) -> None:
    """A dead letter of `group` was re-driven to its original topic."""
    if not exporting():
        return
    properties = stored.properties
    _record_event(REDRIVE, properties.get(record.PROP_TRACE_CONTEXT, ""),
                  properties.get(record.PROP_UNIQ_KEY, ""), topic,
                  {"messaging.consumer.group.name": group, "tidemq.source_topic": stored.topic})


def delayed_delivered(topic: str, queue_id: int, records: Iterable[bytes],
                      began_ns: int | None = None) -> None:
    """The timer delivered these due records (already re-targeted) to `topic`/`queue_id`,
    appending them from `began_ns` on (see message_moved)."""
    if not exporting():
        return
    for count, raw in enumerate(records):
        if count >= MAX_EVENTS_PER_BATCH:
            return
        header = record.checked_header(raw, 0, verify_crc=False)
        _record_event(DELAYED_DELIVERY,
                      record.property_at(raw, 0, header, record.PROP_TRACE_CONTEXT) or "",
                      record.property_at(raw, 0, header, record.PROP_UNIQ_KEY) or "", topic,
                      {"messaging.destination.partition.id": str(queue_id)}, began_ns)


def transaction_ended(stored: record.Record, committed: bool,
                      began_ns: int | None = None) -> None:
    """The half message `stored` was committed (now visible) or rolled back; the span starts
    at `began_ns`, before the committed message was appended (see message_moved)."""
    if not exporting():
        return
    properties = stored.properties
    _record_event(TRANSACTION_COMMIT if committed else TRANSACTION_ROLLBACK,
                  properties.get(record.PROP_TRACE_CONTEXT, ""),
                  properties.get(record.PROP_UNIQ_KEY, ""),
                  properties.get(record.PROP_REAL_TOPIC, stored.topic),
                  {"tidemq.producer_group": properties.get(record.PROP_PRODUCER_GROUP, "")},
                  began_ns)


def message_settled(group: str, stored: record.Record, acked: bool, now_ms: int,
                    invisible_ms: int = 0) -> None:
    """A pop consumer of `group` acked `stored` (its copy as delivered: a retry's copy is in
    the group's retry topic), or changed its invisible time (`invisible_ms` from now: a nack,
    or more time to work). Names the group, the delivery attempt and the time since the
    delivered copy was stored (`tidemq.store_to_settle_ms`); the span is in the message's
    own trace like every other event, so its journey ends with it."""
    if not exporting():
        return
    properties = stored.properties
    attributes: dict[str, object] = {
        "messaging.consumer.group.name": group,
        "messaging.destination.partition.id": str(stored.queue_id),
        "tidemq.queue_offset": stored.queue_offset,
        "tidemq.reconsume_times": stored.reconsume_times,
        "tidemq.store_to_settle_ms": max(0, now_ms - stored.store_timestamp)}
    if not acked:
        attributes["tidemq.invisible_ms"] = invisible_ms
    # The topic the message was sent to (a retry's copy names it in RETRY_TOPIC).
    topic = properties.get(record.PROP_RETRY_TOPIC, stored.topic)
    _record_event(ACK if acked else NACK, properties.get(record.PROP_TRACE_CONTEXT, ""),
                  properties.get(record.PROP_UNIQ_KEY, ""), topic, attributes)
