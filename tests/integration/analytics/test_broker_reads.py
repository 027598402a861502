"""The source's gRPC side without Spark: planning and ranged pulls against a real broker."""

from __future__ import annotations

import pytest
from tidemq.analytics import brokers
from tidemq.analytics.decode import ColumnBuilder, arrow_schema
from tidemq.analytics.reading import ReadOptions, plan_partitions, read_partition
from tidemq.common import errors

from tests.integration.analytics.cluster import BROKER, tagged
from tests.support.processes import dead_endpoint

TOPIC = "analytics-pulls"
SIZES = {0: 25, 1: 0, 2: 9}  # queue 1 stays empty


@pytest.fixture(scope="module")
def topic(cluster):
    cluster.create_topic(TOPIC, len(SIZES))
    cluster.send(TOPIC, {q: [tagged(TOPIC, f"T{q}", i) for i in range(n)]
                         for q, n in SIZES.items()}, batch=10)
    return TOPIC


def test_route_skips_an_unreachable_name_server(cluster, topic):
    dead = dead_endpoint()
    groups = brokers.fetch_route([dead, cluster.namesrv.addr], topic, timeout=3)
    assert [(g.name, g.read_queues, g.addrs) for g in groups] == [
        (BROKER, len(SIZES), (cluster.broker.addr,))]
    bounds = brokers.fetch_bounds(groups, topic, timeout=3)
    assert {k.queue_id: (b.min_offset, b.max_offset) for k, b in bounds.items()} == {
        q: (0, n) for q, n in SIZES.items()}


def test_unknown_topic_is_topic_not_exist(cluster, topic):
    with pytest.raises(errors.TopicNotExist):
        brokers.fetch_route([cluster.namesrv.addr], "no-such-topic", timeout=3)


def test_no_name_server_answering_is_service_unavailable():
    dead = [dead_endpoint(), dead_endpoint()]
    with pytest.raises(errors.ServiceUnavailable, match="no name server answered"):
        brokers.fetch_route(dead, "t", timeout=1)


@pytest.mark.parametrize(("start", "end", "max_messages"), [(0, 25, 1000), (3, 17, 4), (24, 25, 1)])
def test_pull_range_returns_exactly_the_range(cluster, topic, start, end, max_messages):
    builder = ColumnBuilder(BROKER, arrow_schema())
    for reply in brokers.pull_range([cluster.broker.addr], topic, 0, start, end,
                                    max_messages=max_messages, timeout=3,
                                    consumer_group="tidemq-spark"):
        builder.add_slice(reply, start, end)
    batch = builder.flush()
    assert batch.column("queue_offset").to_pylist() == list(range(start, end))
    assert set(batch.column("tag").to_pylist()) == {"T0"}


def test_pull_falls_back_to_the_next_replica(cluster, topic):
    dead = dead_endpoint()
    replies = list(brokers.pull_range([dead, cluster.broker.addr], topic, 2, 0, 9,
                                      max_messages=100, timeout=3))
    builder = ColumnBuilder(BROKER, arrow_schema())
    assert sum(builder.add_slice(r, 0, 9) for r in replies) == 9


def test_plan_and_read_partitions_without_spark(cluster, topic):
    opts = ReadOptions.parse({"namesrv": cluster.namesrv.addr, "topic": topic,
                              "maxRecordsPerPartition": "10", "maxMessagesPerPull": "7"})
    partitions = plan_partitions(opts)
    assert [(p.queue_id, p.start, p.end) for p in partitions] == [
        (0, 0, 8), (0, 8, 16), (0, 16, 25), (2, 0, 9)]
    seen = []
    for partition in partitions:
        for batch in read_partition(opts, partition):
            seen += zip(batch.column("queue_id").to_pylist(),
                        batch.column("queue_offset").to_pylist(), strict=True)
    assert sorted(seen) == [(q, o) for q, n in SIZES.items() for o in range(n)]


def test_range_past_the_queue_end_fails_loudly(cluster, topic):
    with pytest.raises(errors.PreconditionFailed) as info:
        list(brokers.pull_range([cluster.broker.addr], topic, 2, 5, 12, max_messages=100,
                                timeout=3))
    assert info.value.code == "OFFSET_OUT_OF_RANGE"
