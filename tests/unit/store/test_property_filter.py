"""Property-filtered (SQL92) reads of the store: only matching records, bounded scans, and
paging with next_begin_offset returns exactly the model's matches."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import GetStatus, property_scan
from tidemq.common import record
from tidemq.common.sqlfilter import compile_sql92

from .helpers import open_store, small_config


def append(store, topic: str, queue_id: int, items: list[tuple[bytes, dict[str, str]]],
           tags: str = "") -> None:
    raw = b"".join(record.encode_message(record.OutgoingMessage(topic, body, tags=tags,
                                                                properties=props))[0]
                   for body, props in items)
    store.append_batch(topic, queue_id, raw, len(items))


def read_filtered(store, topic, queue_id, selector, *, max_messages=7, tag_hashes=None):
    """Page through a queue with the filter as a consumer would; (bodies, pulls)."""
    bodies, offset, pulls = [], 0, 0
    while offset < store.max_offset(topic, queue_id):
        got = store.get_messages(topic, queue_id, offset, max_messages, 1 << 20, tag_hashes,
                                 selector.matches_encoded)
        pulls += 1
        assert got.next_begin_offset > offset, "a filtered read must always move on"
        assert got.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE)
        bodies += [bytes(r.body) for r in record.iter_records(got.records)]
        offset = got.next_begin_offset
    return bodies, pulls


def test_only_matching_records_and_the_body_is_not_what_is_matched(tmp_path):
    store = open_store(small_config(tmp_path))
    try:
        # a body that looks like matching properties must not match
        append(store, "t", 0, [(b"a\x017\x02", {"a": "1"}), (b"x", {"a": "7", "b": "x"}),
                               (b"y", {"b": "x"}), (b"z", {"a": "9", "b": "y"})])
        assert store.wait_dispatched(5)
        bodies, _ = read_filtered(store, "t", 0, compile_sql92("a > 5"))
        assert bodies == [b"x", b"z"]
        bodies, _ = read_filtered(store, "t", 0, compile_sql92("a IS NULL OR b = 'y'"))
        assert bodies == [b"y", b"z"]
        bodies, _ = read_filtered(store, "t", 0, compile_sql92("TAGS IS NOT NULL"))
        assert bodies == []
    finally:
        store.shutdown()


def test_tag_hashes_and_properties_both_apply(tmp_path):
    store = open_store(small_config(tmp_path))
    try:
        append(store, "t", 0, [(b"r1", {"a": "1"}), (b"r2", {"a": "2"})], tags="red")
        append(store, "t", 0, [(b"b2", {"a": "2"})], tags="blue")
        assert store.wait_dispatched(5)
        red = frozenset({record.tag_hash("red")})
        assert read_filtered(store, "t", 0, compile_sql92("a = 2"), tag_hashes=red)[0] == [b"r2"]
    finally:
        store.shutdown()


def test_a_long_run_of_non_matching_records_is_answered_in_bounded_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(property_scan, "MAX_PROPERTY_FILTER_SCAN", 50)
    store = open_store(small_config(tmp_path, segment_size=1 << 20,
                                    consume_queue_units_per_file=1000))
    try:
        append(store, "t", 0, [(b"n", {"a": "0"})] * 180 + [(b"yes", {"a": "1"})])
        assert store.wait_dispatched(5)
        got = store.get_messages("t", 0, 0, 32, 1 << 20, None, compile_sql92("a = 1")
                                 .matches_encoded)
        assert (got.status, got.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 50)
        bodies, pulls = read_filtered(store, "t", 0, compile_sql92("a = 1"), max_messages=32)
        assert bodies == [b"yes"] and pulls == 4   # 50 + 50 + 50 + (30 skipped, 1 found)
    finally:
        store.shutdown()


values = st.sampled_from(["1", "5", "7", "x", "", "2.5"])
messages = st.lists(st.tuples(st.integers(0, 3000),
                              st.dictionaries(st.sampled_from(["a", "b"]), values, max_size=2)),
                    min_size=1, max_size=60)
expressions = st.sampled_from(["a > 4", "a = 'x' OR b IS NULL", "NOT (a BETWEEN 1 AND 5)",
                               "b IN ('', '7')", "a <> b", "TRUE", "FALSE"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(messages, expressions, st.integers(1, 9), st.sampled_from([1, 5000, 64 * 1024]))
def test_paging_returns_exactly_the_matches(tmp_path_factory, plan, expression, max_messages,
                                            block_max):
    """Small segments: records cross segment ends and CQ files; other queues interleave; the
    block of back-to-back records read at once is cut anywhere (even below one record)."""
    store = open_store(small_config(tmp_path_factory.mktemp("store")))
    try:
        for n, (size, props) in enumerate(plan):
            append(store, "p", 0, [(bytes([n % 256]) * size, props)])
            if n % 3 == 0:
                append(store, "q", 0, [(b"other", props)])
        assert store.wait_dispatched(10)
        selector = compile_sql92(expression)
        expected = [bytes([n % 256]) * size for n, (size, props) in enumerate(plan)
                    if selector.matches(props)]
        with mock.patch.object(property_scan, "BLOCK_MAX", block_max):
            bodies = read_filtered(store, "p", 0, selector, max_messages=max_messages)[0]
        assert bodies == expected
    finally:
        store.shutdown()
