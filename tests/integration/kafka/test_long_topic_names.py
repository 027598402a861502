"""Topic names up to Kafka's 249 characters (tidemq.common.topic_names): one is created through
CreateTopics, produced and consumed through Kafka and natively, and is all there after a
restart of the broker holding it; 250 is refused with a sentence naming the limit."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tidemq.client import Message, PullConsumer
from tidemq.client import Producer as NativeProducer
from tidemq.client.admin import Admin
from tidemq.common import errors
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN

from tests.support.cluster import wait_for_route

pytestmark = pytest.mark.slow

LONGEST = "k-longest." + "L" * (MAX_TOPIC_NAME_LEN - len("k-longest."))


def _create(bootstrap: str, name: str) -> None:
    """CreateTopics through librdkafka's admin client, which checks no name length itself."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)],
                        operation_timeout=30)[name].result(60)


def _kafka_read(bootstrap: str, count: int, timeout_s: float = 30.0) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "k-longest-reader",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(LONGEST, 0, 0)])
    found: list[tuple] = []
    deadline = time.monotonic() + timeout_s
    while len(found) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            found.append((message.offset(), message.key(), message.value()))
    consumer.close()
    return found


def _kafka_produce(bootstrap: str, values: list[bytes]) -> list[int]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "topic.metadata.refresh.interval.ms": 1000,
                         "message.timeout.ms": 60000})
    offsets, failures = [], []
    for value in values:
        producer.produce(LONGEST, key=b"k", value=value, partition=0, on_delivery=lambda e, m:
                         failures.append(e) if e else offsets.append(m.offset()))
    assert producer.flush(60) == 0 and not failures, failures
    return offsets


def _native_read(cluster) -> list[bytes]:
    with PullConsumer(cluster.namesrv_addrs, consumer_group="k-longest-native") as native:
        [mq] = native.fetch_queues(LONGEST)
        return [m.body for m in native.pull(mq, 0, max_messages=32).messages]


def test_a_249_character_topic_round_trips_kafka_and_native_and_survives_a_broker_restart(
        kafka_cluster, bootstrap):
    assert len(LONGEST) == MAX_TOPIC_NAME_LEN == 249
    _create(bootstrap, LONGEST)
    assert _kafka_produce(bootstrap, [b"kafka-0", b"kafka-1"]) == [0, 1]
    with NativeProducer(kafka_cluster.namesrv_addrs) as native:
        holder = native.send(Message(LONGEST, b"native-2", keys=["k"])).broker_name
    expected = [(0, b"k", b"kafka-0"), (1, b"k", b"kafka-1"), (2, b"k", b"native-2")]
    assert _kafka_read(bootstrap, 3) == expected
    assert _native_read(kafka_cluster) == [b"kafka-0", b"kafka-1", b"native-2"]

    kafka_cluster.brokers[holder].restart()   # same port: the package's other tests need it
    wait_for_route(kafka_cluster, LONGEST, 1)
    assert _kafka_produce(bootstrap, [b"kafka-3"]) == [3]
    assert _kafka_read(bootstrap, 4) == [*expected, (3, b"k", b"kafka-3")]
    assert _native_read(kafka_cluster) == [b"kafka-0", b"kafka-1", b"native-2", b"kafka-3"]


def test_250_characters_are_refused_naming_the_limit_by_kafka_and_natively(kafka_cluster,
                                                                          bootstrap):
    too_long = "k" * (MAX_TOPIC_NAME_LEN + 1)
    with pytest.raises(Exception) as refused:   # KafkaException carrying a KafkaError
        _create(bootstrap, too_long)
    error = refused.value.args[0]
    assert error.code() == KafkaError.TOPIC_EXCEPTION, error      # INVALID_TOPIC_EXCEPTION
    assert "1..249 characters, got 250" in error.str(), error.str()
    with (Admin(kafka_cluster.namesrv_addrs,
                config_center=kafka_cluster.config_center.addr) as admin,
          pytest.raises(errors.InvalidArgument) as natively):
        admin.create_topic(too_long, queues=1)
    assert natively.value.code == "INVALID_TOPIC"
    assert "1..249 characters, got 250" in natively.value.message
