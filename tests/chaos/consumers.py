"""The chaos run's two consumer groups, with the project's clients: a POP group
(`SimpleConsumer`, acking each batch) and an OFFSET group (`PullConsumer` committing the offset
after every batch). Each records what it was handed (verify.Delivery) and rides out faults;
the verdicts over those records are tests.chaos.verify.check_consumption's."""

from __future__ import annotations

import threading
import time

from tests.chaos.verify import Ack, Delivery

POP_GROUP = "chaos-pop"
OFFSET_GROUP = "chaos-offsets"
# A popped message stays invisible this long: long enough for a pop + ack round trip under
# faults, short enough that one left unacked comes back within the drain at the end.
INVISIBLE_S = 4.0
# Every UNACKED_EVERY-th message (by the producer's sequence: the same ones for a seed) is left
# unacked on its first delivery: it must be handed over again, across a promotion if one
# happened meanwhile.
UNACKED_EVERY = 50


def _delivery(message, at: float) -> Delivery:
    return Delivery(message.topic, message.queue_id, message.queue_offset, bytes(message.body),
                    message.broker_name, at)


class _Reader:
    """One thread consuming until stopped; what it was handed is in `deliveries`."""

    name = "reader"

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{self.name}")

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def bodies(self) -> set[bytes]:
        return {delivery.body for delivery in self.deliveries}

    def _run(self) -> None:
        from tidemq.common.errors import TideMQError

        while not self._stop.is_set():
            try:
                self._step()
            except TideMQError:
                self.errors += 1
                self._recover()
                self._stop.wait(0.1)

    def _step(self) -> None:
        raise NotImplementedError

    def _recover(self) -> None:
        """After a failed call."""


class PopReader(_Reader):
    """Pops up to 32 at a time and acks the batch in one call, except the messages chosen to
    be left unacked on their first delivery. `acked`: (body, when its ack succeeded);
    `unacked`: (body, when it was handed over) of those left unacked on purpose."""

    name = POP_GROUP

    def __init__(self, namesrv_addrs: str, topic: str) -> None:
        from tidemq.client import SimpleConsumer

        super().__init__()
        self.consumer = SimpleConsumer(namesrv_addrs, POP_GROUP, topic,
                                       invisible_duration_s=INVISIBLE_S, timeout=3.0)
        self.acked: list[tuple[bytes, float]] = []
        self.unacked: list[tuple[bytes, float]] = []
        self.failed_acks = 0

    @staticmethod
    def leave_unacked(body: bytes) -> bool:
        return int(body.rsplit(b":", 1)[1]) % UNACKED_EVERY == 0

    def _step(self) -> None:
        received = self.consumer.receive(32, wait_s=0.5)
        now = time.monotonic()
        to_ack = []
        for message in received:
            self.deliveries.append(_delivery(message.message, now))
            if message.delivery_count == 1 and self.leave_unacked(message.body):
                self.unacked.append((message.body, now))
            else:
                to_ack.append(message)
        if not to_ack:
            return
        results = self.consumer.ack_many(to_ack)
        now = time.monotonic()
        for message, result in zip(to_ack, results, strict=True):
            if result.ok:
                self.acked.append((message.body, now))
            else:
                self.failed_acks += 1   # comes back after its invisible time

    def stop(self) -> None:
        super().stop()
        self.consumer.close()


class OffsetReader(_Reader):
    """Pulls every queue from its offset and commits the new offset after each batch; after a
    failed call it starts again from the committed offsets, as a restarted consumer would."""

    name = OFFSET_GROUP

    def __init__(self, namesrv_addrs: str, topic: str) -> None:
        from tidemq.client import PullConsumer

        super().__init__()
        self.topic = topic
        self.consumer = PullConsumer(namesrv_addrs, consumer_group=OFFSET_GROUP, timeout=3.0,
                                     route_refresh_s=1.0)
        self.offsets: dict = {}

    def _step(self) -> None:
        for mq in self.consumer.fetch_queues(self.topic):
            if mq not in self.offsets:
                self.offsets[mq] = self.consumer.committed(mq) or 0
            pulled = self.consumer.pull(mq, self.offsets[mq], 64, long_poll=0.2)
            now = time.monotonic()
            self.deliveries.extend(_delivery(message, now) for message in pulled.messages)
            if pulled.next_offset != self.offsets[mq]:
                self.consumer.commit(mq, pulled.next_offset)
                self.offsets[mq] = pulled.next_offset

    def _recover(self) -> None:
        self.offsets.clear()

    def stop(self) -> None:
        super().stop()
        self.consumer.close()


def drained(readers: list[_Reader], acks: list[Ack], pop: PopReader) -> bool:
    """Every acknowledged message handed to every group, and every message left unacked on
    purpose handed over again: what the drain after the faults waits for."""
    wanted = {ack.body for ack in acks}
    if any(wanted - reader.bodies() for reader in readers):
        return False
    latest: dict[bytes, float] = {}
    for delivery in pop.deliveries:
        latest[delivery.body] = max(delivery.at, latest.get(delivery.body, delivery.at))
    return all(latest.get(body, at) > at for body, at in pop.unacked)
