"""Partition maps on a two-group cluster: CreateTopics with 1 and 3 partitions (queues only
where the map puts them), CreatePartitions extending the map at its end, old topics mapped on
first sight, and the native SDK producing and consuming over the uneven queues."""

from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from tidemq.client import Message, NameServerClient, Producer, PullConsumer
from tidemq.configclient.client import ConfigClient

pytestmark = pytest.mark.slow


def _definition(cluster, topic: str) -> dict:
    with ConfigClient(cluster.config_center.addr) as config:
        return json.loads(config.get(f"/tidemq/topics/{topic}").value)


def _routed(cluster, topic: str) -> dict[str, int]:
    route = NameServerClient(cluster.namesrv_addrs).route(topic)
    return {q.broker_name: q.read_queue_nums for q in route.queues}


def _partitions(bootstrap: str, topic: str, count: int) -> set[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    deadline = time.monotonic() + 30
    try:
        while (found := consumer.partitions_for_topic(topic) or set()) != set(range(count)):
            assert time.monotonic() < deadline, f"{topic} shows partitions {found}"
            consumer._client.cluster.request_update()
            consumer.poll(timeout_ms=200)
            time.sleep(0.3)
        return found
    finally:
        consumer.close()


def _round_trip(bootstrap: str, topic: str, partitions: int, tag: bytes) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    sent = {p: producer.send(topic, value=tag + b"-%d" % p, partition=p).get(timeout=15)
            for p in range(partitions)}
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        for p, meta in sent.items():
            tp = TopicPartition(topic, p)
            consumer.assign([tp])
            consumer.seek(tp, meta.offset)
            records = []
            deadline = time.monotonic() + 15
            while not records and time.monotonic() < deadline:
                records = consumer.poll(timeout_ms=500).get(tp, [])
            assert records and records[0].value == tag + b"-%d" % p, f"partition {p}"
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=40000)
    yield client
    client.close()


def test_one_and_three_partitions_on_two_groups(kafka_cluster, bootstrap, admin):
    admin.create_topics([NewTopic("k-one", num_partitions=1, replication_factor=1),
                         NewTopic("k-three", num_partitions=3, replication_factor=1)])
    assert _partitions(bootstrap, "k-one", 1) == {0}
    assert _partitions(bootstrap, "k-three", 3) == {0, 1, 2}
    # the map spreads partitions over the groups; only the mapped queues exist
    assert _definition(kafka_cluster, "k-one")["partitions"] == [["broker-a", 0]]
    assert _definition(kafka_cluster, "k-three")["partitions"] == \
        [["broker-a", 0], ["broker-b", 0], ["broker-a", 1]]
    assert _routed(kafka_cluster, "k-one") == {"broker-a": 1}
    assert _routed(kafka_cluster, "k-three") == {"broker-a": 2, "broker-b": 1}
    _round_trip(bootstrap, "k-one", 1, b"one")
    _round_trip(bootstrap, "k-three", 3, b"three")


def test_create_partitions_extends_the_map_at_its_end(kafka_cluster, bootstrap, admin):
    admin.create_topics([NewTopic("k-grow", num_partitions=3, replication_factor=1)])
    _partitions(bootstrap, "k-grow", 3)
    _round_trip(bootstrap, "k-grow", 3, b"before")
    admin.create_partitions({"k-grow": NewPartitions(total_count=6)})
    assert _partitions(bootstrap, "k-grow", 6) == set(range(6))
    assert _definition(kafka_cluster, "k-grow")["partitions"] == [
        ["broker-a", 0], ["broker-b", 0], ["broker-a", 1],      # kept where they were
        ["broker-b", 1], ["broker-a", 2], ["broker-b", 2]]
    assert _routed(kafka_cluster, "k-grow") == {"broker-a": 3, "broker-b": 3}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    ends = consumer.end_offsets([TopicPartition("k-grow", p) for p in range(6)])
    consumer.close()
    assert {tp.partition: n for tp, n in ends.items()} == {0: 1, 1: 1, 2: 1, 3: 0, 4: 0, 5: 0}
    _round_trip(bootstrap, "k-grow", 6, b"after")
    # fewer or as many partitions as it has: INVALID_PARTITIONS, with the reason
    from kafka.errors import InvalidPartitionsError
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"k-grow": NewPartitions(total_count=6)})


def test_an_old_topic_is_mapped_in_route_order_on_first_sight(kafka_cluster, bootstrap):
    """k-offsets was defined the old way (1 queue on each group): its map is written the
    first time the gateway sees it, in (group, queue) order, as partitions were numbered."""
    _partitions(bootstrap, "k-offsets", 2)
    doc = _definition(kafka_cluster, "k-offsets")
    assert doc["partitions"] == [["broker-a", 0], ["broker-b", 0]]
    assert "group_queues" not in doc and doc["queues"] == 1


def test_native_sdk_over_uneven_queues(kafka_cluster, bootstrap, admin):
    admin.create_topics([NewTopic("k-uneven", num_partitions=3, replication_factor=1)])
    _partitions(bootstrap, "k-uneven", 3)
    with Producer(kafka_cluster.namesrv_addrs, producer_group="k-uneven-native") as producer:
        results = [producer.send(Message("k-uneven", b"n%d" % i)) for i in range(12)]
        results += producer.send_many([Message("k-uneven", b"m%d" % i) for i in range(6)])
    used = {(r.broker_name, r.queue_id) for r in results}
    assert used == {("broker-a", 0), ("broker-a", 1), ("broker-b", 0)}
    with PullConsumer(kafka_cluster.namesrv_addrs, consumer_group="k-uneven-pull") as native:
        queues = native.fetch_queues("k-uneven")
        assert {(q.broker_name, q.queue_id) for q in queues} == used
        bodies = {m.body for q in queues for m in native.pull(q, 0, max_messages=32).messages}
    assert bodies == {b"n%d" % i for i in range(12)} | {b"m%d" % i for i in range(6)}
    # and Kafka reads the same records on the partitions the map names
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    ends = consumer.end_offsets([TopicPartition("k-uneven", p) for p in range(3)])
    consumer.close()
    assert sum(ends.values()) == 18
