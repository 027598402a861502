"""Run by an older Kafka client's interpreter (the venv of requirements.txt), not by pytest:

    python roundtrip.py {confluent|kafka-python|aiokafka} BOOTSTRAP TOPIC

Produces RECORDS to partition 0 of TOPIC, reads partition 0 from the offset the first one got
until as many came back, and prints one JSON line: the client's version, the offsets and the
records read (bytes as hex, None as null)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

RECORDS = [  # (key, value, headers): null and empty keys and values, binary, duplicate headers
    (None, b"no key", []),
    (b"", b"", [("h", b"1"), ("h", b"2")]),
    (b"k", None, [("empty", b"")]),
    (bytes(range(256)), bytes(i % 251 for i in range(4096)), [("bin", bytes(range(16)))]),
]
DEADLINE_S = 40


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def _row(key, value, headers) -> list:
    return [_hex(key), _hex(value), [[name, _hex(v)] for name, v in headers or []]]


def confluent(bootstrap: str, topic: str) -> dict:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    offsets, failures = [], []

    def delivered(error, message):
        (failures if error else offsets).append(error or message.offset())

    for key, value, headers in RECORDS:
        producer.produce(topic, key=key, value=value, headers=headers, partition=0,
                         on_delivery=delivered)
    assert producer.flush(DEADLINE_S) == 0 and not failures, failures
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "old-confluent",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, min(offsets))])
    got, deadline = [], time.monotonic() + DEADLINE_S
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(_row(message.key(), message.value(), message.headers()))
    consumer.close()
    return {"version": confluent_kafka.version()[0], "offsets": sorted(offsets), "got": got}


def kafka_python(bootstrap: str, topic: str) -> dict:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=0)
               for k, v, h in RECORDS]
    offsets = [f.get(DEADLINE_S).offset for f in futures]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, offsets[0])
    got, deadline = [], time.monotonic() + DEADLINE_S
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(_row(r.key, r.value, r.headers) for r in batch)
    consumer.close()
    return {"version": kafka.__version__, "offsets": offsets, "got": got}


async def _aiokafka(bootstrap: str, topic: str) -> dict:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        offsets = [(await producer.send_and_wait(topic, value=v, key=k, partition=0,
                                                 headers=h)).offset for k, v, h in RECORDS]
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    await consumer.start()
    got = []
    try:
        consumer.seek(partition, offsets[0])
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(_row(r.key, r.value, r.headers) for r in batch)
    finally:
        await consumer.stop()
    return {"version": aiokafka.__version__, "offsets": offsets, "got": got}


def main(client: str, bootstrap: str, topic: str) -> None:
    runs = {"confluent": confluent, "kafka-python": kafka_python,
            "aiokafka": lambda b, t: asyncio.run(_aiokafka(b, t))}
    print(json.dumps(runs[client](bootstrap, topic)))


if __name__ == "__main__":
    main(*sys.argv[1:])
