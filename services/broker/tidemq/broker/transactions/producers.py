"""Live producers per producer group, for check-backs.

A broker cannot call a client (gRPC clients are not servers), so a TransactionProducer keeps a
TransactionChecks stream open to every broker it sent half messages to and heartbeats it; a
check-back is put on the stream of one live producer of the half message's group. A producer
counts as live while its stream is open and it heartbeated within `expiry_s` (RocketMQ drops
a producer channel idle for 120 s). Used on the broker's event loop only: no locks.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PRODUCER_EXPIRY_S = 120.0  # RocketMQ's channelExpiredTimeout


@dataclass(slots=True)
class LiveProducer:
    client_id: str
    last_seen: float
    streams: list[asyncio.Queue] = field(default_factory=list)


class ProducerTable:
    def __init__(self, *, expiry_s: float = PRODUCER_EXPIRY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.expiry_s = expiry_s
        self.clock = clock
        self._groups: dict[str, dict[str, LiveProducer]] = {}
        self._turn = itertools.count()
        self._closed = False  # the broker is stopping: streams end at once

    def heartbeat(self, group: str, client_id: str) -> None:
        producers = self._groups.setdefault(group, {})
        producer = producers.get(client_id)
        if producer is None:
            producers[client_id] = LiveProducer(client_id, self.clock())
        else:
            producer.last_seen = self.clock()

    def open_stream(self, group: str, client_id: str) -> asyncio.Queue:
        self.heartbeat(group, client_id)
        queue: asyncio.Queue = asyncio.Queue()
        if self._closed:  # a producer reconnecting during shutdown must not hold the drain
            queue.put_nowait(None)
            return queue
        self._groups[group][client_id].streams.append(queue)
        return queue

    def close_stream(self, group: str, client_id: str, queue: asyncio.Queue) -> None:
        producer = self._groups.get(group, {}).get(client_id)
        if producer is not None and queue in producer.streams:
            producer.streams.remove(queue)

    def live(self, group: str) -> list[LiveProducer]:
        """The group's producers that can take a check-back now (expired ones are dropped)."""
        now, producers = self.clock(), self._groups.get(group, {})
        for client_id in [c for c, p in producers.items() if now - p.last_seen > self.expiry_s]:
            del producers[client_id]
        return [p for p in producers.values() if p.streams]

    def deliver(self, group: str, check: object) -> str:
        """Put `check` on one live producer's stream (round robin); its client id, or "" when
        the group has no live producer."""
        live = self.live(group)
        if not live or self._closed:
            return ""
        producer = live[next(self._turn) % len(live)]
        producer.streams[-1].put_nowait(check)
        return producer.client_id

    def close_all(self) -> None:
        """End every open stream, and any opened later (broker shutdown): each gets the end
        marker None."""
        self._closed = True
        for producers in self._groups.values():
            for producer in producers.values():
                for queue in producer.streams:
                    queue.put_nowait(None)
