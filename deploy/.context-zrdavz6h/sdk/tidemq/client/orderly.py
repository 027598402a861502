"""Orderly consumption for a PushConsumer (docs/consumption.md#orderly-push-consumption).

Each owned queue has one worker thread that hands its messages to the listener strictly in
queue order, only while this client holds the queue's lock on the broker (LockQueues: a lease of
60 s, renewed every 20 s; the client trusts a lock for 30 s after its last successful renewal).
A failed batch is suspended and retried in place — the queue does not move on — and after
`max_reconsume_times` failures each of its messages goes to the group's DLQ. When a queue is
revoked, its worker finishes the batch it is in, the consumed prefix is committed, and only then
is the lock released, so the next owner never processes a key while the old one still does.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from tidemq.client.consume_spans import outcome, processing
from tidemq.client.consumer import PullConsumer
from tidemq.client.message import MessageExt, MessageQueue
from tidemq.client.process_queue import ProcessQueue
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.v1 import broker_pb2

log = get_logger(__name__)

LOCK_RENEW_S = 20.0      # RocketMQ's rebalance lock interval
LOCK_TRUSTED_S = 30.0    # < the broker's 60 s lease: a late renewal never overlaps a new owner


class OrderlyConsumer(Protocol):
    """What orderly consumption uses of its PushConsumer (which builds it: push_consumer.py)."""

    group: str
    listener: Callable[[list[MessageExt]], Any]  # returns a ConsumeStatus
    consume_batch_size: int
    max_reconsume_times: int
    suspend_s: float
    puller: PullConsumer


class QueueWorker:
    """One queue's ordered consumption on its own thread."""

    def __init__(self, owner: OrderlyConsumption, pq: ProcessQueue) -> None:
        self.owner, self.pq = owner, pq
        self.buffer: collections.deque[MessageExt] = collections.deque()
        self.ready = threading.Condition()
        self.locked_until = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"orderly-{pq.mq}")

    def offer(self, messages: list[MessageExt]) -> None:
        with self.ready:
            self.buffer.extend(messages)
            self.ready.notify()

    def stop(self) -> None:
        with self.ready:
            self.ready.notify()
        self.thread.join()  # the batch in the listener finishes first

    def locked(self) -> bool:
        return time.monotonic() < self.locked_until

    def _run(self) -> None:
        consumer = self.owner.consumer
        while not self.pq.dropped:
            with self.ready:
                if not self.buffer:
                    self.ready.wait(0.5)
                    continue
                batch = list(self.buffer)[:consumer.consume_batch_size]
            if not self.locked() and not self.owner.lock([self]):
                self.owner.stopping.wait(1.0)  # another member still holds it
                continue
            if self._consume(batch):
                with self.ready:
                    for _ in batch:
                        self.buffer.popleft()
                self.pq.done(m.queue_offset for m in batch)

    def _consume(self, batch: list[MessageExt]) -> bool:
        """True when the batch is done (consumed, or given up to the DLQ); False if the queue
        was revoked meanwhile (the batch stays pending for the next owner)."""
        consumer, failures = self.owner.consumer, 0
        while not self.pq.dropped and self.locked():
            with processing(self.pq.mq.topic, consumer.group, batch,
                            self.owner.client_id) as span:
                try:
                    status = consumer.listener(batch)
                except Exception:
                    log.exception("orderly_listener_failed", queue=str(self.pq.mq))
                    status = None
                succeeded = status is not None and status.value == "CONSUME_SUCCESS"
                outcome(span, getattr(status, "value", "EXCEPTION"), not succeeded)
            if succeeded:
                return True
            failures += 1
            if failures > consumer.max_reconsume_times:
                return self.owner.dead_letter(self.pq.mq, batch, failures - 1)
            self.owner.stopping.wait(consumer.suspend_s)  # suspend, then retry in place
        return False


class OrderlyConsumption:
    def __init__(self, consumer: OrderlyConsumer, stopping: threading.Event) -> None:
        self.consumer = consumer
        self.client_id = f"{consumer.group}-{uuid.uuid4().hex[:12]}"
        self.stopping = stopping  # the consumer's: set when it shuts down
        self.workers: dict[MessageQueue, QueueWorker] = {}
        self._lock = threading.Lock()
        self._renewer = threading.Thread(target=self._renew, daemon=True,
                                         name=f"lock-renew-{consumer.group}")
        self._renewer.start()

    def add(self, pq: ProcessQueue) -> None:
        worker = QueueWorker(self, pq)
        with self._lock:
            self.workers[pq.mq] = worker
        worker.thread.start()

    def offer(self, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        with self._lock:
            worker = self.workers.get(pq.mq)
        if worker is not None:
            worker.offer(messages)

    def remove(self, queues: list[MessageQueue]) -> None:
        """Stop the workers of revoked (already dropped) queues, waiting for their batch."""
        with self._lock:
            gone = [self.workers.pop(mq) for mq in queues if mq in self.workers]
        for worker in gone:
            worker.stop()

    def release(self, queues: list[MessageQueue]) -> None:
        """Unlock revoked queues on their brokers (after their offsets were committed)."""
        for broker_name, mqs in _by_broker(queues).items():
            try:
                self._client(mqs[0]).call("UnlockQueues", broker_pb2.UnlockQueuesRequest(
                    consumer_group=self.consumer.group, client_id=self.client_id,
                    queues=[broker_pb2.LockedQueue(topic=m.topic, queue_id=m.queue_id)
                            for m in mqs]))
            except errors.TideMQError as exc:  # the lease runs out by itself
                log.info("unlock_failed", broker=broker_name, error=str(exc))

    def lock(self, workers: list[QueueWorker]) -> bool:
        """Lock (renew) the workers' queues; True if every one of them is held."""
        held_all = True
        for broker_name, mqs in _by_broker([w.pq.mq for w in workers]).items():
            asked = time.monotonic()
            try:
                reply = self._client(mqs[0]).call("LockQueues", broker_pb2.LockQueuesRequest(
                    consumer_group=self.consumer.group, client_id=self.client_id,
                    queues=[broker_pb2.LockedQueue(topic=m.topic, queue_id=m.queue_id)
                            for m in mqs]))
                held = {MessageQueue(q.topic, broker_name, q.queue_id) for q in reply.locked}
            except errors.TideMQError as exc:
                log.info("lock_failed", broker=broker_name, error=str(exc))
                held = set()
            for worker in workers:
                if worker.pq.mq.broker_name == broker_name:
                    if worker.pq.mq in held:
                        worker.locked_until = asked + LOCK_TRUSTED_S
                    else:
                        held_all = False
        return held_all

    def dead_letter(self, mq: MessageQueue, batch: list[MessageExt], retries: int) -> bool:
        for message in batch:
            try:
                self._client(mq).call("SendMessageBack", broker_pb2.SendMessageBackRequest(
                    consumer_group=self.consumer.group, physical_offset=message.physical_offset,
                    dead_letter=True, reconsume_times=retries))
            except errors.TideMQError as exc:
                log.warning("dead_letter_failed", queue=str(mq), error=str(exc))
                return False  # keep the queue where it is; retried after the next suspend
        return True

    def _renew(self) -> None:
        while not self.stopping.wait(LOCK_RENEW_S):
            with self._lock:
                workers = list(self.workers.values())
            if workers:
                self.lock(workers)

    def _client(self, mq: MessageQueue):
        puller = self.consumer.puller
        return puller.brokers.get(puller.master_addr(mq))


def _by_broker(queues: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
    grouped: dict[str, list[MessageQueue]] = {}
    for mq in queues:
        grouped.setdefault(mq.broker_name, []).append(mq)
    return grouped
