"""One consumer group of three client libraries over 8 partitions (4 queues on each of two
broker groups): kafka-python stays throughout, confluent-kafka runs in its own process and is
killed with SIGKILL (no LeaveGroup: the group notices by its session timeout), aiokafka joins
and leaves cleanly. Records are produced in a phase around each change; every record is
consumed, no member is handed a record below an offset the group had already committed, and
the group's final commits are the partitions' ends."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

pytestmark = pytest.mark.slow

TOPIC, GROUP, PARTITIONS, PER_PHASE = "k-mixed", "k-mixed-group", 8, 5
SESSION_MS = 6000

CONFLUENT_MEMBER = """
import json, sys
from confluent_kafka import Consumer, TopicPartition
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "partition.assignment.strategy": "roundrobin",
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500})
consumer.subscribe([sys.argv[3]])
while True:
    message = consumer.poll(0.2)
    if message is None or message.error():
        continue
    print(json.dumps(["consumed", message.partition(), message.offset()]), flush=True)
    try:
        consumer.commit(offsets=[TopicPartition(sys.argv[3], message.partition(),
                                                message.offset() + 1)], asynchronous=False)
        print(json.dumps(["committed", message.partition(), message.offset() + 1]), flush=True)
    except Exception as exc:
        print(json.dumps(["commit-failed", message.partition(), str(exc)]), flush=True)
""".replace("SESSION_MS", str(SESSION_MS))


class Ledger:
    """What every member consumed and committed, checked as it happens."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.consumed: list[tuple[str, int, int]] = []
        self.committed = dict.fromkeys(range(PARTITIONS), 0)
        self.violations: list[str] = []
        self.assigned: dict[str, set[int]] = {}

    def consume(self, who: str, partition: int, offset: int) -> None:
        with self.lock:
            if offset < self.committed[partition]:
                self.violations.append(f"{who} got {partition}@{offset} below the group's "
                                       f"commit {self.committed[partition]}")
            self.consumed.append((who, partition, offset))

    def commit(self, partition: int, offset: int) -> None:
        with self.lock:
            self.committed[partition] = max(self.committed[partition], offset)

    def distinct(self) -> set[tuple[int, int]]:
        with self.lock:
            return {(p, o) for _, p, o in self.consumed}

    def by(self, who: str) -> int:
        with self.lock:
            return sum(1 for w, _, _ in self.consumed if w == who)


def _kafka_python_member(bootstrap: str, ledger: Ledger, stop: threading.Event) -> None:
    from kafka.errors import CommitFailedError
    from kafka.structs import OffsetAndMetadata
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             partition_assignment_strategy=[RoundRobinPartitionAssignor],
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    try:
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=200).items():
                for record in records:
                    ledger.consume("kafka-python", tp.partition, record.offset)
                    try:
                        consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
                        ledger.commit(tp.partition, record.offset + 1)
                    except CommitFailedError:
                        break   # the partition moved: its new owner starts at the commit
    finally:
        consumer.close()


def _aiokafka_member(bootstrap: str, ledger: Ledger, stop: threading.Event) -> None:
    from aiokafka.structs import TopicPartition as AioPartition

    async def run():
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    partition_assignment_strategy=[RoundRobinPartitionAssignor],
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                ledger.assigned["aiokafka"] = {tp.partition for tp in consumer.assignment()}
                for tp, records in batches.items():
                    for record in records:
                        ledger.consume("aiokafka", tp.partition, record.offset)
                        try:
                            await consumer.commit({AioPartition(TOPIC, tp.partition):
                                                   record.offset + 1})
                            ledger.commit(tp.partition, record.offset + 1)
                        except Exception:
                            break
        finally:
            await consumer.stop()   # a clean LeaveGroup

    asyncio.run(run())


def _read_confluent(process: subprocess.Popen, ledger: Ledger) -> None:
    for line in process.stdout:
        kind, partition, value = json.loads(line)
        if kind == "consumed":
            ledger.consume("confluent-kafka", partition, value)
        elif kind == "committed":
            ledger.commit(partition, value)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_three_libraries_in_one_group_through_join_leave_and_crash(bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    produced = 0

    def phase() -> None:
        nonlocal produced
        for i in range(PER_PHASE * PARTITIONS):
            producer.send(TOPIC, value=b"r%d" % (produced + i), partition=i % PARTITIONS)
        producer.flush()
        produced += PER_PHASE * PARTITIONS

    def all_consumed() -> bool:
        return len(ledger.distinct()) == produced

    ledger = Ledger()
    stop_python, stop_aio = threading.Event(), threading.Event()
    threads = []
    confluent = subprocess.Popen([sys.executable, "-c", CONFLUENT_MEMBER, bootstrap, GROUP,
                                  TOPIC], stdout=subprocess.PIPE, text=True)
    try:
        threading.Thread(target=_read_confluent, args=(confluent, ledger), daemon=True).start()
        threads.append(threading.Thread(target=_kafka_python_member,
                                        args=(bootstrap, ledger, stop_python), daemon=True))
        threads[-1].start()
        phase()                                             # 1: two members
        _wait(all_consumed, 60, "phase 1")
        assert ledger.by("confluent-kafka") and ledger.by("kafka-python")

        threads.append(threading.Thread(target=_aiokafka_member,
                                        args=(bootstrap, ledger, stop_aio), daemon=True))
        threads[-1].start()                                 # 2: aiokafka joins
        _wait(lambda: ledger.assigned.get("aiokafka") or not threads[-1].is_alive(), 60,
              "aiokafka's partitions")
        phase()
        _wait(all_consumed, 60, "phase 2")

        stop_aio.set()                                      # 3: aiokafka leaves cleanly
        threads[-1].join(30)
        phase()
        _wait(all_consumed, 60, "phase 3")

        confluent.send_signal(signal.SIGKILL)               # 4: confluent-kafka crashes
        confluent.wait(10)
        phase()
        _wait(all_consumed, 60, "phase 4 (after the crashed member's session timed out)")
    finally:
        stop_python.set()
        stop_aio.set()
        if confluent.poll() is None:
            os.kill(confluent.pid, signal.SIGKILL)
            confluent.wait(10)
        for thread in threads:
            thread.join(30)
        producer.close()

    assert ledger.by("aiokafka") > 0
    assert ledger.distinct() == {(p, o) for p in range(PARTITIONS)
                                 for o in range(produced // PARTITIONS)}
    assert not ledger.violations, ledger.violations[:5]
    checker = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP)
    committed = {p: checker.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    checker.close()
    assert committed == dict.fromkeys(range(PARTITIONS), produced // PARTITIONS)
