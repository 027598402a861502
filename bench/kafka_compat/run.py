"""Produce (acks=all) and consume of 1 KiB records through gateway-kafka with confluent-kafka,
beside the same run's native TideMQ SDK and Redis Streams, with gateway-kafka's CPU per record.

    uv run --frozen python bench/kafka_compat/run.py --quick
    uv run --frozen python bench/kafka_compat/run.py --records 50000

Starts etcd, Redis, the config center, two name servers, one broker group and gateway-kafka
(temporary dirs, loopback), and a 4-queue topic per way. Produce: the native Producer's
send_async with `--window` sends in flight (batched on the wire by the SDK), then
confluent-kafka's Producer (acks=all, linger.ms 5, its default batching) into the other topic,
then Redis XADD pipelines of 256. Consume: the native PullConsumer reading every queue from 0
in pulls of 32, then a confluent-kafka Consumer assigned every partition from the beginning
(consume() of up to 1000), then Redis XREAD COUNT 1000 (the e2e_latency bench's Redis Streams
peer: the median of 3 reads of the stream). Then the client's own ceiling: the
same confluent-kafka produce and consume against librdkafka's in-process mock cluster (no
network, no broker work), which bounds what any Kafka server could show this client doing.
Gateway CPU per record is the gateway process's user + system CPU time over each Kafka phase
(/proc), divided by its records. `--headers`: every record carries three UTF-8 headers
(region, tenant, traceparent), which gateway-kafka stores in KAFKA_HEADERS and copies to user
properties; the native peer's messages carry the same three as properties. Printed, not asserted (issue #38's targets: produce >= 0.35x
native and >= 0.7x XADD pipelines of 256, consume >= 0.3x native pulls).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from tidemq.client import Message, MessageQueue, PullConsumer  # noqa: E402
from tidemq.client import Producer as NativeProducer  # noqa: E402

from bench.e2e_latency.run import redis_streams  # noqa: E402
from tests.support.cluster import running_cluster, wait_for_route  # noqa: E402

NATIVE_TOPIC, KAFKA_TOPIC = "BenchKafkaNative", "BenchKafka"
QUEUES = 4
RECORD = b"x" * 1024
HEADERS = [("region", b"eu"), ("tenant", b"acme"),
           ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]
REDIS_BATCH = 256
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# ---------------------------------------------------------------- native TideMQ SDK

def native_produce(namesrv: str, count: int, window: int, headers: list) -> float:
    slots = threading.Semaphore(window)
    properties = {name: value.decode() for name, value in headers}
    with NativeProducer(namesrv) as producer:
        producer.send(Message(NATIVE_TOPIC, RECORD))   # routes and connections warm
        futures = []
        started = time.perf_counter()
        for _ in range(count):
            slots.acquire()
            future = producer.send_async(Message(NATIVE_TOPIC, RECORD, properties=properties))
            future.add_done_callback(lambda _: slots.release())
            futures.append(future)
        for future in futures:
            future.result(timeout=60)
        return rate(count, started)


def native_consume(namesrv: str, count: int) -> float:
    consumer = PullConsumer(namesrv, consumer_group="bench-kafka-native")
    queues = [MessageQueue(NATIVE_TOPIC, "broker-a", q) for q in range(QUEUES)]
    offsets = dict.fromkeys(queues, 0)
    seen = 0
    started = time.perf_counter()
    while seen < count:
        for mq in queues:
            result = consumer.pull(mq, offsets[mq], 32)
            seen += len(result.messages)
            offsets[mq] = result.next_offset
    return rate(seen, started)


# ---------------------------------------------------------------- confluent-kafka

def kafka_produce(config: dict, topic: str, count: int, headers: list | None = None
                  ) -> float:
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    failures: list = []
    producer.produce(topic, RECORD)   # metadata and connections warm
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, headers=headers,
                                 on_delivery=lambda err, _: err and failures.append(err))
                break
            except BufferError:   # the local queue is full: let deliveries drain it
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) or failures:
        raise RuntimeError(f"confluent-kafka produce failed: {failures[:3]}")
    return rate(count, started)


def kafka_consume(config: dict, topic: str, partitions: int, count: int) -> float:
    """Records per second, timed from the first record on (connecting, metadata and the
    first fetch's round trip are not counted, as the native reader's are not either)."""
    consumer = Consumer({**config, "group.id": "bench-kafka", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = time.monotonic() + 300
    first: list = []
    while not first and time.monotonic() < deadline:
        first = [m for m in consumer.consume(1000, 1.0) if not m.error()]
    seen, started = 0, time.perf_counter()
    while len(first) + seen < count and time.monotonic() < deadline:
        wanted = min(1000, count - len(first) - seen)   # never wait for records not there
        seen += sum(1 for m in consumer.consume(wanted, 1.0) if not m.error())
    elapsed = rate(seen, started)
    consumer.close()
    if len(first) + seen < count:
        raise RuntimeError(f"confluent-kafka consumed {len(first) + seen} of {count} records")
    if not seen:   # a rate over no timed record would print 0/s as a figure
        raise RuntimeError(f"all {count} records came in the first fetch: nothing was timed; "
                           "give more records")
    return elapsed


def mock_cluster(count: int, headers: list | None = None) -> tuple[float, float]:
    """confluent-kafka against librdkafka's in-process mock cluster: the client's ceiling.
    The mock cluster lives inside `host` (its brokers listen on loopback) while it exists."""
    host = Producer({"test.mock.num.brokers": 1})
    brokers = host.list_topics(timeout=10).brokers.values()
    config = {"bootstrap.servers": ",".join(f"{b.host}:{b.port}" for b in brokers)}
    produced = kafka_produce(config, "mock-bench", count, headers)
    partitions = len(host.list_topics("mock-bench", timeout=10).topics["mock-bench"].partitions)
    # the mock broker keeps a bounded log per partition: read what it still holds
    probe = Consumer({**config, "group.id": "bench-kafka-probe"})
    held = sum(high - low for low, high in (
        probe.get_watermark_offsets(TopicPartition("mock-bench", p), timeout=10)
        for p in range(partitions)))
    probe.close()
    consumed = kafka_consume(config, "mock-bench", partitions, held)
    host.flush(1)
    return produced, consumed


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000, help="per way")
    parser.add_argument("--window", type=int, default=256, help="native sends in flight")
    parser.add_argument("--quick", action="store_true", help="4000 records per way")
    parser.add_argument("--headers", action="store_true",
                        help="three UTF-8 headers per record (native: three properties)")
    args = parser.parse_args()
    count = 4_000 if args.quick else args.records
    headers = HEADERS if args.headers else []
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp, \
            running_cluster(Path(tmp), broker_names=("broker-a",)) as cluster:
        from tidemq.configclient.client import ConfigClient
        from tidemq.configclient.topics import TopicDefinitions

        with ConfigClient(cluster.config_center.addr) as config_client:
            for topic in (NATIVE_TOPIC, KAFKA_TOPIC):
                TopicDefinitions(config_client).create(topic, QUEUES)
        for topic in (NATIVE_TOPIC, KAFKA_TOPIC):
            wait_for_route(cluster, topic, 1)
        gateway = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1"])
        kafka = {"bootstrap.servers": gateway.addr}

        native_out = native_produce(cluster.namesrv_addrs, count, args.window, headers)
        cpu = cpu_seconds(gateway.pid)
        kafka_out = kafka_produce(kafka, KAFKA_TOPIC, count, headers or None)
        produce_cpu = (cpu_seconds(gateway.pid) - cpu) / count
        redis_out, redis_in = redis_streams(cluster.redis.url, count, REDIS_BATCH)
        native_in = native_consume(cluster.namesrv_addrs, count)
        cpu = cpu_seconds(gateway.pid)
        kafka_in = kafka_consume(kafka, KAFKA_TOPIC, QUEUES, count + 1)   # + the warm-up
        consume_cpu = (cpu_seconds(gateway.pid) - cpu) / count
    mock_out, mock_in = mock_cluster(count, headers or None)

    print(f"{'':<30}{'confluent-kafka':>16}{'native TideMQ':>15}{'Redis Streams':>15}"
          f"{'ratio':>8}{'ratio':>8}{'gateway CPU':>13}{'mock cluster':>14}")
    print(f"{'':<30}{'via gateway-kafka':>16}{'(same run)':>15}{'(same run)':>15}"
          f"{'/native':>8}{'/Redis':>8}{'per record':>13}{'(ceiling)':>14}")
    for name, kafka_rate, native, redis_rate, cpu_per, mock in (
            ("produce 1 KiB, acks=all", kafka_out, native_out, redis_out, produce_cpu,
             mock_out),
            ("consume 1 KiB", kafka_in, native_in, redis_in, consume_cpu, mock_in)):
        print(f"{name:<30}{kafka_rate:>14,.0f}/s{native:>13,.0f}/s{redis_rate:>13,.0f}/s"
              f"{kafka_rate / native:>8.2f}{kafka_rate / redis_rate:>8.2f}"
              f"{cpu_per * 1e6:>10.0f} us{mock:>12,.0f}/s")
    print(f"({count} records of {len(RECORD)} B per way"
          f"{', each with 3 UTF-8 headers (native: properties)' if headers else ''}; one broker group, {QUEUES} queues; "
          f"native: send_async with {args.window} in flight / PullConsumer pulls of 32; Redis: "
          f"XADD pipelines of {REDIS_BATCH} / XREAD COUNT 1000, median of 3 reads; mock cluster: the same "
          "confluent-kafka calls against librdkafka's in-process mock broker)")
    print("targets (issue #38): produce >= 0.35x native and >= 0.7x XADD pipelines of 256; "
          "consume >= 0.3x native pulls")


if __name__ == "__main__":
    main()
