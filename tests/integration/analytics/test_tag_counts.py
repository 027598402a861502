"""The tidemq Spark source and the tag_counts job against real processes.

Redis, config-center, a name server and a broker run as real processes on loopback; messages
with known tags go in over BrokerService.Send; a real local SparkSession (one per module:
JVM start-up is the expensive part) reads them back through format("tidemq").
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tidemq.client import compression
from tidemq.common import record as rec

from tests.integration.analytics.cluster import BROKER, tagged

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "analytics-tags"
QUEUES = 4
# (tag, count): spread over the queues round-robin; "" = messages without a tag.
TAGS = [("TagA", 37), ("TagB", 23), ("TagC", 11), ("", 5)]


@pytest.fixture(scope="module")
def loaded(cluster):
    """The topic with every TAGS message sent; returns what each queue holds."""
    cluster.create_topic(TOPIC, QUEUES)
    per_queue: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
    expected_bodies = {}
    n = 0
    for tag, count in TAGS:
        for _ in range(count):
            body = f"{tag or 'untagged'}-{n}".encode()
            if n % 10 == 0:  # some bodies travel compressed, as the client sends big ones
                message = rec.OutgoingMessage(TOPIC, body, tags=tag, keys=[f"k{n}", "all"],
                                              properties={"seq": str(n)})
                record, _ = rec.encode_message(
                    message, sys_flag=rec.SYS_FLAG_COMPRESSED,
                    body=compression.compress(body, compression.ZSTD),
                    extra_properties={rec.PROP_COMPRESSION: compression.ZSTD})
            else:
                record = tagged(TOPIC, tag, n)
            per_queue[n % QUEUES].append(record)
            expected_bodies[str(n)] = body
            n += 1
    cluster.send(TOPIC, per_queue, batch=7)
    return {"sizes": {q: len(r) for q, r in per_queue.items()}, "bodies": expected_bodies,
            "namesrv": cluster.namesrv.addr}


def read(spark, namesrv: str, **options):
    reader = spark.read.format("tidemq").option("namesrv", namesrv).option("topic", TOPIC)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_reads_every_message_once_with_exact_tag_counts(spark, loaded):
    frame = read(spark, loaded["namesrv"])
    assert frame.rdd.getNumPartitions() == 1, "small queue ranges are packed into one task"
    by_queue = read(spark, loaded["namesrv"], targetRecordsPerPartition="0")
    assert by_queue.rdd.getNumPartitions() == QUEUES
    assert sorted(by_queue.select("queue_id", "queue_offset").collect()) == sorted(
        frame.select("queue_id", "queue_offset").collect())
    rows = frame.collect()
    assert Counter(row["tag"] for row in rows) == dict(TAGS)
    positions = Counter((row["queue_id"], row["queue_offset"]) for row in rows)
    assert set(positions.values()) == {1}, "a (queue, offset) was read twice"
    assert set(positions) == {(q, o) for q, size in loaded["sizes"].items() for o in range(size)}
    for row in rows:
        seq = row["properties"]["seq"]
        assert bytes(row["body"]) == loaded["bodies"][seq], "body (decompressed) as sent"
        assert row["keys"] == [f"k{seq}", "all"]
        assert (row["topic"], row["broker"]) == (TOPIC, BROKER)
        assert len(row["msg_id"]) == 32 and len(row["unique_id"]) == 32
        assert row["store_timestamp"] >= row["born_timestamp"]


def test_group_by_tag_in_spark(spark, loaded):
    counts = read(spark, loaded["namesrv"]).groupBy("tag").count().collect()
    assert {row["tag"]: row["count"] for row in counts} == dict(TAGS)


def test_offset_ranges_and_split_partitions(spark, loaded):
    starting = json.dumps({BROKER: {"0": 2, "1": -1}})
    ending = json.dumps({BROKER: {"0": 5, "2": 3}})
    frame = read(spark, loaded["namesrv"], startingOffsets=starting, endingOffsets=ending)
    got = sorted((r["queue_id"], r["queue_offset"]) for r in
                 frame.select("queue_id", "queue_offset").collect())
    expected = ([(0, o) for o in range(2, 5)] + [(2, o) for o in range(3)]
                + [(3, o) for o in range(loaded["sizes"][3])])
    assert got == expected
    split = read(spark, loaded["namesrv"], maxRecordsPerPartition="4", maxMessagesPerPull="3")
    assert split.rdd.getNumPartitions() == sum(-(-size // 4) for size in loaded["sizes"].values())
    assert split.count() == sum(count for _, count in TAGS)
    assert split.select("queue_id", "queue_offset").distinct().count() == split.count()


def test_a_schema_picks_columns_and_spark_gets_only_those(spark, loaded):
    """.schema(...) is the source's column pruning (the Python Data Source API has none):
    any of the columns, in any order, nullable or not as the user declares them, with the
    values a full read gives; anything else is refused by name."""
    full = {(r["queue_id"], r["queue_offset"]): r for r in read(spark, loaded["namesrv"]).collect()}
    picked = (spark.read.format("tidemq").option("namesrv", loaded["namesrv"])
              .option("topic", TOPIC)
              .schema("keys array<string>, queue_offset bigint, body binary, queue_id int, "
                      "properties map<string,string>").load())
    assert picked.columns == ["keys", "queue_offset", "body", "queue_id", "properties"]
    rows = picked.collect()
    assert len(rows) == len(full)
    for row in rows:
        expected = full[(row["queue_id"], row["queue_offset"])]
        assert (bytes(row["body"]), row["keys"], row["properties"]) == (
            bytes(expected["body"]), expected["keys"], expected["properties"])
    with pytest.raises(Exception, match="unknown columns value"):
        (spark.read.format("tidemq").option("namesrv", loaded["namesrv"]).option("topic", TOPIC)
         .schema("value binary").load().count())


def test_unknown_topic_and_bad_offsets_fail_with_the_tidemq_code(spark, loaded):
    with pytest.raises(Exception, match="TOPIC_NOT_EXIST"):
        (spark.read.format("tidemq").option("namesrv", loaded["namesrv"])
         .option("topic", "no-such-topic").load().count())
    with pytest.raises(Exception,
                       match=f"endingOffsets for topic '{TOPIC}' broker 'broker-a' queue 0 is 999"):
        read(spark, loaded["namesrv"], endingOffsets=json.dumps({BROKER: {"0": 999}})).count()


def test_tag_counts_job_writes_the_csv(loaded, tmp_path):
    output = tmp_path / "counts.csv"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "tidemq.analytics.tag_counts", "--namesrv", loaded["namesrv"],
         "--topic", TOPIC, "--output", str(output), "--master", "local[1]"],
        capture_output=True, text=True, timeout=240, env=env, cwd=Path(__file__).parents[3],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with output.open(newline="") as f:
        rows = list(csv.reader(f))
    expected = sorted(TAGS, key=lambda tc: (-tc[1], tc[0]))
    assert rows == [["tag", "count"]] + [[tag, str(count)] for tag, count in expected]
    assert f"{sum(c for _, c in TAGS)} messages, {len(TAGS)} tags" in done.stdout



def test_a_topic_with_only_empty_queues_reads_as_no_rows(spark, cluster):
    cluster.create_topic("analytics-empty", 2)
    frame = (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
             .option("topic", "analytics-empty").load())
    assert frame.count() == 0
    assert frame.groupBy("tag").count().collect() == []


def test_tag_counts_job_checks_the_topic_before_starting_spark(cluster, tmp_path):
    """A typo'd topic fails with its code before Spark's start-up, and exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-m", "tidemq.analytics.tag_counts", "--namesrv", cluster.namesrv.addr,
         "--topic", "no-such-topic", "--output", str(tmp_path / "x.csv")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[3],
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "TOPIC_NOT_EXIST" in done.stderr and "no-such-topic" in done.stderr
    assert "checking topic 'no-such-topic'" in done.stdout
    assert "starting Spark" not in done.stdout and not (tmp_path / "x.csv").exists()


def test_each_partition_read_is_a_span_in_the_trace_collector(spark, loaded, tmp_path):
    """With `otlpEndpoint`, every partition's read is one CONSUMER span of service "spark"
    naming its queue range and the rows it read."""
    import requests

    from tests.support.cluster import ready_http_port
    from tests.support.processes import start_service, wait_until

    collector = start_service("tidemq.tracecollector", ["--http-port", "0"], tmp_path)
    try:
        ui = f"http://127.0.0.1:{ready_http_port(collector)}"
        assert read(spark, loaded["namesrv"], otlpEndpoint=collector.addr).count() == \
            sum(loaded["sizes"].values())

        def partition_spans():
            traces = requests.get(f"{ui}/api/traces", params={"service": "spark"},
                                  timeout=10).json()["traces"]
            spans = [span for t in traces for span in requests.get(
                f"{ui}/api/traces/{t['trace_id']}", timeout=10).json()["spans"]]
            return spans if len(spans) >= QUEUES else None

        spans = wait_until(partition_spans, 30, interval=0.3, message="a span per partition")
        by_queue = {int(s["attributes"]["messaging.destination.partition.id"]): s for s in spans}
        assert set(by_queue) == set(range(QUEUES)) and len(spans) == QUEUES
        for queue_id, span in by_queue.items():
            assert span["name"] == f"{TOPIC} read" and span["kind"] == "CONSUMER"
            attributes = span["attributes"]
            assert attributes["messaging.batch.message_count"] == loaded["sizes"][queue_id]
            assert (attributes["tidemq.start_offset"], attributes["tidemq.end_offset"]) == (
                0, loaded["sizes"][queue_id])
            assert "spark.partition_id" in attributes
    finally:
        collector.stop()
