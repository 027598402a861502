"""aiokafka 0.14.0, unmodified, against gateway-kafka: a byte-exact round trip and a group of
two members that share the partitions and commit."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

pytestmark = pytest.mark.slow

RECORDS = [(None, b"no key", []), (b"", b"empty key", [("h", b"")]),
           (b"k", None, [("dup", b"1"), ("dup", b"2")]), (bytes(range(256)), b"", [])]


def test_aiokafka_round_trip(bootstrap):
    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                    compression_type="gzip")
        await producer.start()
        try:
            sent = [await producer.send_and_wait("k-aiokafka", key=k, value=v, headers=h,
                                                 partition=1) for k, v, h in RECORDS]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition("k-aiokafka", 1)
            consumer.assign([tp])
            consumer.seek(tp, sent[0].offset)
            got = []
            async with asyncio.timeout(20):
                while len(got) < len(RECORDS):
                    got.extend((await consumer.getmany(tp, timeout_ms=500)).get(tp, []))
        finally:
            await consumer.stop()
        return sent, got

    sent, got = asyncio.run(scenario())
    assert [m.offset for m in sent] == list(range(sent[0].offset, sent[0].offset + 4))
    assert [(r.key, r.value, list(r.headers)) for r in got] == \
        [(k, v, [(n, x) for n, x in h]) for k, v, h in RECORDS]


def test_aiokafka_group_shares_partitions_and_commits(bootstrap):
    topic, group, count = "k-aio-group", "k-aio-members", 40

    async def member(seen: list, assigned: dict, name: str, stop: asyncio.Event):
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=10000, heartbeat_interval_ms=1000)
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=300)
                for records in batches.values():
                    seen.extend((r.partition, r.offset) for r in records)
                if batches:
                    await consumer.commit()
                assigned[name] = {tp.partition for tp in consumer.assignment()}
        finally:
            await consumer.stop()

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        for i in range(count):
            await producer.send(topic, value=b"v%d" % i, partition=i % 4)
        await producer.flush()
        await producer.stop()
        seen: list = []
        assigned: dict = {}
        stop = asyncio.Event()
        tasks = [asyncio.create_task(member(seen, assigned, n, stop)) for n in "ab"]
        async with asyncio.timeout(60):
            while not (len(set(seen)) >= count and len(assigned) == 2
                       and all(assigned.values())):
                await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks)
        checker = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        await checker.start()
        committed = {p: await checker.committed(TopicPartition(topic, p)) for p in range(4)}
        await checker.stop()
        return seen, assigned, committed

    seen, assigned, committed = asyncio.run(scenario())
    assert not assigned["a"] & assigned["b"] and assigned["a"] | assigned["b"] == {0, 1, 2, 3}
    assert set(seen) == {(p, o) for p in range(4) for o in range(count // 4)}
    assert committed == dict.fromkeys(range(4), count // 4)
