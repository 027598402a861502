"""PullRequestHoldService: park pulls that found nothing until their queue grows (long polling).

A pull with nothing new waits on its queue's Condition; the store's dispatcher calls
`notify_arrival` right after new ConsumeQueue entries exist, which wakes exactly the pulls
parked on that (topic, queue). No polling loop: an idle held pull costs one blocked thread.
The waiter re-reads the queue's max offset under the same lock the notifier takes, so an
arrival between "found nothing" and "start waiting" is never missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class _QueueSignal:
    __slots__ = ("condition", "waiters")

    def __init__(self, lock: threading.Lock) -> None:
        self.condition = threading.Condition(lock)
        self.waiters = 0


class PullRequestHoldService:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signals: dict[tuple[str, int], _QueueSignal] = {}
        self._shutting_down = False

    def hold(self, topic: str, queue_id: int, offset: int, timeout_s: float,
             max_offset: Callable[[], int],
             abandoned: Callable[[], bool] = lambda: False) -> bool:
        """Wait until `max_offset()` > `offset`, the timeout passes, shutdown, or `abandoned()`
        (the caller went away; wake it with `notify_arrival`); True if the queue grew."""
        deadline = time.monotonic() + timeout_s
        key = (topic, queue_id)
        with self._lock:
            signal = self._signals.get(key)
            if signal is None:
                signal = self._signals[key] = _QueueSignal(self._lock)
            signal.waiters += 1
            try:
                while True:
                    if max_offset() > offset:
                        return True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._shutting_down or abandoned():
                        return False
                    signal.condition.wait(remaining)
            finally:
                signal.waiters -= 1
                if signal.waiters == 0:
                    del self._signals[key]

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int = 0) -> None:
        """Store arrival listener: wake the pulls held on this queue."""
        with self._lock:
            signal = self._signals.get((topic, queue_id))
            if signal is not None:
                signal.condition.notify_all()

    def held_count(self) -> int:
        with self._lock:
            return sum(signal.waiters for signal in self._signals.values())

    def shutdown(self) -> None:
        """Answer every held pull now (graceful stop must not wait out 15 s holds)."""
        with self._lock:
            self._shutting_down = True
            for signal in self._signals.values():
                signal.condition.notify_all()
