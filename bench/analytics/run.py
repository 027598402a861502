"""Analytics benchmark: Spark reading a TideMQ topic beside Spark reading the same rows from a
local Parquet file, and a streaming pipeline's end-to-end latency at a fixed input rate.

    uv run --frozen python bench/analytics/run.py [--quick] [--messages 200000]

One real cluster (etcd, Redis, config center, name server, one broker; tests.support.cluster) and
one local[2] SparkSession. A 4-queue topic is filled with messages of 200-byte bodies, then:

* batch read: `format("tidemq")` → sum of body lengths (every body is pulled, decoded to
  Arrow and handed to the JVM); the same rows written once to Parquet and read back the same
  way is the baseline: what Spark itself costs per row on this machine. Best of two runs,
  after a warm-up; rows/s and MB/s of bodies. Then the same read with `.schema("body binary")`,
  the one column the query uses, as the Parquet scan prunes by itself.
* streaming latency: the relay job (`tidemq.analytics.relay`, exactlyOnce) copies topic A
  to topic B while a producer sends A at a fixed rate, each message stamped with its send
  time; latency = B's store time − the send time (one machine, one clock): median, p99.

Wall-clock figures: on a shared 2-core machine they move with the load; printed, not asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tidemq` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidemq.common import record  # noqa: E402
from tidemq.common.rpc import RpcClient  # noqa: E402
from tidemq.v1 import broker_pb2, broker_pb2_grpc  # noqa: E402

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route  # noqa: E402,I001

TOPIC, SOURCE, SINK, QUEUES, BODY = "bench-read", "bench-a", "bench-b", 4, 200


def fill(broker: RpcClient, topic: str, count: int, batch: int = 256) -> None:
    body = b"x" * BODY
    for start in range(0, count, batch):
        n = min(batch, count - start)
        raws = b"".join(record.encode_message(record.OutgoingMessage(topic, body, tags="T"))[0]
                        for _ in range(n))
        broker.call("Send", broker_pb2.SendRequest(topic=topic, queue_id=(start // batch) % QUEUES,
                                                   records=raws, record_count=n))


def best_of(runs: int, action) -> float:
    best = float("inf")
    for _ in range(runs):
        began = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - began)
    return best


def read_throughput(spark, namesrv: str, count: int, parquet: Path) -> None:
    from pyspark.sql import functions as F

    frame = spark.read.format("tidemq").option("namesrv", namesrv).option("topic", TOPIC).load()
    total = frame.agg(F.sum(F.length("body"))).collect()[0][0]   # warm-up
    assert total == count * BODY, (total, count * BODY)
    tidemq_s = best_of(2, lambda: frame.agg(F.sum(F.length("body"))).collect())
    # the job asks for the one column it reads (.schema: the Python source's column pruning)
    bodies = (spark.read.format("tidemq").schema("body binary").option("namesrv", namesrv)
              .option("topic", TOPIC).load())
    assert bodies.agg(F.sum(F.length("body"))).collect()[0][0] == count * BODY
    bodies_s = best_of(2, lambda: bodies.agg(F.sum(F.length("body"))).collect())
    frame.write.mode("overwrite").parquet(str(parquet))
    local = spark.read.parquet(str(parquet))
    local.agg(F.sum(F.length("body"))).collect()
    parquet_s = best_of(2, lambda: local.agg(F.sum(F.length("body"))).collect())
    megabytes = count * BODY / 1e6
    print(f"batch read of {count} messages ({BODY} B bodies, {QUEUES} queues, local[2]):")
    print(f"  tidemq : {tidemq_s:6.2f} s  {count / tidemq_s:10,.0f} rows/s  "
          f"{megabytes / tidemq_s:7.1f} MB/s")
    print(f"  parquet: {parquet_s:6.2f} s  {count / parquet_s:10,.0f} rows/s  "
          f"{megabytes / parquet_s:7.1f} MB/s   (same rows, local file: the baseline)")
    print(f"  tidemq reads at {parquet_s / tidemq_s:.0%} of the Parquet scan's rows/s "
          "(same run, same session)")
    print(f"  tidemq, .schema(\"body binary\") (only the column the query reads, as the "
          f"Parquet scan prunes): {bodies_s:6.2f} s  {count / bodies_s:10,.0f} rows/s, "
          f"{parquet_s / bodies_s:.0%} of the Parquet scan's rows/s")


def produce_at_rate(broker: RpcClient, rate: int, seconds: float, stop: threading.Event) -> int:
    sent, began = 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - began < seconds:
        due = int((time.monotonic() - began) * rate) + 1
        while sent < due:
            raw = record.encode_message(record.OutgoingMessage(
                SOURCE, b"y" * BODY, properties={"sent_ms": str(int(time.time() * 1000))}))[0]
            broker.call("Send", broker_pb2.SendRequest(topic=SOURCE, queue_id=sent % QUEUES,
                                                       records=raw, record_count=1))
            sent += 1
        time.sleep(0.005)
    return sent


def sink_records(broker: RpcClient) -> list:
    found = []
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            reply = broker.call("Pull", broker_pb2.PullRequest(
                consumer_group="bench", topic=SINK, queue_id=queue_id, queue_offset=offset,
                max_messages=1000))
            if reply.status != broker_pb2.FOUND:
                break
            found.extend(record.iter_records(reply.records))
            offset = reply.next_begin_offset
    return found


def streaming_latency(spark, namesrv: str, broker: RpcClient, rate: int, seconds: float,
                      checkpoint: Path) -> None:
    from tidemq.analytics import relay

    args = relay.parse_args(["--namesrv", namesrv, "--source", SOURCE, "--sink", SINK,
                             "--checkpoint", str(checkpoint), "--exactly-once",
                             "--starting-offsets", "latest"])
    query = relay.start(spark, args)
    try:
        while not query.recentProgress:   # the first (empty) batch fixes the start offsets
            time.sleep(0.05)
        stop = threading.Event()
        sent = produce_at_rate(broker, rate, seconds, stop)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(sink_records(broker)) < sent:
            time.sleep(0.2)
    finally:
        query.stop()
    latencies = sorted(r.store_timestamp - int(r.properties["sent_ms"])
                       for r in sink_records(broker))
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"streaming relay {SOURCE} -> {SINK} at {rate} msg/s for {seconds:.0f} s "
          f"(default trigger, exactlyOnce): {len(latencies)}/{sent} delivered, "
          f"latency median {statistics.median(latencies):.0f} ms, p99 {p99} ms "
          "(bounded by Spark's per-micro-batch planning and Python-worker hand-off)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run (under a minute "
                        "on an idle machine)")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=200, help="streaming input, msg/s")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    if args.quick:
        args.messages, args.seconds = min(args.messages, 20_000), min(args.seconds, 6.0)
    from tidemq.analytics.session import build_session

    with tempfile.TemporaryDirectory(prefix="bench-analytics-") as tmp, \
            running_cluster(Path(tmp), broker_names=("broker-a",)) as cluster:
        for topic in (TOPIC, SOURCE, SINK):
            create_topic_in_config_center(cluster, topic, QUEUES)
            wait_for_route(cluster, topic, 1)
        broker = RpcClient(cluster.brokers["broker-a"].addr, broker_pb2_grpc.BrokerServiceStub,
                           timeout=10)
        fill(broker, TOPIC, args.messages)
        spark = build_session("bench-analytics", "local[2]", {
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            namesrv = cluster.namesrvs[0].addr
            read_throughput(spark, namesrv, args.messages, Path(tmp) / "rows.parquet")
            streaming_latency(spark, namesrv, broker, args.rate, args.seconds,
                              Path(tmp) / "checkpoint")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
