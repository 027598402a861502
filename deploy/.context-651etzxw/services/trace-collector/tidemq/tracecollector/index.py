"""What the store indexes of a span so a message can be found: a few attributes as tags and
the span's links (who consumed what a producer published).

Only these attributes are indexed, each as one small row, so the write path stays a dict
lookup per attribute and one index insert per hit; everything else stays in the span's JSON.
A message id and a unique id both name one message (the broker's Send span carries both, the
client's spans the unique id), so both are filed under `msg` and either finds the message.
"""

from __future__ import annotations

from collections.abc import Iterator

from tidemq.tracecollector.model import SpanRecord

MSG, KEY, TOPIC, GROUP = "msg", "key", "topic", "group"
INDEXED_ATTRIBUTES = {
    "messaging.message.id": MSG,
    "tidemq.unique_id": MSG,
    "tidemq.stored_msg_id": MSG,  # where a retry / DLQ move put the message
    "tidemq.message.keys": KEY,
    "messaging.destination.name": TOPIC,
    "messaging.consumer.group.name": GROUP,
}
MAX_VALUES_PER_ATTRIBUTE = 64  # a batch's keys beyond this are not searchable
MAX_VALUE_CHARS = 256


def _values(value) -> list[str]:
    items = value[:MAX_VALUES_PER_ATTRIBUTE] if isinstance(value, list) else (value,)
    return [str(item)[:MAX_VALUE_CHARS] for item in items if item is not None and item != ""]


def span_tags(span: SpanRecord) -> list[tuple[str, str]]:
    """(tag, value) pairs of one span: its indexed attributes and its links' message ids."""
    attributes = span.attributes
    found = [(tag, text) for attribute, tag in INDEXED_ATTRIBUTES.items()
             if attribute in attributes for text in _values(attributes[attribute])]
    for link in span.links[:MAX_VALUES_PER_ATTRIBUTE]:
        linked_message = (link.get("attributes") or {}).get("messaging.message.id")
        if linked_message:
            found.append((MSG, str(linked_message)[:MAX_VALUE_CHARS]))
    return found


def span_links(span: SpanRecord) -> Iterator[tuple[str, str]]:
    """(trace id, span id) of every span this one links to."""
    for link in span.links:
        trace_id, span_id = link.get("trace_id"), link.get("span_id")
        if trace_id and span_id:
            yield trace_id, span_id
