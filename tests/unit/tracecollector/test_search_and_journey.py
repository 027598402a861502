"""Search by message id / key / topic / group / status / time, the message journey and the
service map, over a real SQLite store filled with a message's spans as services send them."""

from __future__ import annotations

from tidemq.tracecollector.journey import find_journeys
from tidemq.tracecollector.search import TraceQuery
from tidemq.tracecollector.service_map import service_edges
from tidemq.tracecollector.store import RetentionPolicy, SpanStore

from tests.unit.tracecollector.message_spans import message_spans
from tests.unit.tracecollector.spans import BASE_NS, make_span, new_trace_id


def _found(store: SpanStore, **filters) -> set[str]:
    return {summary.trace_id for summary in store.search(TraceQuery(limit=100, **filters))}


def test_search_finds_a_message_trace_by_each_of_its_names(tmp_path):
    store = SpanStore(tmp_path)
    first = message_spans("U1", "M1", "order-1")
    second = message_spans("U2", "M2", "order-2", failed=True, topic="refunds", group="audit")
    store.insert([first.store, first.process, first.receive, second.store])
    store.insert([first.http, first.publish, second.http, second.publish, second.process])
    trace_one, trace_two = first.http.trace_id, second.http.trace_id

    assert _found(store, key="order-1") == {trace_one}
    assert _found(store, msg_id="M1") == {trace_one}
    assert _found(store, unique_id="U1") == {trace_one, first.receive.trace_id}
    assert _found(store, msg_id="U2") == {trace_two}
    assert _found(store, topic="refunds") == {trace_two}
    assert _found(store, group="billing") == {trace_one, first.receive.trace_id}
    assert _found(store, errors_only=True) == {trace_two}
    assert _found(store, service="broker", key="order-2") == {trace_two}
    assert _found(store, key="order-3") == set()
    assert _found(store, key="order-1", since_ns=BASE_NS + 1) == set()
    assert _found(store, until_ns=BASE_NS) == set()
    assert _found(store, until_ns=BASE_NS + 1) >= {trace_one, trace_two}


def test_a_duplicate_batch_is_not_indexed_twice_and_retention_drops_index_rows(tmp_path):
    store = SpanStore(tmp_path, RetentionPolicy(max_spans=5))
    first = message_spans("U1", "M1", "order-1")
    store.insert(first.all())
    store.insert(first.all())  # an exporter's retry
    with store.reading() as db:
        assert db.execute("SELECT count(*) FROM span_tags WHERE tag = 'key'").fetchone() == (1,)
    store.insert(message_spans("U2", "M2", "order-2").all())
    with store.reading() as db:
        assert db.execute("SELECT count(*) FROM span_tags WHERE value = 'U1'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM span_links").fetchone() == (1,)
    assert _found(store, key="order-1") == set()
    assert len(_found(store, key="order-2")) == 1


def test_journey_lists_each_step_of_the_message_from_any_of_its_names(tmp_path):
    store = SpanStore(tmp_path)
    spans = message_spans("U1", "M1", "order-1")
    store.insert(spans.all())
    store.insert(message_spans("U9", "M9", "order-9").all())  # another message: not shown
    for selector in ({"msg_id": "M1"}, {"unique_id": "U1"}, {"key": "order-1"}):
        with store.reading() as db:
            [journey] = find_journeys(db, **selector)
        assert journey.unique_id == "U1"
        assert journey.msg_ids == {"M1"}
        assert journey.trace_id == spans.publish.trace_id
        steps = [(step.kind, step.span.span_id) for step in journey.steps]
        assert steps == [("published", spans.publish.span_id), ("stored", spans.store.span_id),
                         ("delivered", spans.receive.span_id),
                         ("processed", spans.process.span_id)]
        published, stored, delivered, processed = journey.steps
        assert published.facts["via"] == "gateway-http: POST /v1/topics/{topic}/messages"
        assert published.facts["keys"] == "order-1"
        assert stored.facts == {"topic": "orders", "queue": "2", "queue offset": "7",
                                "msg id": "M1"}
        assert delivered.facts["group"] == "billing"
        assert processed.facts["member"] == "host@42"
        assert processed.title == "processed"


def test_a_key_naming_two_messages_gives_two_journeys_and_events_join_them(tmp_path):
    store = SpanStore(tmp_path)
    ok = message_spans("U1", "M1", "shared", start=0)
    failed = message_spans("U2", "M2", "shared", start=50_000_000, failed=True)
    retry = make_span(failed.publish.trace_id, parent=failed.publish.span_id,
                      name="%RETRY%billing retry", start=60_000_000, **{
                          "tidemq.event": "retry", "messaging.message.id": "U2",
                          "messaging.consumer.group.name": "billing",
                          "tidemq.reconsume_times": 1})
    dead = make_span(failed.publish.trace_id, parent=failed.publish.span_id,
                     name="%DLQ%billing dead_letter", start=70_000_000, **{
                         "tidemq.event": "dead_letter", "messaging.message.id": "U2",
                         "tidemq.stored_msg_id": "DLQ-M2"})
    store.insert([*ok.all(), *failed.all(), retry, dead])
    with store.reading() as db:
        newest, oldest = find_journeys(db, key="shared")
    assert (newest.unique_id, oldest.unique_id) == ("U2", "U1")
    kinds = [step.kind for step in newest.steps]
    assert kinds == ["published", "stored", "delivered", "processed", "retry", "dead_letter"]
    assert newest.steps[5].facts["new msg id"] == "DLQ-M2"
    with store.reading() as db:  # the DLQ's msg id (what a console lists) finds it all
        [from_dlq] = find_journeys(db, msg_id="DLQ-M2")
    assert [step.kind for step in from_dlq.steps] == kinds
    assert newest.steps[3].title == "processing failed (given back)"
    assert newest.steps[4].facts["reconsume times"] == "1"
    with store.reading() as db:
        assert find_journeys(db, msg_id="nobody") == []


def test_service_map_counts_calls_and_errors_between_services_and_publish_links(tmp_path):
    store = SpanStore(tmp_path)
    for number in range(3):
        spans = message_spans(f"U{number}", f"M{number}", "k")
        store.insert(spans.all())
    trace_id = new_trace_id()
    root = make_span(trace_id, service="gateway-http", start=1)
    store.insert([root, make_span(trace_id, parent=root.span_id, service="broker",
                                  status="ERROR", start=2)])
    with store.reading() as db:
        edges = {(e.caller, e.callee, e.kind): e for e in
                 service_edges(db, BASE_NS, BASE_NS + 10 * 10**9)}
    assert set(edges) == {("gateway-http", "broker", "call"),
                          ("gateway-http", "consumer", "consume"),
                          ("gateway-http", "consumer", "receive")}
    call = edges["gateway-http", "broker", "call"]
    assert (call.requests, call.errors) == (4, 1)
    assert call.rate_per_s == 0.4
    assert edges["gateway-http", "consumer", "receive"].requests == 3
    assert edges["gateway-http", "consumer", "consume"].requests == 3
    with store.reading() as db:
        assert service_edges(db, BASE_NS + 10**9, BASE_NS + 2 * 10**9) == []


def test_size_retention_keeps_the_pages_in_use_under_the_bound(tmp_path):
    store = SpanStore(tmp_path)
    for number in range(40):
        store.insert([make_span(new_trace_id(), payload="x" * 2000, start=number)
                      for _ in range(50)])
    unbounded = store.stats()
    assert unbounded.size_bytes > 2_000_000
    store.retention = RetentionPolicy(max_spans=0, max_bytes=1_000_000)
    store.enforce_retention()
    bounded = store.stats()
    assert bounded.size_bytes <= 1_000_000
    assert 0 < bounded.span_count < unbounded.span_count
    assert bounded.file_bytes >= bounded.size_bytes


def test_the_control_planes_own_traces_are_hidden_unless_internal_is_asked(tmp_path):
    store = SpanStore(tmp_path)
    user = message_spans("U1", "M1", "order-1")
    store.insert(user.all())
    internal = {}
    for offset, name in enumerate(("/tidemq.v1.ConfigService/Put", "/tidemq.v1.ConfigService/Get",
                                   "/tidemq.v1.NameServerService/RegisterBroker",
                                   "GET /console/series",
                                   # offset polls (the console's, a consumer's) a client or
                                   # an untraced caller made: broker-only roots before #41
                                   "/tidemq.v1.BrokerService/GetQueueOffsets",
                                   "/tidemq.v1.BrokerService/QueryOffsets"), start=1):
        trace_id = new_trace_id()
        store.insert([make_span(trace_id, name=name, start=10_000_000 * offset)])
        internal[trace_id] = name
    users = {user.http.trace_id, user.receive.trace_id}
    assert _found(store) == users  # the internal traces are newer, yet not listed
    assert _found(store, internal=True) == users | set(internal)
    newest = store.search(TraceQuery(limit=1, internal=True))
    assert newest[0].trace_id in internal


def test_a_pop_groups_nack_and_ack_end_the_journey(tmp_path):
    store = SpanStore(tmp_path)
    spans = message_spans("U1", "M1", "order-1")
    settle = {"messaging.destination.name": "orders", "messaging.message.id": "U1",
              "messaging.consumer.group.name": "pop-billing", "tidemq.reconsume_times": 0}
    nack = make_span(spans.publish.trace_id, parent=spans.publish.span_id, name="orders nack",
                     start=6_000_000, **settle, **{"tidemq.event": "nack",
                                                   "tidemq.store_to_settle_ms": 40,
                                                   "tidemq.invisible_ms": 5000})
    ack = make_span(spans.publish.trace_id, parent=spans.publish.span_id, name="orders ack",
                    start=7_000_000, **settle, **{"tidemq.event": "ack",
                                                  "tidemq.store_to_settle_ms": 1250})
    store.insert([*spans.all(), nack, ack])
    with store.reading() as db:
        [journey] = find_journeys(db, key="order-1")
    *_, given_back, acked = journey.steps
    assert (given_back.kind, acked.kind) == ("nack", "ack")
    assert given_back.title == "invisible time changed by pop-billing (delivered again in " \
                               "5 s unless acked), 0.04 s after it was stored"
    assert acked.title == "acked by pop-billing, 1.25 s after it was stored"
    assert acked.facts == {"topic": "orders", "group": "pop-billing", "reconsume times": "0",
                           "store to ack/nack (ms)": "1250"}
