"""Latency fault avoidance (RocketMQ's LatencyFaultTolerance, docs/client.md).

After each send the producer reports the broker's latency; a slow or failing broker is
marked not-available for a while so round-robin selection steers around it. An exception
counts as 30 000 ms, which isolates the broker for 600 s or until a later success clears it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# (latency threshold ms, not-available duration s), largest first — docs/client.md, Producer.
LATENCY_MAX_MS = (15000, 3000, 2000, 1000, 550, 100, 50)
NOT_AVAILABLE_S = (600, 180, 120, 60, 30, 0, 0)
EXCEPTION_LATENCY_MS = 30000


def not_available_duration(latency_ms: float) -> float:
    """Seconds a broker is avoided after a send that took `latency_ms`."""
    for threshold, duration in zip(LATENCY_MAX_MS, NOT_AVAILABLE_S, strict=True):
        if latency_ms >= threshold:
            return float(duration)
    return 0.0


class LatencyFaultTolerance:
    """Tracks which broker groups to avoid, by name."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}

    def update(self, broker_name: str, latency_ms: float, *, failed: bool = False) -> None:
        duration = not_available_duration(EXCEPTION_LATENCY_MS if failed else latency_ms)
        with self._lock:
            if duration > 0:
                self._until[broker_name] = self._clock() + duration
            else:
                self._until.pop(broker_name, None)

    def is_available(self, broker_name: str) -> bool:
        with self._lock:
            until = self._until.get(broker_name)
        return until is None or self._clock() >= until

    def least_bad(self, broker_names: list[str]) -> str | None:
        """Of several avoided brokers, the one that becomes available soonest."""
        with self._lock:
            candidates = [(self._until.get(name, 0.0), name) for name in broker_names]
        return min(candidates)[1] if candidates else None
