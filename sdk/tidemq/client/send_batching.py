"""Concurrent sends of one producer coalesced into batch sends (Kafka's producer batching, with
no linger): what is sent asynchronously while earlier batches are on the wire leaves together.

`Producer.send_async` hands each message here. The first message of an idle producer leaves
at once, alone; every message queued meanwhile goes in a later batch of its topic (at most
MAX_BATCH_MESSAGES messages or MAX_BATCH_BYTES of bodies). A batch goes to one queue and is
stored whole or not at all, so each message's result is its batch's: a SendResult of its own,
or the batch's error, exactly what a single send would have answered. A batch refused before
anything was stored because one message is invalid is sent again message by message, so only
that message fails.

How many batches are on the wire: a topic's next batch leaves at once for a broker group that
has none of that topic's batches on the wire; a group that has one gets a second only once a
full batch is queued (waiting for the answer could not make it bigger). So a steady stream to
one group waits for each answer and leaves in batches as big as what was sent meanwhile,
instead of many one-message calls whose per-call cost dominates (at 4 calls allowed per
group, a measured run of 20 000 sends had 1 555 batches of 1 message). A group that hangs
holds its own batch only (more only if full batches were waiting): the topic's next batches
go to the other groups. At most `in_flight` batches are on the wire in all (the pool's
threads). The thread that sent a batch sends the next one its answer frees.

Messages with a `message_group` are batched with their group only, and one batch of a group
is on the wire at a time: a group's asynchronous sends are stored in the order they were made.

A batch is sent in the context of its first message's caller: its publish span joins that
caller's trace (a lone send, or gateway-grpc relaying one client's SendMessage, is traced end
to end as before); the other messages of a batch are published under that span too. A
gateway's sends for different end clients (tidemq.common.quotas.on_behalf_of) are never
batched together: each batch is charged to one end client's quotas.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from tidemq.client.message import Message, SendResult
from tidemq.common import errors
from tidemq.common.quotas import END_CLIENT

MAX_BATCH_MESSAGES = 256
MAX_BATCH_BYTES = 1 << 20
ANY_BROKER = ""  # the route is not known yet (or a message group's batch): the producer picks
# refused whole before anything was stored: worth resending the messages one by one
_REFUSED_WHOLE = (errors.InvalidArgument, errors.PayloadTooLarge)

# send_batch(messages, broker_name): one topic, one queue, all or none; its first attempt on
# `broker_name` (or wherever the producer picks for ANY_BROKER)
SendBatch = Callable[[Sequence[Message], str], list[SendResult]]
Brokers = Callable[[str], Sequence[str]]  # the groups a topic's next batch may go to


@dataclass
class _Lane:
    """The queued sends of one topic (and message group), and its batches on the wire."""

    queued: deque[tuple[Message, Future, contextvars.Context]] = field(default_factory=deque)
    queued_bytes: int = 0
    on_wire: dict[str, int] = field(default_factory=dict)  # broker name -> batches

    def full(self) -> bool:
        return len(self.queued) >= MAX_BATCH_MESSAGES or self.queued_bytes >= MAX_BATCH_BYTES


class SendCoalescer:
    def __init__(self, send_batch: SendBatch, executor: Callable[[], Executor], *,
                 in_flight: int, brokers: Brokers = lambda topic: ()) -> None:
        """`send_batch(messages, broker_name)`: see SendBatch; `executor()`: the pool batches
        are sent on; `brokers(topic)`: the groups with writable queues that are not avoided,
        from what the producer already knows (called under the lock: no network)."""
        self._send_batch, self._executor, self._brokers = send_batch, executor, brokers
        self._in_flight_max = max(1, in_flight)
        self._lock = threading.Lock()
        self._lanes: dict[tuple, _Lane] = {}
        self._in_flight = 0
        self._rotation = itertools.count()  # spreads a topic's batches over idle groups

    @property
    def batches_on_wire(self) -> int:
        """The batches sent and not yet accounted for (an answered batch is, just after its
        futures are)."""
        return self._in_flight

    def submit(self, message: Message, *, waiting: bool = False) -> Future:
        """The send's future. `waiting`: the caller blocks on it next, so when the message
        leaves at once (its lane was idle) the caller's thread sends it, sparing two thread
        switches per call (gateway-grpc relaying one client's SendMessage); the batches its
        answer frees go to the pool."""
        future: Future = Future()
        end = END_CLIENT.get()
        with self._lock:
            key = (message.topic, message.message_group, None if end is None else end.key)
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane()
            lane.queued.append((message, future, contextvars.copy_context()))
            lane.queued_bytes += len(message.body)
            # only this lane changed: the others wait for an answer, not for this send
            batches = self._take([(key, lane)])
        if waiting:
            own = next((b for b in batches if any(f is future for _, f, _ in b[2])), None)
            if own is not None:
                batches.remove(own)
                self._start(batches)
                self._run_here(*own)
                return future
        self._start(batches)
        return future

    def _run_here(self, key: tuple, broker: str, queued: list) -> None:
        """One batch on the caller's thread; what its answer frees starts on the pool."""
        try:
            queued[0][2].run(self._settle, broker,
                             [(message, future) for message, future, _ in queued])
        finally:  # no sleep(0) as in _run: the only caller this answer woke is this thread
            self._start(self._done(key, broker))

    def _take(self, lanes: list[tuple[tuple, _Lane]]
              ) -> list[tuple[tuple, str, list]]:
        """Batches to start now (under the lock), oldest lanes first."""
        batches = []
        for key, lane in lanes:
            while lane.queued and self._in_flight < self._in_flight_max:
                broker = self._target(key, lane)
                if broker is None:
                    break
                batch = self._pop_batch(lane)
                if not batch:  # every send of it was cancelled
                    continue
                batches.append((key, broker, batch))
                lane.on_wire[broker] = lane.on_wire.get(broker, 0) + 1
                self._in_flight += 1
            if not lane.queued and not lane.on_wire:  # its last sends were cancelled
                del self._lanes[key]
        return batches

    def _target(self, key: tuple, lane: _Lane) -> str | None:
        """The group the lane's next batch goes to now, or None: it waits for an answer."""
        if key[1]:  # a message group keeps one batch on the wire
            return None if lane.on_wire else ANY_BROKER
        candidates = self._brokers(key[0]) or (ANY_BROKER,)
        if len(candidates) == 1:
            broker = candidates[0]
        else:  # the least busy, ties taken in turn
            turn = next(self._rotation)
            broker = min((candidates[(turn + i) % len(candidates)]
                          for i in range(len(candidates))),
                         key=lambda name: lane.on_wire.get(name, 0))
        return broker if not lane.on_wire.get(broker) or lane.full() else None

    @staticmethod
    def _pop_batch(lane: _Lane) -> list:
        """The lane's next batch; a send cancelled while it waited is dropped, not sent (a
        cancelled future refuses a result: answering it would stop the batch's others)."""
        batch, size = [], 0
        while lane.queued and len(batch) < MAX_BATCH_MESSAGES:
            body = len(lane.queued[0][0].body)
            if batch and size + body > MAX_BATCH_BYTES:
                break
            queued = lane.queued.popleft()
            lane.queued_bytes -= body
            if queued[1].set_running_or_notify_cancel():
                batch.append(queued)
                size += body
        return batch

    def _start(self, batches) -> None:
        for key, broker, batch in batches:
            try:
                self._executor().submit(self._run, key, broker, batch)
            except Exception as exc:  # noqa: BLE001 - the producer closed meanwhile
                for _, future, _ in batch:
                    future.set_exception(exc)
                self._start(self._done(key, broker))

    def _run(self, key: tuple, broker: str, queued: list) -> None:
        """Send a batch, then the next batch this answer frees, on the same thread (handing
        each batch to another of the pool's threads cost a thread switch per batch)."""
        while True:
            try:
                queued[0][2].run(self._settle, broker,
                                 [(message, future) for message, future, _ in queued])
            except BaseException:
                self._start(self._done(key, broker))
                raise
            time.sleep(0)  # let the callers the answers woke send again before taking the queue
            batches = self._done(key, broker)
            if not batches:
                return
            (key, broker, queued), *others = batches
            self._start(others)

    def _settle(self, broker: str, batch: list[tuple[Message, Future]]) -> None:
        try:
            results = self._send_batch([message for message, _ in batch], broker)
        except _REFUSED_WHOLE as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for one in batch:  # nothing was stored: find the message that was refused
                self._settle(broker, [one])
            return
        except BaseException as exc:  # noqa: BLE001 - each future carries the batch's error
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results, strict=True):
            future.set_result(result)

    def _done(self, key: tuple, broker: str) -> list:
        """Account for an answered batch; the batches that may start now."""
        with self._lock:
            self._in_flight -= 1
            lane = self._lanes[key]
            lane.on_wire[broker] -= 1
            if not lane.on_wire[broker]:
                del lane.on_wire[broker]
            if not lane.queued and not lane.on_wire:
                del self._lanes[key]
            return self._take(list(self._lanes.items()))
