"""PullRequestHoldService: park pulls that found nothing until their queue grows (long polling).

A held pull is an asyncio future, not a thread (Kafka's purgatory, RocketMQ's
PullRequestHoldService): the store's dispatcher thread calls `notify_arrival` right after new
ConsumeQueue entries exist, which resolves the futures parked on that (topic, queue) with one
`call_soon_threadsafe` per event loop. An idle held pull costs a few hundred bytes, so the
number of waiting consumers is not bounded by a thread pool. A holder registers before it
re-reads the queue's max offset, so an arrival between "found nothing" and "start waiting" is
never missed. A caller that goes away cancels its handler task, which unregisters it.

On a SYNC_MASTER a record is readable only once the in-sync replicas confirmed it (the read
fence, store/reader.py), usually after its arrival. A holder whose queue has records past its
offset that it cannot read yet (`written_offset()` > offset) also registers as fenced;
`notify_visible` (the store's visibility listener: the confirmed offset advanced) wakes just
those, so an unconfirmed record neither ends a hold with nothing nor makes it spin, and idle
holds cost nothing per acknowledgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable


def _wake(held: list[asyncio.Future]) -> None:
    for future in held:
        if not future.done():
            future.set_result(None)


class PullRequestHoldService:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int], list[asyncio.Future]] = {}
        self._fenced: set[asyncio.Future] = set()   # holders waiting for the read fence to move
        self._shutting_down = False

    async def hold(self, topic: str, queue_id: int, offset: int, timeout_s: float,
                   max_offset: Callable[[], int],
                   written_offset: Callable[[], int] | None = None) -> bool:
        """Wait until `max_offset()` (the readable end) > `offset`, the timeout passes or
        shutdown; True if the queue grew. `written_offset()`: the queue's end including
        records not readable yet (None: all written records are readable)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        key = (topic, queue_id)
        while True:
            future = loop.create_future()
            with self._lock:
                stopping = self._shutting_down
                if not stopping:
                    self._held.setdefault(key, []).append(future)
            if not stopping and written_offset is not None and written_offset() > offset:
                with self._lock:
                    self._fenced.add(future)
            try:
                if max_offset() > offset:
                    return True
                remaining = deadline - loop.time()
                if remaining <= 0 or stopping:
                    return False
                try:
                    async with asyncio.timeout(remaining):
                        await future
                except TimeoutError:
                    return max_offset() > offset
            finally:
                self._unregister(key, future)

    def _unregister(self, key: tuple[str, int], future: asyncio.Future) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is not None and future in held:
                held.remove(future)
                if not held:
                    del self._held[key]
            self._fenced.discard(future)

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int = 0) -> None:
        """Store arrival listener (any thread): wake the pulls held on this queue."""
        with self._lock:
            held = self._held.pop((topic, queue_id), None)
        if held:
            self._wake_all(held)

    def notify_visible(self) -> None:
        """Store visibility listener (any thread): the read fence moved; wake the holders
        that wait on records past their offset that were not readable."""
        with self._lock:
            fenced, self._fenced = list(self._fenced), set()
        if fenced:
            self._wake_all(fenced)

    @staticmethod
    def _wake_all(held: list[asyncio.Future]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future]] = {}
        for future in held:
            by_loop.setdefault(future.get_loop(), []).append(future)
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: its callers are gone
                loop.call_soon_threadsafe(_wake, futures)

    def held_count(self) -> int:
        with self._lock:
            return sum(len(held) for held in self._held.values())

    def fenced_count(self) -> int:
        with self._lock:
            return len(self._fenced)

    def shutdown(self) -> None:
        """Answer every held pull now (graceful stop must not wait out 15 s holds)."""
        with self._lock:
            self._shutting_down = True
            held = [future for futures in self._held.values() for future in futures]
            self._held.clear()
        self._wake_all(held)
