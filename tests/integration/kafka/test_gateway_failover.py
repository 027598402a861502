"""No single gateway-kafka (#40): two instances registered in the config center under a lease,
both listed by Metadata, partition leaders and group coordinators spread over them; one
SIGKILLed under an idempotent `acks=all` producer and a consumer group (confluent-kafka), both
carry on through the other within the lease: every acknowledged record is stored exactly once
and consumed."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC, GROUP = "kfo-orders", "kfo-group"
TTL_S = 5                  # the instances' registration lease
BEFORE_KILL, AFTER_KILL = 300, 300   # acknowledged records before and after the kill


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("kfailover")) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 2)

        def start():
            return cluster.start("tidemq.gatewaykafka", [
                "--namesrv-addrs", cluster.namesrv_addrs,
                "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1",
                "--registration-ttl-s", str(TTL_S)])

        gateways = [start(), start()]
        yield cluster, gateways


def _brokers(bootstrap: str) -> dict[int, str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def test_metadata_lists_every_instance_and_spreads_leaders(two_gateways):
    _, gateways = two_gateways
    addrs = {g.addr for g in gateways}
    for gateway in gateways:
        wait_until(lambda g=gateway: set(_brokers(g.addr).values()) == addrs, 30,
                   message="both instances in each one's Metadata")
    metadata = AdminClient({"bootstrap.servers": gateways[0].addr}).list_topics(TOPIC, timeout=20)
    leaders = {p.leader for p in metadata.topics[TOPIC].partitions.values()}
    assert len(leaders) == 2   # two partitions, one on each instance
    other = AdminClient({"bootstrap.servers": gateways[1].addr}).list_topics(TOPIC, timeout=20)
    assert {i: p.leader for i, p in other.topics[TOPIC].partitions.items()} == \
        {i: p.leader for i, p in metadata.topics[TOPIC].partitions.items()}


def test_sigkilled_instance_loses_and_duplicates_nothing(two_gateways):
    cluster, gateways = two_gateways
    addrs = {g.addr for g in gateways}
    wait_until(lambda: set(_brokers(gateways[1].addr).values()) == addrs, 30,
               message="both instances registered")
    bootstrap = ",".join(g.addr for g in gateways)
    acked: list[bytes] = []
    ack_times: list[tuple[int, float]] = []   # (partition, when)
    failures: list[str] = []
    stop_producing = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append(msg.value())
            ack_times.append((msg.partition(), time.monotonic()))
        else:
            failures.append(str(err))

    def produce() -> None:
        producer = ConfluentProducer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms":
            1000, "reconnect.backoff.max.ms": 1000})
        sequence = 0
        while not stop_producing.is_set():
            producer.produce(TOPIC, f"r-{sequence:06d}".encode(), on_delivery=on_delivery)
            sequence += 1
            producer.poll(0.01)
        producer.flush(120)

    consumed: list[bytes] = []
    stop_consuming = threading.Event()
    consumer_errors: list[str] = []

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                             "auto.offset.reset": "earliest", "enable.auto.commit": True,
                             "auto.commit.interval.ms": 500,
                             "topic.metadata.refresh.interval.ms": 1000,
                             "reconnect.backoff.max.ms": 1000})
        consumer.subscribe([TOPIC])
        try:
            while not stop_consuming.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    consumer_errors.append(str(msg.error()))
                    continue
                consumed.append(msg.value())
        finally:
            consumer.close()

    producer_thread = threading.Thread(target=produce, name="kfo-producer")
    consumer_thread = threading.Thread(target=consume, name="kfo-consumer")
    producer_thread.start()
    consumer_thread.start()
    try:
        wait_until(lambda: len(acked) >= BEFORE_KILL and len(consumed) >= BEFORE_KILL // 2, 90,
                   interval=0.1, message="records acknowledged and consumed before the kill")
        victim = gateways[0]
        killed_at = time.monotonic()
        victim.kill()   # SIGKILL: no deregistration, its lease has to expire
        acked_at_kill = len(acked)
        survivor = gateways[1].addr
        wait_until(lambda: set(_brokers(survivor).values()) == {survivor}, TTL_S + 30,
                   interval=0.2, message="the survivor to drop the killed instance")
        dropped_after = time.monotonic() - killed_at
        wait_until(lambda: len(acked) >= acked_at_kill + AFTER_KILL, 120, interval=0.1,
                   message="records acknowledged through the surviving instance")
    finally:
        stop_producing.set()
        producer_thread.join(150)
    wanted = set(acked)
    try:
        wait_until(lambda: wanted <= set(consumed), 120, interval=0.2,
                   message="the group to consume every acknowledged record")
    finally:
        stop_consuming.set()
        consumer_thread.join(60)

    stored = _read_log(gateways[1].addr)
    copies = Counter(stored)
    lost = [v for v in wanted if copies[v] == 0]
    duplicated = [v for v in wanted if copies[v] > 1]
    outage = max(_longest_gap([t for p, t in ack_times if p == partition], killed_at)
                 for partition in {p for p, _ in ack_times})
    redelivered = len(consumed) - len(set(consumed))
    print(f"\ngateway-kafka SIGKILL: {len(wanted)} acknowledged, {len(lost)} lost, "
          f"{len(duplicated)} duplicated in the log, {redelivered} redelivered to the group "
          f"(after its last commit), longest produce outage of a partition {outage:.1f} s; "
          f"the survivor dropped the killed instance from Metadata after {dropped_after:.1f} s "
          f"(lease {TTL_S} s); {len(failures)} delivery failures")
    assert len(acked) == len(wanted)        # no record acknowledged twice
    assert not lost and not duplicated, (lost[:5], duplicated[:5])
    assert not failures, failures[:5]
    assert outage < TTL_S + 30


def _longest_gap(times: list[float], start: float) -> float:
    points = [start, *sorted(t for t in times if t >= start)]
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0.0)


def _read_log(bootstrap: str) -> list[bytes]:
    """Every record of the topic, read back from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kfo-audit",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(TOPIC, timeout=20).topics[TOPIC].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1]
                for p in partitions}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
        got: list[bytes] = []
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 90
        while len(done) < len(ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value())
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == len(ends), f"the log was not read to its end: {ends}"
        return got
    finally:
        consumer.close()
