"""How many requests of one gunicorn worker may be parked in a long poll at once.

A long-polled pop or fetch holds one of the worker's threads until a message arrives or its
`wait_ms` ends. Were every thread parked, the worker could answer nothing else: not an ack,
not a send, not `/healthz` (and an orchestrator would restart a healthy gateway). So
RESERVED_THREADS of each worker's threads are never parked: a long poll that finds no free slot
is answered at once with what is there (possibly nothing), as a `wait_ms` of 0 would be, and
its client asks again. Raise `--threads` to park more consumers per worker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

RESERVED_THREADS = 4


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
