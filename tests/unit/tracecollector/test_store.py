"""SpanStore against a real SQLite file: summaries, filters, dedupe and retention bounds."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.tracecollector.index import span_links, span_tags
from tidemq.tracecollector.store import RetentionPolicy, SpanStore

from tests.unit.tracecollector.spans import BASE_NS, make_span, new_trace_id

HOUR_NS = 3600 * 10**9


def _three_service_trace(store: SpanStore, start: int = 0) -> tuple[str, list]:
    trace_id = new_trace_id()
    root = make_span(trace_id, name="POST /send", service="gateway", start=start,
                     duration=10_000_000)
    child = make_span(trace_id, parent=root.span_id, name="SendMessage", service="broker",
                      start=start + 1_000_000, duration=5_000_000, status="ERROR")
    grandchild = make_span(trace_id, parent=child.span_id, name="append", service="broker",
                           start=start + 2_000_000, duration=1_000_000, **{"queue.id": 3})
    store.insert([child, grandchild])
    store.insert([root])  # the root usually arrives last: its service ends last
    return trace_id, [root, child, grandchild]


def test_trace_summary_reflects_all_batches(tmp_path):
    store = SpanStore(tmp_path)
    trace_id, (root, _, _) = _three_service_trace(store)
    [summary] = store.recent_traces()
    assert summary.trace_id == trace_id
    assert summary.root_name == "POST /send"
    assert summary.root_service == "gateway"
    assert summary.services == ("broker", "gateway")
    assert summary.span_count == 3
    assert summary.error_count == 1
    assert summary.start_ns == root.start_ns
    assert summary.duration_ns == 10_000_000


def test_trace_returns_spans_in_start_order_with_fields_intact(tmp_path):
    store = SpanStore(tmp_path)
    trace_id, spans = _three_service_trace(store)
    stored = store.trace(trace_id)
    assert stored == spans
    assert stored[2].attributes == {"queue.id": 3}
    assert store.trace(new_trace_id()) == []


def test_resent_batch_is_not_double_counted(tmp_path):
    store = SpanStore(tmp_path)
    trace_id = new_trace_id()
    spans = [make_span(trace_id, name=f"op{i}", start=i) for i in range(5)]
    assert store.insert(spans) == 5
    assert store.insert(spans) == 0  # an exporter retry after a lost reply
    assert store.recent_traces()[0].span_count == 5
    assert len(store.trace(trace_id)) == 5


def test_recent_traces_newest_first_with_limit_since_and_service(tmp_path):
    store = SpanStore(tmp_path)
    ids = [_three_service_trace(store, start=i * 100_000_000)[0] for i in range(4)]
    lonely = new_trace_id()
    store.insert([make_span(lonely, service="analytics", start=10**9)])
    assert [t.trace_id for t in store.recent_traces()] == [lonely, *reversed(ids)]
    assert [t.trace_id for t in store.recent_traces(limit=2)] == [lonely, ids[3]]
    assert [t.trace_id for t in store.recent_traces(service="broker")] == list(reversed(ids))
    assert [t.trace_id for t in store.recent_traces(service="analytics")] == [lonely]
    assert store.recent_traces(service="nobody") == []
    since = BASE_NS + 200_000_000
    assert [t.trace_id for t in store.recent_traces(since_ns=since)] == [lonely, ids[3], ids[2]]
    assert store.services() == ["analytics", "broker", "gateway"]


def test_trace_without_root_has_no_root_name(tmp_path):
    store = SpanStore(tmp_path)
    trace_id = new_trace_id()
    store.insert([make_span(trace_id, parent="00000000000000aa", name="late child")])
    [summary] = store.recent_traces()
    assert summary.root_name is None
    assert summary.span_count == 1


def test_count_retention_drops_oldest_spans_and_fixes_summaries(tmp_path):
    store = SpanStore(tmp_path, RetentionPolicy(max_spans=4))
    old = new_trace_id()
    store.insert([make_span(old, name=f"old{i}", start=i) for i in range(3)])
    new = new_trace_id()
    store.insert([make_span(new, name=f"new{i}", start=100 + i) for i in range(3)])
    assert store.stats().span_count == 4
    assert [s.name for s in store.trace(old)] == ["old2"]
    summaries = {t.trace_id: t for t in store.recent_traces()}
    assert summaries[old].span_count == 1
    assert summaries[new].span_count == 3
    store.insert([make_span(new_trace_id(), start=200 + i) for i in range(4)])
    assert store.trace(old) == [] and store.trace(new) == []
    assert old not in {t.trace_id for t in store.recent_traces()}


def test_age_retention_drops_spans_received_long_ago(tmp_path):
    store = SpanStore(tmp_path, RetentionPolicy(max_spans=0, max_age_hours=1))
    now = BASE_NS + 10 * HOUR_NS
    stale = new_trace_id()
    store.insert([make_span(stale)], now_ns=now - 2 * HOUR_NS)
    fresh = new_trace_id()
    store.insert([make_span(fresh)], now_ns=now - HOUR_NS // 2)
    store.enforce_retention(now_ns=now)
    assert store.trace(stale) == []
    assert [t.trace_id for t in store.recent_traces()] == [fresh]
    assert "broker" in store.services()


def test_store_reopens_existing_file_in_wal_mode(tmp_path):
    store = SpanStore(tmp_path)
    trace_id, _ = _three_service_trace(store)
    store.close()
    reopened = SpanStore(tmp_path)
    assert len(reopened.trace(trace_id)) == 3
    mode = sqlite3.connect(reopened.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


_batches = st.lists(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.booleans()), min_size=1,
             max_size=8),
    min_size=1, max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(batches=_batches, max_spans=st.integers(1, 15))
def test_summaries_always_match_surviving_spans(tmp_path_factory, batches, max_spans):
    """Whatever arrives in whatever order, retention holds and `traces` agrees with `spans`."""
    store = SpanStore(tmp_path_factory.mktemp("db"), RetentionPolicy(max_spans=max_spans))
    trace_ids = [new_trace_id() for _ in range(6)]
    span_ids: dict[tuple[int, int], str] = {}
    for batch in batches:
        spans = []
        for trace_index, span_index, is_error in batch:
            key = (trace_index, span_index)
            span_ids.setdefault(key, f"{trace_index + 1:08x}{span_index + 1:08x}")
            spans.append(make_span(trace_ids[trace_index], span_id=span_ids[key],
                                   start=span_index, status="ERROR" if is_error else "OK",
                                   parent=None if span_index == 0 else f"{trace_index + 1:08x}00000001"))
        store.insert(spans)
    assert store.stats().span_count <= max_spans
    summaries = {t.trace_id: t for t in store.recent_traces(limit=100)}
    for trace_id in trace_ids:
        spans = store.trace(trace_id)
        if not spans:
            assert trace_id not in summaries
            continue
        summary = summaries[trace_id]
        assert summary.span_count == len(spans)
        assert summary.error_count == sum(s.status_code == "ERROR" for s in spans)
        assert summary.start_ns == min(s.start_ns for s in spans)
        assert summary.end_ns == max(s.end_ns for s in spans)
        assert summary.services == tuple(sorted({s.service_name for s in spans}))
        roots = [s for s in spans if s.parent_span_id is None]
        assert summary.root_name == (roots[0].name if roots else None)
    store.close()


@settings(max_examples=40, deadline=None)
@given(batches=_batches, max_spans=st.integers(1, 15))
def test_index_rows_always_match_surviving_spans(tmp_path_factory, batches, max_spans):
    """Whatever arrives (duplicates, re-sent batches) and whatever retention drops, the index
    holds exactly the tags and links of the spans that are stored, each pointing at its span."""
    store = SpanStore(tmp_path_factory.mktemp("db"), RetentionPolicy(max_spans=max_spans))
    trace_ids = [new_trace_id() for _ in range(6)]
    for batch in batches:
        spans = []
        for trace_index, span_index, _ in batch:
            span = make_span(trace_ids[trace_index],
                             span_id=f"{trace_index + 1:08x}{span_index + 1:08x}",
                             **{"tidemq.message.keys": [f"k{trace_index}", f"k{span_index}"],
                                "messaging.message.id": f"m{span_index}"})
            link = {"trace_id": trace_ids[span_index % 6], "span_id": "0" * 15 + "1",
                    "attributes": {"messaging.message.id": f"u{trace_index}"}}
            spans.append(replace(span, links=[link] if span_index % 2 else []))
        store.insert(spans)
    stored = [span for trace_id in trace_ids for span in store.trace(trace_id)]
    with store.reading() as db:
        tag_rows = db.execute(
            "SELECT t.tag, t.value, t.trace_id, s.span_id FROM span_tags t "
            "LEFT JOIN spans s ON s.seq = t.seq").fetchall()
        link_rows = db.execute(
            "SELECT l.linked_trace_id, l.linked_span_id, l.trace_id, s.span_id "
            "FROM span_links l LEFT JOIN spans s ON s.seq = l.seq").fetchall()
    expected_tags = {(tag, value, span.trace_id, span.span_id)
                     for span in stored for tag, value in span_tags(span)}
    assert sorted(tag_rows) == sorted(expected_tags)  # no orphan, no duplicate, none missing
    expected_links = {(*target, span.trace_id, span.span_id)
                      for span in stored for target in span_links(span)}
    assert sorted(link_rows) == sorted(expected_links)
    store.close()
