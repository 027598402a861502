"""Concurrent sends of one producer coalesced into batch sends (Kafka's producer batching, with
no linger): what is sent asynchronously while earlier batches are on the wire leaves together.

`Producer.send_async` hands each message here. The first message of an idle producer leaves
at once, alone; up to `in_flight` batches are on the wire at a time, and every message queued
meanwhile goes in the next batch of its topic (at most MAX_BATCH_MESSAGES messages or
MAX_BATCH_BYTES of bodies). A batch goes to one queue and is stored whole or not at all, so
each message's result is its batch's: a SendResult of its own, or the batch's error, exactly
what a single send would have answered. A batch refused before anything was stored because
one message is invalid is sent again message by message, so only that message fails.

Messages with a `message_group` are batched with their group only, and one batch of a group
is on the wire at a time: a group's asynchronous sends are stored in the order they were made.

A batch is sent in the context of its first message's caller: its publish span joins that
caller's trace (a lone send, or gateway-grpc relaying one client's SendMessage, is traced end
to end as before); the other messages of a batch are published under that span too.
"""

from __future__ import annotations

import contextvars
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from tidemq.client.message import Message, SendResult
from tidemq.common import errors

MAX_BATCH_MESSAGES = 256
MAX_BATCH_BYTES = 1 << 20
# refused whole before anything was stored: worth resending the messages one by one
_REFUSED_WHOLE = (errors.InvalidArgument, errors.PayloadTooLarge)

SendBatch = Callable[[Sequence[Message]], list[SendResult]]


@dataclass
class _Lane:
    """The queued sends of one topic (and message group)."""

    queued: deque[tuple[Message, Future, contextvars.Context]] = field(default_factory=deque)
    busy: bool = False  # a message group's batch is on the wire


class SendCoalescer:
    def __init__(self, send_batch: SendBatch, executor: Callable[[], Executor], *,
                 in_flight: int) -> None:
        """`send_batch(messages)`: Producer.send_batch (one topic, one queue, all or none);
        `executor()`: the pool batches are sent on."""
        self._send_batch, self._executor = send_batch, executor
        self._in_flight_max = max(1, in_flight)
        self._lock = threading.Lock()
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._in_flight = 0

    def submit(self, message: Message) -> Future:
        future: Future = Future()
        with self._lock:
            key = (message.topic, message.message_group)
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane()
            lane.queued.append((message, future, contextvars.copy_context()))
            batches = self._take()
        self._start(batches)
        return future

    def _take(self) -> list[tuple[tuple[str, str], list]]:
        """Batches to start now (under the lock), oldest lanes first."""
        batches = []
        for key, lane in list(self._lanes.items()):
            if self._in_flight >= self._in_flight_max:
                break
            if lane.busy or not lane.queued:
                continue
            batch, size = [], 0
            while lane.queued and len(batch) < MAX_BATCH_MESSAGES:
                body = len(lane.queued[0][0].body)
                if batch and size + body > MAX_BATCH_BYTES:
                    break
                batch.append(lane.queued.popleft())
                size += body
            lane.busy = bool(key[1])  # a message group keeps one batch on the wire
            if not lane.queued and not lane.busy:
                del self._lanes[key]
            self._in_flight += 1
            batches.append((key, batch))
        return batches

    def _start(self, batches) -> None:
        for key, batch in batches:
            try:
                self._executor().submit(self._run, key, batch)
            except Exception as exc:  # noqa: BLE001 - the producer closed meanwhile
                for _, future, _ in batch:
                    future.set_exception(exc)
                self._done(key)

    def _run(self, key: tuple[str, str], queued: list) -> None:
        try:
            context = queued[0][2]
            context.run(self._settle, [(message, future) for message, future, _ in queued])
        finally:
            self._done(key)

    def _settle(self, batch: list[tuple[Message, Future]]) -> None:
        try:
            results = self._send_batch([message for message, _ in batch])
        except _REFUSED_WHOLE as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for one in batch:  # nothing was stored: find the message that was refused
                self._settle([one])
            return
        except BaseException as exc:  # noqa: BLE001 - each future carries the batch's error
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results, strict=True):
            future.set_result(result)

    def _done(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._in_flight -= 1
            lane = self._lanes.get(key)
            if lane is not None and key[1]:
                lane.busy = False
                if not lane.queued:
                    del self._lanes[key]
            batches = self._take()
        self._start(batches)
