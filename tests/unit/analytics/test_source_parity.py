"""Kafka-parity source options, the pure parts: minPartitions splitting (hypothesis),
startingOffsetsByTimestamp parsing, and the option values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.analytics.offsets import (
    OffsetRange,
    QueueKey,
    TimestampSpec,
    ensure_min_partitions,
    parse_timestamps,
)
from tidemq.analytics.reading import ReadOptions
from tidemq.common.errors import InvalidArgument

ranges_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(0, 5000)),
    max_size=6, unique_by=lambda t: t[0],
).map(lambda items: [OffsetRange("t", "b", q, start, start + size) for q, start, size in items])


@given(ranges_strategy, st.integers(0, 64))
def test_min_partitions_covers_the_same_offsets(ranges, min_partitions):
    pieces = ensure_min_partitions(ranges, min_partitions)
    covered = sorted((p.queue_id, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted((r.queue_id, o) for r in ranges for o in range(r.start, r.end))
    total = sum(r.size for r in ranges)
    if len(ranges) >= min_partitions or total == 0:
        assert pieces == ranges
    else:
        assert len(pieces) >= min(min_partitions, total)
        assert max(p.size for p in pieces) <= -(-total // min_partitions)


def test_timestamps_parse():
    assert parse_timestamps(None, "t") is None and parse_timestamps(" ", "t") is None
    assert parse_timestamps("1767225600000", "t") == TimestampSpec(1767225600000, {})
    spec = parse_timestamps('{"broker-a": {"0": 5, "1": 7}}', "t")
    assert spec.for_queue(QueueKey("t", "broker-a", 1)) == 7
    assert spec.for_queue(QueueKey("t", "broker-a", 2)) is None
    with pytest.raises(InvalidArgument, match="startingOffsetsByTimestamp"):
        parse_timestamps('{"broker-a": {"0": "soon"}}', "t")
    with pytest.raises(InvalidArgument, match=">= 0"):
        parse_timestamps('{"broker-a": {"0": -1}}', "t")


def test_parity_options():
    opts = ReadOptions.parse({"namesrv": "h:1", "topic": "t", "minPartitions": "8",
                              "startingOffsetsByTimestamp": "5", "includeHeaders": "false",
                              "progressGroup": "spark-q"})
    assert (opts.min_partitions, opts.starting_by_timestamp, opts.include_headers,
            opts.progress_group) == (8, "5", False, "spark-q")
    with pytest.raises(InvalidArgument, match="minPartitions must be >= 0"):
        ReadOptions.parse({"namesrv": "h:1", "topic": "t", "minPartitions": "-1"})
