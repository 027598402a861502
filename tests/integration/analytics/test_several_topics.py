"""Reading several topics at once, as Kafka's `subscribe` / `subscribePattern` do: a batch read
of a list, and a stream whose pattern picks up a topic created while it runs (the brokers'
own topics and non-matching ones are never read)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.analytics.cluster import tagged

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def fill(cluster, topic: str, count: int) -> None:
    cluster.create_topic(topic, 2)
    cluster.send(topic, {q: [tagged(topic, "x", n) for n in range(q, count, 2)] for q in (0, 1)})


def by_topic(rows) -> Counter:
    return Counter(row["topic"] for row in rows)


def test_batch_subscribe_reads_every_listed_topic(spark, cluster):
    fill(cluster, "multi-a", 5)
    fill(cluster, "multi-b", 3)
    fill(cluster, "multi-c", 4)  # not listed
    rows = (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
            .option("subscribe", "multi-a,multi-b")
            .option("startingOffsets", '{"multi-a": {"broker-a": {"0": 1}}}')
            .load().collect())
    assert by_topic(rows) == {"multi-a": 4, "multi-b": 3}  # multi-a queue 0 from offset 1
    keys = {(r["topic"], r["queue_id"], r["queue_offset"]) for r in rows}
    assert len(keys) == len(rows)


def test_stream_pattern_picks_up_new_topics_and_skips_others(spark, cluster, tmp_path):
    fill(cluster, "events-1", 4)
    fill(cluster, "audit-1", 2)  # does not match
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start():
        return (spark.readStream.format("tidemq").option("namesrv", cluster.namesrv.addr)
                .option("subscribePattern", "events-.*").option("startingOffsets", "earliest")
                .load().select("topic", "queue_id", "queue_offset").writeStream
                .format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).start())

    def written() -> Counter:
        return Counter((r["topic"], r["queue_id"], r["queue_offset"])
                       for r in spark.read.parquet(str(out)).collect())

    query = start()
    try:
        query.processAllAvailable()
        fill(cluster, "events-2", 3)  # created while the query runs: read from its start
        query.processAllAvailable()
    finally:
        query.stop()
    got = written()
    assert set(got.values()) == {1}
    assert Counter(topic for topic, _, _ in got) == {"events-1": 4, "events-2": 3}

    fill(cluster, "events-3", 2)  # while stopped: the restarted query reads only what is new
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = written()
    assert set(got.values()) == {1}
    assert Counter(topic for topic, _, _ in got) == {"events-1": 4, "events-2": 3, "events-3": 2}
