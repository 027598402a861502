"""Offset planning of the tidemq Spark source: parsing, resolution, splitting (no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.analytics.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    OffsetSpec,
    QueueBounds,
    QueueKey,
    pack_ranges,
    parse_offsets,
    plan_ranges,
    split_ranges,
)
from tidemq.common.errors import InvalidArgument, PreconditionFailed

A0, A1, B0 = QueueKey("t", "broker-a", 0), QueueKey("t", "broker-a", 1), QueueKey("t", "broker-b", 0)
QUEUES = {A0: QueueBounds(0, 10), A1: QueueBounds(5, 20), B0: QueueBounds(0, 0)}


def spec(text, default):
    return parse_offsets("startingOffsets", text, default, "t")


def test_keywords_and_default():
    assert spec(None, EARLIEST).default == EARLIEST
    assert spec("  ", LATEST).default == LATEST
    assert spec("Earliest", LATEST).default == EARLIEST
    assert spec("latest", EARLIEST).default == LATEST


def test_json_offsets_keep_default_for_unnamed_queues():
    parsed = spec('{"broker-a": {"0": 3, "1": -1}}', EARLIEST)
    assert parsed.exact == {A0: 3, A1: LATEST}
    assert parsed.for_queue(B0) == EARLIEST


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{broker-a", "is not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"broker-a": 3}', "broker 'broker-a' must map to an object"),
        ('{"broker-a": {"x": 3}}', "queue id 'x' of broker 'broker-a' is not an integer"),
        ('{"broker-a": {"-1": 3}}', "queue id -1"),
        ('{"broker-a": {"0": "3"}}', "offset '3' for broker 'broker-a' queue 0"),
        ('{"broker-a": {"0": -3}}', "-2 (earliest) or -1 (latest)"),
        ('{"broker-a": {"0": true}}', "offset True"),
        ('{"broker-a": {"0": 1.5}}', "offset 1.5"),
        ("oldest", "'earliest', 'latest' or a JSON object"),
    ],
)
def test_bad_json_is_a_precise_invalid_argument(text, fragment):
    with pytest.raises(InvalidArgument) as info:
        spec(text, EARLIEST)
    assert info.value.code == "INVALID_ARGUMENT"
    assert "startingOffsets" in info.value.message
    assert fragment in info.value.message


def test_default_plan_reads_every_nonempty_queue_whole():
    ranges = plan_ranges(QUEUES, spec(None, EARLIEST), spec(None, LATEST))
    assert ranges == [OffsetRange("t", "broker-a", 0, 0, 10), OffsetRange("t", "broker-a", 1, 5, 20)]


def test_exact_offsets_and_latest_start():
    ranges = plan_ranges(
        QUEUES, spec('{"broker-a": {"0": 4}}', LATEST), spec('{"broker-a": {"0": 7}}', LATEST)
    )
    assert ranges == [OffsetRange("t", "broker-a", 0, 4, 7)]


def test_unknown_queue_in_json_is_rejected_with_known_queues_listed():
    with pytest.raises(InvalidArgument, match=r"t/broker-c/0 .*queues: t/broker-a/0, t/broker-a/1"):
        plan_ranges(QUEUES, spec('{"broker-c": {"0": 1}}', EARLIEST), spec(None, LATEST))


def test_end_past_queue_end_is_rejected():
    with pytest.raises(InvalidArgument, match="endingOffsets for topic 't' broker 'broker-a' queue 0 is 11"):
        plan_ranges(QUEUES, spec(None, EARLIEST), spec('{"broker-a": {"0": 11}}', LATEST))


def test_several_topics_name_the_topic_first():
    two = parse_offsets("startingOffsets", '{"t": {"broker-a": {"0": 4}}, "u": {"broker-b": '
                        '{"1": -1}}}', EARLIEST, None)
    assert two.exact == {A0: 4, QueueKey("u", "broker-b", 1): LATEST}
    with pytest.raises(InvalidArgument, match="of topic 't' JSON must be an object mapping"):
        parse_offsets("startingOffsets", '{"t": 4}', EARLIEST, None)
    with pytest.raises(InvalidArgument, match="mapping topics to"):
        parse_offsets("startingOffsets", "[1]", EARLIEST, None)


def test_start_after_end_is_rejected():
    with pytest.raises(InvalidArgument, match="is 9, after its ending offset 8"):
        plan_ranges(
            QUEUES, spec('{"broker-a": {"0": 9}}', EARLIEST), spec('{"broker-a": {"0": 8}}', LATEST)
        )


def test_deleted_start_fails_unless_data_loss_is_allowed():
    starting = spec('{"broker-a": {"1": 2}}', EARLIEST)
    with pytest.raises(PreconditionFailed) as info:
        plan_ranges(QUEUES, starting, spec(None, LATEST))
    assert info.value.code == "OFFSET_OUT_OF_RANGE"
    assert "failOnDataLoss=false" in info.value.message
    ranges = plan_ranges(QUEUES, starting, spec(None, LATEST), fail_on_data_loss=False)
    assert OffsetRange("t", "broker-a", 1, 5, 20) in ranges


def test_split_rejects_negative_size():
    with pytest.raises(InvalidArgument, match="maxRecordsPerPartition"):
        split_ranges([], -1)


@given(
    ranges=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 10_000), st.integers(1, 5_000)), max_size=8
    ),
    limit=st.integers(0, 2_000),
)
def test_split_covers_each_range_exactly_once(ranges, limit):
    originals = [OffsetRange("t", "b", qid, start, start + size) for qid, start, size in ranges]
    pieces = iter(split_ranges(originals, limit))
    for original in originals:
        covered, mine = original.start, []
        while covered < original.end:
            piece = next(pieces)
            assert (piece.broker, piece.queue_id, piece.start) == ("b", original.queue_id, covered)
            assert piece.size > 0 and (limit == 0 or piece.size <= limit)
            mine.append(piece.size)
            covered = piece.end
        assert covered == original.end
        assert len(mine) == (1 if limit == 0 else -(-original.size // limit))
        assert max(mine) - min(mine) <= 1
    assert next(pieces, None) is None


@given(
    bounds=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=6),
    data=st.data(),
)
def test_plan_ranges_stay_within_bounds(bounds, data):
    queues = {QueueKey("t", "b", i): QueueBounds(min(lo, hi), max(lo, hi))
              for i, (lo, hi) in enumerate(bounds)}
    exact_start = {}
    exact_end = {}
    for key, qb in queues.items():
        if data.draw(st.booleans()):
            exact_start[key] = data.draw(st.integers(qb.min_offset, qb.max_offset))
        if data.draw(st.booleans()):
            low = exact_start.get(key, qb.min_offset)
            exact_end[key] = data.draw(st.integers(low, qb.max_offset))
    ranges = plan_ranges(
        queues,
        OffsetSpec(EARLIEST, exact_start),
        OffsetSpec(LATEST, exact_end),
    )
    for rng in ranges:
        qb = queues[QueueKey(rng.topic, rng.broker, rng.queue_id)]
        key = QueueKey(rng.topic, rng.broker, rng.queue_id)
        assert qb.min_offset <= rng.start < rng.end <= qb.max_offset
        assert rng.start == exact_start.get(key, qb.min_offset)
        assert rng.end == exact_end.get(key, qb.max_offset)
    planned = {QueueKey(r.topic, r.broker, r.queue_id) for r in ranges}
    for key, qb in queues.items():
        if key not in planned:
            assert exact_start.get(key, qb.min_offset) == exact_end.get(key, qb.max_offset)


ranges_strategy = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5000)), max_size=12).map(
    lambda sizes: [OffsetRange("t", f"broker-{b}", q, 10, 10 + size)
                   for q, (b, size) in enumerate(sizes)])


@given(ranges=ranges_strategy, target=st.integers(0, 20_000))
def test_packing_reads_every_range_once_in_few_balanced_partitions(ranges, target):
    packed = pack_ranges(ranges, target)
    assert sorted(r for group in packed for r in group) == sorted(ranges), "each range once"
    assert all(group for group in packed)
    total = sum(r.size for r in ranges)
    if target == 0 or not ranges:
        assert packed == [(r,) for r in ranges]
        return
    assert len(packed) == min(len(ranges), max(1, -(-total // target)))
    loads = [sum(r.size for r in group) for group in packed]
    assert max(loads) - min(loads) <= max(r.size for r in ranges), "largest first, lightest bin"
    for group in packed:
        assert list(group) == sorted(group, key=lambda r: (r.topic, r.broker, r.queue_id))


def test_small_ranges_share_a_partition_big_ones_keep_their_own():
    small = [OffsetRange("t", "broker-a", q, 0, 100) for q in range(4)]
    assert pack_ranges(small, 20_000) == [tuple(small)]
    big = [OffsetRange("t", "broker-b", q, 0, 30_000) for q in range(3)]
    # ceil(90 400 / 20 000) = 5 partitions: one per big range, the small ones share two
    assert pack_ranges(big + small, 20_000) == [(small[0], small[2]), (small[1], small[3]),
                                                (big[0],), (big[1],), (big[2],)]
    with pytest.raises(InvalidArgument, match="targetRecordsPerPartition"):
        pack_ranges(small, -1)
