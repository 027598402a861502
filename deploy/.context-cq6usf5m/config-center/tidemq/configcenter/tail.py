"""EventTail: one reader of the event log per instance, shared by all its watch streams.

Without it every watch stream would XREAD the whole log from Redis on its own, so N watchers
would cost N copies of every event (values up to 1 MiB) per write. The tail reads once into a
bounded in-memory window of the newest events; a watcher at the head waits on a condition and
takes its slice from the window. A watcher further behind than the window (a reconnect from an
old revision) reads from Redis directly until it has caught up. Revisions in the window are
contiguous, so a slice is an index computation, and the log in Redis stays the single source of
truth: the window only ever holds a verbatim copy of it.
"""

from __future__ import annotations

import threading
from collections import deque

from tidemq.common.logs import get_logger
from tidemq.configcenter.model import Event, RevisionCompacted
from tidemq.configcenter.store import ConfigStore

log = get_logger(__name__)

MIN_BACKOFF_S, MAX_BACKOFF_S = 0.1, 1.0  # retry pace while Redis fails (short: watchers wait)


class EventTail:
    def __init__(self, store: ConfigStore, capacity: int = 10_000) -> None:
        self._store = store
        self._window: deque[Event] = deque(maxlen=capacity)
        self._head = -1  # highest revision read from the log; -1 = not started yet
        self._changed = threading.Condition()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-tail", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def read(self, after: int, timeout_s: float) -> list[Event]:
        """Events with revision > `after` in order, waiting up to `timeout_s` for one."""
        with self._changed:
            if self._head >= 0 and after >= self._head:
                self._changed.wait_for(lambda: self._head > after or self._stopped.is_set(),
                                       timeout_s)
            events = self._slice(after)
        if events is not None:
            return events
        # Behind the window, or the tail is not running yet: read from Redis itself (blocking
        # as a standalone reader would while the tail has nothing to wait on).
        return self._store.read_events(after, block_ms=None if self._head < 0 else 0)

    def _slice(self, after: int) -> list[Event] | None:
        if self._head < 0 or after > self._head:
            return None
        if after == self._head:
            return []
        if not self._window or self._window[0].revision > after + 1:
            return None
        start = after + 1 - self._window[0].revision
        return [self._window[i] for i in range(start, len(self._window))]

    def _run(self) -> None:
        after, failing, backoff = None, False, MIN_BACKOFF_S
        while not self._stopped.is_set():
            try:
                if after is None:
                    after = self._store.revision()
                    self._publish([], after, reset=True)
                events = self._store.read_events(after, block_ms=500)
            except RevisionCompacted:
                after = None  # fell behind retention: restart at the head, readers use Redis
                continue
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any Redis answer
                # Dying here would stall every watcher at the head for good: log, back off, retry.
                if not failing:
                    log.warning("event tail cannot read the log; retrying", error=str(exc),
                                error_type=type(exc).__name__)
                failing = True
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = MIN_BACKOFF_S
            if failing:
                log.info("event tail reading the log again", revision=after)
                failing = False
            if events:
                after = events[-1].revision
                self._publish(events, after)

    def _publish(self, events: list[Event], head: int, reset: bool = False) -> None:
        with self._changed:
            if reset:
                self._window.clear()
            self._window.extend(events)
            self._head = head
            self._changed.notify_all()
