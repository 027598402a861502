"""How many requests of one gunicorn worker may be parked in a long poll at once.

A long-polled pop or fetch holds one of the worker's threads until a message arrives or its
`wait_ms` ends. Were every thread parked, the worker could answer nothing else: not an ack,
not a send, not `/healthz` (and an orchestrator would restart a healthy gateway). So
RESERVED_THREADS of each worker's threads are never parked: a long poll that finds no free slot
is answered at once with what is there, as a `wait_ms` of 0 would be. When there is nothing,
it is refused (429 LONG_POLLS_EXHAUSTED with `Retry-After`) instead of answered empty: an empty
answer sent at once makes a client that loops ask again at once, and a few hundred such
clients spin the gateway and the broker. Nothing is popped or read for a refused poll. Raise
`--threads` (or `--workers`) to park more consumers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from tidemq.common import errors

RESERVED_THREADS = 4
Found = TypeVar("Found")


class LongPolls:
    def __init__(self, threads: int) -> None:
        self.slots = max(threads - RESERVED_THREADS, 1)
        self._free = threading.BoundedSemaphore(self.slots)

    @contextmanager
    def waiting(self, wait_ms: int) -> Iterator[int]:
        """The wait this request may use: `wait_ms` while it holds a slot, else 0."""
        if wait_ms <= 0 or not self._free.acquire(blocking=False):
            yield 0
            return
        try:
            yield wait_ms
        finally:
            self._free.release()

    def poll(self, wait_ms: int, read: Callable[[int], Found],
             empty: Callable[[Found], bool]) -> Found:
        """`read(granted_ms)`: with `wait_ms` while a slot is free, else at once; a poll that
        asked to wait, got no slot and found nothing (`empty`) is refused instead."""
        with self.waiting(wait_ms) as granted_ms:
            found = read(granted_ms)
        if granted_ms < wait_ms and empty(found):
            raise self.refusal()
        return found

    def refusal(self) -> errors.ResourceExhausted:
        """The answer to a long poll that found no free slot, then nothing to return."""
        return errors.ResourceExhausted(
            f"this gateway worker has all of its {self.slots} long-poll slots taken and nothing "
            "was there to return (nothing was popped or read): ask again after the Retry-After "
            "delay, or run the gateway with more --threads or --workers",
            code="LONG_POLLS_EXHAUSTED")
