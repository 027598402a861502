"""write/writeStream.format("tidemq") against the real cluster: idempotent sends over gRPC, a
batch write read back byte for byte, and a streaming relay whose driver is SIGKILLed in the
middle of a micro-batch and restarted from its checkpoint: with exactlyOnce=true the sink
topic then holds each source message exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tidemq.analytics.sink import row_unique_id
from tidemq.common import record as rec
from tidemq.v1 import broker_pb2

from tests.integration.analytics.cluster import tagged
from tests.support.processes import freeze, wait_until

REPO = Path(__file__).resolve().parents[3]


def idempotent_batch(topic: str, ids: list[str], producer: str) -> bytes:
    return b"".join(rec.encode_message(rec.OutgoingMessage(
        topic, f"body-{u}".encode(), unique_id=u, properties={"PRODUCER_ID": producer}))[0]
        for u in ids)


def test_broker_drops_a_replayed_idempotent_batch(cluster):
    """No Spark: the Send RPC with idempotent=true, twice."""
    cluster.create_topic("sink-idem", 1)
    client = cluster.broker_client()
    request = broker_pb2.SendRequest(topic="sink-idem", queue_id=0, record_count=3,
                                     records=idempotent_batch("sink-idem", ["a", "b", "c"], "p1"),
                                     idempotent=True, producer_id="p1")
    first = client.call("Send", request)
    again = client.call("Send", request)
    assert (first.duplicates, again.duplicates) == (0, 3)
    assert list(again.queue_offsets) == [first.first_queue_offset + i for i in range(3)]
    assert list(again.physical_offsets) == list(first.physical_offsets)
    wait_until(lambda: cluster.queue_ends("sink-idem")[0] == 3, 10, message="dispatched")
    assert again.first_queue_offset == first.first_queue_offset


def read_topic(spark, cluster, topic):
    return (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
            .option("topic", topic).load())


@pytest.mark.spark
@pytest.mark.slow
def test_batch_write_then_read_round_trips_rows(spark, cluster):
    from pyspark.sql.types import (
        BinaryType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    cluster.create_topic("sink-batch", 3)
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("tag", StringType()),
                         StructField("properties", MapType(StringType(), StringType()))])
    rows = [(f"k{i} all" if i % 4 else None, bytes((i * 7 + j) % 256 for j in range(i % 50)),
             f"T{i % 3}" if i % 5 else None, {"seq": str(i), "ünï": "ç\u2603"} if i % 2 else None)
            for i in range(120)]
    frame = spark.createDataFrame(rows, schema).repartition(2)
    frame.write.format("tidemq").option("namesrv", cluster.namesrv.addr) \
        .option("topic", "sink-batch").option("batchSize", "16").mode("append").save()

    got = read_topic(spark, cluster, "sink-batch").collect()
    assert len(got) == len(rows)
    assert len({row["unique_id"] for row in got}) == len(rows)
    expected = Counter((bytes(v), t or "", tuple(k.split()) if k else (),
                        tuple(sorted((p or {}).items()))) for k, v, t, p in rows)
    user = {"seq", "ünï"}
    actual = Counter((bytes(r["body"]), r["tag"], tuple(r["keys"]),
                      tuple(sorted((n, v) for n, v in r["properties"].items() if n in user)))
                     for r in got)
    assert actual == expected
    # batching per partition: one task's rows go to one queue, in few sends
    assert len({row["queue_id"] for row in got}) == 2


@pytest.mark.spark
def test_write_refuses_frames_it_cannot_write(spark, cluster):
    frame = spark.createDataFrame([(1,)], "n int")
    with pytest.raises(Exception, match="column named value"):
        frame.write.format("tidemq").option("namesrv", cluster.namesrv.addr) \
            .option("topic", "sink-batch").mode("append").save()
    frame = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="only appends"):
        frame.write.format("tidemq").option("namesrv", cluster.namesrv.addr) \
            .option("topic", "sink-batch").mode("overwrite").save()


# -- exactly once across a driver crash -----------------------------------------------------

SOURCE, SINK, MESSAGES, PER_TRIGGER = "relay-src", "relay-dst", 1200, 300


def relay_args(cluster, checkpoint: Path) -> list[str]:
    """One record per send: a micro-batch is 300 sends, a window wide enough to be caught
    half written (with 5 per send, 60 sends, a loaded machine once missed all four batches)."""
    return ["--namesrv", cluster.namesrv.addr, "--source", SOURCE, "--sink", SINK,
            "--checkpoint", str(checkpoint), "--exactly-once", "--batch-size", "1",
            "--max-offsets-per-trigger", str(PER_TRIGGER)]


def start_relay(cluster, checkpoint: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "tidemq.analytics.relay", "--master", "local[2]",
               *relay_args(cluster, checkpoint)]
    with open(log, "ab") as out:
        # its own process group: the driver, its JVM and the Python workers go together
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=out,
                                start_new_session=True)


def sink_count(cluster) -> int:
    return sum(cluster.queue_ends(SINK).values())


def committed_batches(checkpoint: Path) -> set[int]:
    commits = checkpoint / "commits"
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()} if commits.exists() \
        else set()


@pytest.mark.spark
@pytest.mark.slow
def test_relay_killed_mid_batch_restarts_and_stores_each_message_once(spark, cluster, tmp_path):
    cluster.create_topic(SOURCE, 2)
    cluster.create_topic(SINK, 2)
    cluster.send(SOURCE, {q: [tagged(SOURCE, f"R{n % 3}", n) for n in range(q, MESSAGES, 2)]
                          for q in range(2)})
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "relay.log"
    driver = start_relay(cluster, checkpoint, log)
    try:
        # a micro-batch writes PER_TRIGGER messages: a count that is not a multiple of it
        # means a batch is half written. Freeze everything there, check, then SIGKILL. A batch
        # can finish while the freeze takes hold: then it goes on to the next batch and tries
        # again.
        def mid_batch() -> bool:
            assert driver.poll() is None, log.read_text()[-3000:]
            return sink_count(cluster) % PER_TRIGGER != 0
        deadline = time.monotonic() + 240
        while True:
            wait_until(mid_batch, max(1.0, deadline - time.monotonic()), interval=0.005,
                       message="the relay in the middle of a batch")
            freeze(driver.pid, group=True)
            partial = sink_count(cluster)
            if partial % PER_TRIGGER != 0 or time.monotonic() > deadline:
                break
            os.killpg(driver.pid, signal.SIGCONT)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert partial % PER_TRIGGER != 0 and partial < MESSAGES
    committed_rows = len(committed_batches(checkpoint)) * PER_TRIGGER
    assert committed_rows < partial, "the killed batch was not committed"

    # the restart: the same job from the same checkpoint, in this test's Spark session (one
    # JVM start less); it replays the killed batch, then runs the rest
    from tidemq.analytics import relay

    query = relay.start(spark, relay.parse_args(relay_args(cluster, checkpoint)))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink_count(cluster) == MESSAGES

    records = []
    for queue_id, end in cluster.queue_ends(SINK).items():
        offset = 0
        while offset < end:
            reply = cluster.broker_client().call("Pull", broker_pb2.PullRequest(
                consumer_group="test", topic=SINK, queue_id=queue_id, queue_offset=offset,
                max_messages=500))
            records.extend(rec.iter_records(reply.records))
            offset = reply.next_begin_offset
    unique_ids = Counter(r.unique_id for r in records)
    assert len(unique_ids) == MESSAGES and set(unique_ids.values()) == {1}
    # exactly the ids of (query id, batch, partition, row): 4 batches, each one partition (its
    # 2 queue ranges of 150 packed together) of 300 rows
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    assert set(unique_ids) == {row_unique_id(query_id, batch, 0, row)
                               for batch in range(MESSAGES // PER_TRIGGER)
                               for row in range(PER_TRIGGER)}
    seqs = Counter(int(r.properties["seq"]) for r in records)
    assert seqs == Counter(range(MESSAGES))
    for r in records:
        n = int(r.properties["seq"])
        assert bytes(r.body) == f"R{n % 3}-{n}".encode() and r.tags == f"R{n % 3}"
        assert r.keys == [f"k{n}", "all"]
