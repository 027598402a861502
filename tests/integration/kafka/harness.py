"""A Kafka load for failover tests: confluent-kafka's idempotent `acks=all` producer and a
consumer group running beside a fault, then the verdict — every acknowledged record stored
exactly once (the topic read back to its high watermarks) and consumed by the group — with the
figures the issue asks for: records, lost, duplicated, redelivered, longest produce outage."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer

from tests.support.processes import wait_until

CLIENT_TUNING = {"topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000}


@dataclass
class Verdict:
    acknowledged: int
    lost: list[bytes]
    duplicated: list[bytes]
    redelivered: int
    outage_s: float
    failures: list[str]

    def line(self, fault: str) -> str:
        return (f"{fault}: {self.acknowledged} acknowledged, {len(self.lost)} lost, "
                f"{len(self.duplicated)} duplicated in the log, {self.redelivered} redelivered "
                f"to the group, longest produce outage of a partition {self.outage_s:.1f} s, "
                f"{len(self.failures)} delivery failures")


@dataclass
class KafkaLoad:
    bootstrap: str
    topic: str
    group: str
    acked: list[bytes] = field(default_factory=list)
    ack_times: list[tuple[int, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    consumed: list[bytes] = field(default_factory=list)
    consumer_errors: list[str] = field(default_factory=list)
    fault_at: float = 0.0

    def __post_init__(self) -> None:
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads = [threading.Thread(target=self._produce, name="kafka-load-producer"),
                         threading.Thread(target=self._consume, name="kafka-load-consumer")]

    def start(self) -> KafkaLoad:
        for thread in self._threads:
            thread.start()
        return self

    def wait_acked(self, count: int, timeout: float = 120.0) -> None:
        wait_until(lambda: len(self.acked) >= count, timeout, interval=0.1,
                   message=f"{count} records acknowledged")

    def wait_consumed(self, count: int, timeout: float = 120.0) -> None:
        wait_until(lambda: len(self.consumed) >= count, timeout, interval=0.1,
                   message=f"{count} records consumed")

    def mark_fault(self) -> None:
        self.fault_at = time.monotonic()

    def finish(self, audit_bootstrap: str | None = None) -> Verdict:
        """Stop producing, let the group consume every acknowledged record, read the log back."""
        self._stop_producing.set()
        stopped = time.monotonic()
        self._threads[0].join(150)
        wanted = set(self.acked)
        try:
            wait_until(lambda: wanted <= set(self.consumed), 120, interval=0.2,
                       message="the group to consume every acknowledged record")
        finally:
            self._stop_consuming.set()
            self._threads[1].join(60)
        copies = Counter(read_log(audit_bootstrap or self.bootstrap, self.topic))
        partitions = {p for p, _ in self.ack_times}
        outage = max((_longest_gap([t for p, t in self.ack_times if p == partition],
                                   self.fault_at, stopped) for partition in partitions),
                     default=0.0)
        assert len(self.acked) == len(wanted), "a record was acknowledged twice"
        return Verdict(len(wanted), [v for v in wanted if copies[v] == 0],
                       [v for v in wanted if copies[v] > 1],
                       len(self.consumed) - len(set(self.consumed)), outage, self.failures)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
            self.ack_times.append((msg.partition(), time.monotonic()))
        else:
            self.failures.append(str(err))

    def _produce(self) -> None:
        producer = ConfluentProducer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120000, **CLIENT_TUNING})
        sequence = 0
        while not self._stop_producing.is_set():
            producer.produce(self.topic, f"r-{sequence:07d}".encode(),
                             on_delivery=self._on_delivery)
            sequence += 1
            producer.poll(0.01)
        producer.flush(120)

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": True,
                             "auto.commit.interval.ms": 500, **CLIENT_TUNING})
        consumer.subscribe([self.topic])
        try:
            while not self._stop_consuming.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.consumer_errors.append(str(msg.error()))
                    continue
                self.consumed.append(msg.value())
        finally:
            consumer.close()


def _longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch from `start` without an acknowledgement; a partition acknowledged
    nothing after `start` was out from it to `end` (producing stopped), not for 0 s."""
    after = sorted(t for t in times if t >= start)
    points = [start, *after] if after else [start, end]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def read_log(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of the topic, read back from offset 0 to the high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-audit",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=20).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
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


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka frame from `sock` (a response: its header, then its body)."""
    (size,) = struct.unpack(">i", _read_exactly(sock, 4))
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    out = b""
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        assert chunk, "the gateway closed the connection"
        out += chunk
    return out
