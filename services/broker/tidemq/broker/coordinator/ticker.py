"""The real-time driver of `GroupCoordinator.tick()` inside the broker process.

The coordinator never starts threads or reads a wall clock on its own (so unit tests drive
it with a fake clock); the broker starts one `CoordinatorTicker` next to its gRPC server.
"""

from __future__ import annotations

import threading

from tidemq.common.logs import get_logger

from .coordinator import GroupCoordinator

DEFAULT_TICK_INTERVAL_MS = 100  # delayed-join/session deadlines fire at most this late

_log = get_logger(__name__)


class CoordinatorTicker:
    """Calls `coordinator.tick()` every `interval_ms` on a daemon thread until `stop()`.

    >>> ticker = CoordinatorTicker(GroupCoordinator(), interval_ms=10).start()
    >>> ticker.stop()
    """

    def __init__(
        self, coordinator: GroupCoordinator, interval_ms: int = DEFAULT_TICK_INTERVAL_MS
    ) -> None:
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        self._coordinator = coordinator
        self._interval_s = interval_ms / 1000
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="group-coordinator-tick", daemon=True
        )

    def start(self) -> CoordinatorTicker:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_s):
            try:
                self._coordinator.tick()
            except Exception:  # a bug in one tick must not stop group timers for good
                _log.exception("group_coordinator_tick_failed")
