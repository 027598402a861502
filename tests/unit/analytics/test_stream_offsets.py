"""Micro-batch offset arithmetic of the tidemq streaming source (no Spark)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tidemq.analytics.offsets import (
    QueueKey,
    cap_positions,
    from_stream_offsets,
    to_stream_offsets,
)

A0, A1, B0 = QueueKey("t", "broker-a", 0), QueueKey("t", "broker-a", 1), QueueKey("t", "broker-b", 0)


def test_offsets_round_trip_through_the_checkpoint_shape():
    positions = {A0: 3, A1: 0, B0: 12}
    stored = to_stream_offsets(positions, "t")
    assert stored == {"broker-a": {"0": 3, "1": 0}, "broker-b": {"0": 12}}
    assert from_stream_offsets(stored, "t") == positions


def test_offsets_of_several_topics_are_keyed_by_topic_first():
    positions = {A0: 3, QueueKey("u", "broker-a", 0): 5}
    stored = to_stream_offsets(positions, None)
    assert stored == {"t": {"broker-a": {"0": 3}}, "u": {"broker-a": {"0": 5}}}
    assert from_stream_offsets(stored, None) == positions


def test_uncapped_batch_reads_to_latest_and_new_queues_start_at_zero():
    assert cap_positions({A0: 3}, {A0: 10, A1: 4}, None) == {A0: 10, A1: 4}


def test_cap_shares_the_budget_by_backlog():
    assert cap_positions({A0: 0, A1: 0}, {A0: 30, A1: 10}, 8) == {A0: 6, A1: 2}


def test_queue_missing_from_the_route_keeps_its_position():
    assert cap_positions({A0: 3, B0: 7}, {A0: 5}, None) == {A0: 5, B0: 7}


@given(
    queues=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=6),
    max_rows=st.one_of(st.none(), st.integers(1, 120)),
)
def test_cap_never_exceeds_budget_or_latest_and_always_progresses(queues, max_rows):
    start = {QueueKey("t", "b", i): s for i, (s, _) in enumerate(queues)}
    latest = {QueueKey("t", "b", i): s + extra for i, (s, extra) in enumerate(queues)}
    ends = cap_positions(start, latest, max_rows)
    moved = sum(ends[k] - start[k] for k in latest)
    backlog = sum(latest[k] - start[k] for k in latest)
    assert all(start[k] <= ends[k] <= latest[k] for k in latest)
    assert moved == (backlog if max_rows is None else min(backlog, max_rows))


def test_a_queue_that_appears_mid_stream_is_read_from_its_first_stored_offset(monkeypatch):
    """A topic a pattern starts matching (or a broker group added to a route) may already have
    lost its oldest messages to retention: the stream starts it at its min offset, not 0."""
    from tidemq.analytics import streaming
    from tidemq.analytics.offsets import QueueBounds
    from tidemq.analytics.reading import ReadOptions, Survey

    new = QueueKey("u", "broker-b", 0)
    bounds = {A0: QueueBounds(0, 10), new: QueueBounds(5, 9)}
    addrs = {"broker-a": ("a:1",), "broker-b": ("b:1",)}
    monkeypatch.setattr(streaming, "survey", lambda opts: Survey(bounds, addrs))
    reader = streaming.TideMQStreamReader(ReadOptions.parse(
        {"namesrv": "h:1", "subscribePattern": ".*"}))
    start = to_stream_offsets({A0: 4}, None)  # the last batch ended before `u` existed
    end = reader.latestOffset(start)
    assert from_stream_offsets(end, None) == {A0: 10, new: 9}
    ranges = {(r.topic, r.queue_id): (r.start, r.end)
              for p in reader.partitions(start, end) for r in p.ranges}
    assert ranges == {("t", 0): (4, 10), ("u", 0): (5, 9)}


def test_a_micro_batch_with_nothing_to_read_still_plans_one_task_that_reads_nothing(monkeypatch):
    """So a query's first micro-batch (from "latest": nothing new) starts the read's Python
    worker; the first batch with messages then does not wait for it."""
    from pyspark.sql.datasource import InputPartition
    from tidemq.analytics import streaming
    from tidemq.analytics.offsets import QueueBounds
    from tidemq.analytics.reading import ReadOptions, Survey

    monkeypatch.setattr(streaming, "survey", lambda opts: Survey({A0: QueueBounds(0, 10)},
                                                                 {"broker-a": ("a:1",)}))
    reader = streaming.TideMQStreamReader(ReadOptions.parse({"namesrv": "h:1", "topic": "t"}))
    same = to_stream_offsets({A0: 10}, "t")
    [empty] = reader.partitions(same, same)
    assert type(empty) is InputPartition
    assert list(reader.read(empty)) == []
    [one] = reader.partitions(to_stream_offsets({A0: 7}, "t"), same)
    assert [(r.queue_id, r.start, r.end) for r in one.ranges] == [(0, 7, 10)]
