"""One message's journey, built from the spans that name it and the traces they belong to:
published (by which service, through which request), stored (broker, topic, queue, offset),
delivered (to which group and member), processed (a push listener's answer), and the
broker's trace events: a pop consumer's ack or nack (with the group and the time from store),
retried, dead-lettered, re-driven, delivered after a delay, transaction committed or rolled
back.

A message is named by its unique id (the client's, carried by every span of it) and by its
offset msg id (the broker's); the broker's store span carries both, so either finds the
rest. A key may name several messages: each gets its own journey.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemq.tracecollector.index import KEY, MSG
from tidemq.tracecollector.model import SpanRecord
from tidemq.tracecollector.store import SPAN_COLUMNS, span_from_row

MAX_SEED_SPANS = 500
MAX_MESSAGES = 20
MAX_TRACES_PER_MESSAGE = 50
_ID_ATTRIBUTES = ("messaging.message.id", "tidemq.unique_id", "tidemq.stored_msg_id")
EVENT_TITLES = {
    "ack": "acked", "nack": "invisible time changed",
    "retry": "retried", "dead_letter": "moved to the DLQ", "redrive": "re-driven",
    "delayed_delivery": "delivered after its delay",
    "transaction_commit": "transaction committed", "transaction_rollback": "transaction rolled back",
}


@dataclass(frozen=True, slots=True)
class Step:
    """One thing that happened to the message, from one span."""

    kind: str  # published | stored | delivered | processed | an EVENT_TITLES key
    title: str
    span: SpanRecord
    facts: dict[str, str]

    def to_json(self) -> dict:
        return {"kind": self.kind, "title": self.title, "service": self.span.service_name,
                "time_ns": self.span.start_ns, "trace_id": self.span.trace_id,
                "span_id": self.span.span_id, "status": self.span.status_code,
                "facts": self.facts}


@dataclass(slots=True)
class Journey:
    unique_id: str
    msg_ids: set[str] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)

    @property
    def trace_id(self) -> str | None:
        published = next((s for s in self.steps if s.kind == "published"), None)
        return published.span.trace_id if published else (
            self.steps[0].span.trace_id if self.steps else None)

    def to_json(self) -> dict:
        return {"unique_id": self.unique_id, "msg_ids": sorted(self.msg_ids),
                "trace_id": self.trace_id, "steps": [step.to_json() for step in self.steps]}


def _spans_tagged(db: sqlite3.Connection, tag: str, values: Iterable[str]) -> list[SpanRecord]:
    values = sorted(set(values))
    if not values:
        return []
    marks = ",".join("?" * len(values))
    columns = ", ".join(f"s.{c.strip()}" for c in SPAN_COLUMNS.split(","))
    rows = db.execute(
        f"SELECT DISTINCT {columns} FROM span_tags t JOIN spans s ON s.seq = t.seq "
        f"WHERE t.tag = ? AND t.value IN ({marks}) LIMIT ?",
        [tag, *values, MAX_SEED_SPANS]).fetchall()
    return [span_from_row(row) for row in rows]


def _trace_spans(db: sqlite3.Connection, trace_ids: Iterable[str]) -> list[SpanRecord]:
    ids = sorted(set(trace_ids))[:MAX_TRACES_PER_MESSAGE]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT {SPAN_COLUMNS} FROM spans WHERE trace_id IN ({marks})",
                      ids).fetchall()
    return [span_from_row(row) for row in rows]


def _ids(span: SpanRecord) -> set[str]:
    return {str(span.attributes[a]) for a in _ID_ATTRIBUTES if span.attributes.get(a)}


def _linked_ids(span: SpanRecord) -> set[str]:
    return {str(link["attributes"]["messaging.message.id"]) for link in span.links
            if (link.get("attributes") or {}).get("messaging.message.id")}


def _operation(span: SpanRecord) -> str:
    return str(span.attributes.get("messaging.operation", ""))


def _messages(spans: list[SpanRecord]) -> dict[str, set[str]]:
    """unique id → every id of that message. The store span pairs the two; a client span's
    messaging.message.id is the unique id."""
    messages: dict[str, set[str]] = {}
    offset_ids: set[str] = set()
    for span in spans:
        unique_id = span.attributes.get("tidemq.unique_id")
        if unique_id:
            messages.setdefault(str(unique_id), set()).update(_ids(span))
            offset_ids.add(str(span.attributes.get("messaging.message.id", "")))
    for span in spans:
        if span.kind in ("PRODUCER", "CONSUMER") and span.attributes.get("messaging.message.id"):
            unique_id = str(span.attributes["messaging.message.id"])
            if unique_id not in offset_ids:
                messages.setdefault(unique_id, {unique_id})
    return messages


def find_journeys(db: sqlite3.Connection, *, msg_id: str = "", unique_id: str = "",
                  key: str = "") -> list[Journey]:
    """Journeys of the messages named by an id or a key (newest publish first)."""
    if key:
        seeds = _spans_tagged(db, KEY, [key])
    else:
        seeds = _spans_tagged(db, MSG, [v for v in (msg_id, unique_id) if v])
    # The store span pairs the ids: one more round finds the spans naming the other id.
    named = seeds + _spans_tagged(db, MSG, set().union(*map(_ids, seeds)) if seeds else [])
    messages = _messages(named)
    if not messages:
        return []
    all_ids = set().union(*messages.values())
    related = _spans_tagged(db, MSG, all_ids)
    journeys = []
    for unique_id_, ids in list(messages.items())[:MAX_MESSAGES]:
        mine = [s for s in related if _ids(s) & ids or _linked_ids(s) & ids]
        traces = {s.trace_id for s in mine if _operation(s) != "receive"}
        spans = {(s.trace_id, s.span_id): s for s in _trace_spans(db, traces)}
        spans.update({(s.trace_id, s.span_id): s for s in mine})
        journey = Journey(unique_id_, msg_ids=ids - {unique_id_})
        journey.steps = _steps(list(spans.values()), ids, spans)
        journeys.append(journey)
    journeys.sort(key=lambda j: -(j.steps[0].span.start_ns if j.steps else 0))
    return journeys


def _about_other_message(span: SpanRecord, ids: set[str]) -> bool:
    """A span of the same trace that names a different message (another of a batch)."""
    named = _ids(span) | _linked_ids(span)
    return bool(named) and not named & ids


def _steps(spans: list[SpanRecord], ids: set[str],
           by_id: dict[tuple[str, str], SpanRecord]) -> list[Step]:
    steps = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if _about_other_message(span, ids):
            continue
        step = _step(span, by_id)
        if step is not None:
            steps.append(step)
    return steps


def _fact(span: SpanRecord, facts: dict, label: str, attribute: str) -> None:
    value = span.attributes.get(attribute)
    if isinstance(value, list):
        value = ", ".join(map(str, value))
    if value not in (None, ""):
        facts[label] = str(value)


def _event_title(event: str, span: SpanRecord) -> str:
    title = EVENT_TITLES.get(event, event)
    group = span.attributes.get("messaging.consumer.group.name")
    if event in ("ack", "nack"):
        settled = span.attributes.get("tidemq.store_to_settle_ms")
        # A nack and a renewal (more time to work, as gateway-grpc does for push consumers)
        # are the same call: the title says what it does, not why.
        title = f"acked by {group}" if event == "ack" else \
            f"invisible time changed by {group}"
        if event == "nack" and span.attributes.get("tidemq.invisible_ms") is not None:
            title += (f" (delivered again in {_seconds(span.attributes['tidemq.invisible_ms'])}"
                      " unless acked)")
        if settled is not None:
            title += f", {_seconds(settled)} after it was stored"
    return title


def _seconds(ms: object) -> str:
    try:
        value = float(ms) / 1000  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(ms)
    return f"{value:.3g} s"


def _step(span: SpanRecord, by_id: dict[tuple[str, str], SpanRecord]) -> Step | None:
    attributes, facts = span.attributes, {}
    event = attributes.get("tidemq.event")
    _fact(span, facts, "topic", "messaging.destination.name")
    if event:
        _fact(span, facts, "group", "messaging.consumer.group.name")
        _fact(span, facts, "reconsume times", "tidemq.reconsume_times")
        _fact(span, facts, "store to ack/nack (ms)", "tidemq.store_to_settle_ms")
        _fact(span, facts, "from topic", "tidemq.source_topic")
        _fact(span, facts, "new msg id", "tidemq.stored_msg_id")
        return Step(str(event), _event_title(str(event), span), span, facts)
    if span.kind == "PRODUCER" and _operation(span) == "publish":
        parent = by_id.get((span.trace_id, span.parent_span_id or ""))
        if parent is not None:
            facts["via"] = f"{parent.service_name}: {parent.name}"
        _fact(span, facts, "keys", "tidemq.message.keys")
        return Step("published", f"published by {span.service_name}", span, facts)
    if "tidemq.queue_offset" in attributes:
        _fact(span, facts, "queue", "messaging.destination.partition.id")
        _fact(span, facts, "queue offset", "tidemq.queue_offset")
        _fact(span, facts, "msg id", "messaging.message.id")
        _fact(span, facts, "messages in batch", "messaging.batch.message_count")
        return Step("stored", f"stored by {span.service_name}", span, facts)
    if span.kind == "CONSUMER" and _operation(span) in ("receive", "pop"):
        _fact(span, facts, "group", "messaging.consumer.group.name")
        _fact(span, facts, "member", "messaging.client.id")
        return Step("delivered", f"delivered to {span.service_name}", span, facts)
    if span.kind == "CONSUMER" and _operation(span) == "process":
        _fact(span, facts, "group", "messaging.consumer.group.name")
        _fact(span, facts, "member", "messaging.client.id")
        _fact(span, facts, "answer", "tidemq.consume.status")
        failed = span.status_code == "ERROR"
        title = "processing failed (given back)" if failed else "processed"
        return Step("processed", title, span, facts)
    return None
