"""readStream.format("tidemq"): micro-batches, a per-trigger cap, and resuming from a checkpoint."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.analytics.cluster import tagged

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "analytics-stream"
QUEUES = 2


def send(cluster, first: int, count: int) -> None:
    per_queue: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
    for n in range(first, first + count):
        per_queue[n % QUEUES].append(tagged(TOPIC, f"S{n % 3}", n))
    cluster.send(TOPIC, {q: r for q, r in per_queue.items() if r})


def start_query(spark, cluster, out, checkpoint, **options):
    reader = (spark.readStream.format("tidemq").option("namesrv", cluster.namesrv.addr)
              .option("topic", TOPIC))
    for name, value in options.items():
        reader = reader.option(name, value)
    return (reader.load().select("queue_id", "queue_offset", "tag").writeStream
            .format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).start())


def positions(spark, out) -> Counter:
    rows = spark.read.parquet(str(out)).collect()
    return Counter((row["queue_id"], row["queue_offset"]) for row in rows)


def expected(total: int) -> set[tuple[int, int]]:
    return {(q, o) for q in range(QUEUES) for o in range(len(range(q, total, QUEUES)))}


def test_stream_reads_each_message_once_across_batches_and_restarts(spark, cluster, tmp_path):
    cluster.create_topic(TOPIC, QUEUES)
    send(cluster, 0, 10)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = start_query(spark, cluster, out, checkpoint, startingOffsets="earliest",
                        maxOffsetsPerTrigger="6")
    try:
        query.processAllAvailable()
        sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
        assert sum(sizes) == 10 and max(sizes) <= 6 and len(sizes) >= 2, sizes
        send(cluster, 10, 4)
        query.processAllAvailable()
    finally:
        query.stop()
    got = positions(spark, out)
    assert set(got.values()) == {1} and set(got) == expected(14)

    send(cluster, 14, 3)  # while no query runs: the restarted one must pick up exactly these
    query = start_query(spark, cluster, out, checkpoint, startingOffsets="earliest")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = positions(spark, out)
    assert set(got.values()) == {1} and set(got) == expected(17)


def test_stream_starts_at_latest_by_default(spark, cluster, tmp_path):
    cluster.create_topic(TOPIC, QUEUES)  # idempotent for the module's shared topic
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    before = sum(cluster.queue_ends(TOPIC).values())
    query = start_query(spark, cluster, out, checkpoint)
    try:
        query.processAllAvailable()
        send(cluster, before, 4)
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 4
    assert all(row["queue_offset"] >= before // QUEUES for row in rows)


def test_ending_offsets_are_refused_for_streams(spark, cluster, tmp_path):
    with pytest.raises(Exception, match="endingOffsets is for batch reads"):
        query = start_query(spark, cluster, tmp_path / "o", tmp_path / "c", endingOffsets="latest")
        query.processAllAvailable()
