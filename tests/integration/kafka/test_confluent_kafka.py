"""confluent-kafka 2.16.1 (librdkafka), unmodified, against gateway-kafka: idempotent produce
(its default here: enable.idempotence), null headers, every codec, and a group consumer that
commits."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.slow


def test_round_trip_and_group_commit(bootstrap):
    topic, group = "k-confluent", "k-confluent-group"
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "compression.type": "gzip", "linger.ms": 5})
    sent = [(b"k%d" % i if i % 3 else None, b"v%d" % i if i % 4 else b"",
             [("h", b"x"), ("h", None)]) for i in range(12)]
    failures = []
    for key, value, headers in sent:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(20) == 0 and not failures

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 40
    while len(got) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        got.append(message)
        consumer.commit(message=message, asynchronous=False)
    assert [(m.key(), m.value(), m.headers()) for m in got] == \
        [(k, v, h) for k, v, h in sent]
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == len(sent)
    consumer.close()


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_each_codec_round_trips(bootstrap, codec):
    topic = "k-confluent"
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "compression.type": codec, "linger.ms": 20})
    sent = [(b"key-%d" % i, bytes([i % 256]) * (100 + i * 37)) for i in range(40)]
    offsets, failures = [], []

    def delivered(err, msg):
        if err:
            failures.append(err)
        else:
            offsets.append(msg.offset())
    for key, value in sent:
        producer.produce(topic, key=key, value=value, partition=1, on_delivery=delivered)
    assert producer.flush(20) == 0 and not failures
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"k-codec-{codec}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 1, min(offsets))])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append((message.key(), message.value()))
    consumer.close()
    assert got == sent


def test_a_key_longer_than_a_messages_properties_round_trips(bootstrap):
    """librdkafka's 0003: a 99 000-byte key (Kafka takes keys up to message.max.bytes); the
    gateway carries it at the head of the body, and every client reads it back whole."""
    topic = "k-long-key"
    key = bytes(range(256)) * 387
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 200_000})
    failures = []
    for value in (None, b"after a long key"):
        producer.produce(topic, key=key, value=value, partition=0,
                         headers=[("h", b"1")],
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(20) == 0 and not failures

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, max_partition_fetch_bytes=1 << 20)
    consumer.assign([KpPartition(topic, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    consumer.close()
    assert [(r.key, r.value, r.headers) for r in got] == \
        [(key, None, [("h", b"1")]), (key, b"after a long key", [("h", b"1")])]
