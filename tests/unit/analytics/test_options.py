"""Options of format("tidemq") and the partitions it plans (no Spark JVM needed)."""

from __future__ import annotations

import pickle

import pytest
from tidemq.analytics.offsets import OffsetRange
from tidemq.analytics.reading import (
    PackedPartition,
    QueueRangePartition,
    ReadOptions,
    to_partitions,
)
from tidemq.common.errors import InvalidArgument


def test_defaults_and_case_insensitive_names():
    opts = ReadOptions.parse({"NameSrv": "h1:1; h2:2", "TOPIC": "orders"})
    assert opts.namesrv == ("h1:1", "h2:2") and opts.topic == "orders"
    assert (opts.starting, opts.ending) == (None, None)
    assert opts.max_messages_per_pull == 5000 and opts.max_records_per_partition == 0
    assert opts.fail_on_data_loss is True


def test_values_are_parsed():
    opts = ReadOptions.parse({
        "namesrv": "h:1", "topic": "t", "startingOffsets": "latest",
        "maxMessagesPerPull": "32", "maxRecordsPerPartition": "500", "failOnDataLoss": "False",
    })
    assert opts.starting == "latest" and opts.max_messages_per_pull == 32
    assert opts.max_records_per_partition == 500 and opts.fail_on_data_loss is False


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"namesrv": "h:1"}, "exactly one of the options topic, subscribe (a comma"),
        ({"namesrv": "h:1", "topic": "t", "subscribePattern": "t.*"},
         "got topic and subscribePattern"),
        ({"namesrv": "h:1", "subscribe": " , "}, "none was given"),
        ({"namesrv": "h:1", "subscribePattern": "orders("}, "not a valid regular expression"),
        ({"topic": "t"}, "option namesrv is required"),
        ({"topic": "t", "namesrv": "h1"}, "'h1' must be host:port"),
        ({"topic": "t", "namesrv": "h:1", "maxMessagesPerPull": "0"}, "maxMessagesPerPull must be >= 1"),
        ({"topic": "t", "namesrv": "h:1", "maxMessagesPerPull": "ten"}, "must be an integer"),
        ({"topic": "t", "namesrv": "h:1", "failOnDataLoss": "yes"}, "must be true or false"),
    ],
)
def test_bad_options_are_precise_invalid_arguments(options, fragment):
    with pytest.raises(InvalidArgument) as info:
        ReadOptions.parse(options)
    assert fragment in info.value.message


def test_subscribe_reads_several_topics_keyed_by_topic():
    listed = ReadOptions.parse({"namesrv": "h:1", "subscribe": "orders, clicks,"})
    assert listed.subscribe == ("orders", "clicks") and listed.single_topic is None
    pattern = ReadOptions.parse({"namesrv": "h:1", "subscribePattern": "orders-.*"})
    assert pattern.subscribe_pattern == "orders-.*" and pattern.single_topic is None
    assert ReadOptions.parse({"namesrv": "h:1", "topic": "orders"}).single_topic == "orders"


def test_partition_is_small_when_pickled():
    partition = QueueRangePartition("t", "broker-a", ("10.0.0.1:10911", "10.0.0.2:10911"), 3, 0, 10**9)
    raw = pickle.dumps(partition)
    assert len(raw) < 400
    again = pickle.loads(raw)
    assert (again.broker, again.addrs, again.queue_id, again.start, again.end) == (
        "broker-a", ("10.0.0.1:10911", "10.0.0.2:10911"), 3, 0, 10**9)


def test_small_ranges_are_packed_unless_the_partitions_are_shaped_by_hand():
    addrs = {"broker-a": ("10.0.0.1:10911",)}
    ranges = [OffsetRange("t", "broker-a", q, 0, 500) for q in range(4)]
    default = ReadOptions.parse({"namesrv": "h:1", "topic": "t"})
    assert default.target_records_per_partition == 20_000
    [packed] = to_partitions(ranges, addrs, default)
    assert isinstance(packed, PackedPartition)
    assert [(r.queue_id, r.start, r.end) for r in packed.ranges] == [(q, 0, 500) for q in range(4)]
    assert pickle.loads(pickle.dumps(packed)).ranges[3].addrs == addrs["broker-a"]
    for shaping in ({"targetRecordsPerPartition": "0"}, {"maxRecordsPerPartition": "1000"},
                    {"minPartitions": "2"}):
        opts = ReadOptions.parse({"namesrv": "h:1", "topic": "t", **shaping})
        parts = to_partitions(ranges, addrs, opts)
        assert all(isinstance(p, QueueRangePartition) for p in parts), shaping
        assert len(parts) == 4, shaping
