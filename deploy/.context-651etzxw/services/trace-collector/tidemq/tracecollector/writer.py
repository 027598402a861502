"""Group commit for incoming spans: many Export calls, one SQLite transaction.

Export calls only append to a bounded in-memory queue and return, so a slow disk never holds
an exporter's RPC open; when the queue is full the batch is refused (the exporter retries
with back-off) instead of growing memory without bound.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from tidemq.common.logs import get_logger
from tidemq.tracecollector.model import SpanRecord
from tidemq.tracecollector.store import SpanStore

DEFAULT_MAX_QUEUED_SPANS = 200_000
DEFAULT_MAX_COMMIT_SPANS = 10_000
# Retention also runs when idle so age-based expiry happens without new traffic.
IDLE_RETENTION_INTERVAL_S = 60.0

log = get_logger(__name__)


class SpanWriter:
    def __init__(
        self,
        store: SpanStore,
        *,
        max_queued_spans: int = DEFAULT_MAX_QUEUED_SPANS,
        max_commit_spans: int = DEFAULT_MAX_COMMIT_SPANS,
        on_stored: Callable[[int], None] | None = None,
    ) -> None:
        self._store = store
        self._max_queued = max_queued_spans
        self._max_commit = max_commit_spans
        self._on_stored = on_stored
        self._pending: deque[list[SpanRecord]] = deque()
        self._queued = 0
        self._submitted = 0
        self._committed = 0
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="span-writer", daemon=True)
        self._thread.start()

    @property
    def queued_spans(self) -> int:
        with self._cond:
            return self._queued

    def submit(self, spans: list[SpanRecord]) -> bool:
        """Queue a batch for the next commit; False when the queue is full or closing."""
        if not spans:
            return True
        with self._cond:
            if self._closing or self._queued + len(spans) > self._max_queued:
                return False
            self._pending.append(spans)
            self._queued += len(spans)
            self._submitted += 1
            self._cond.notify_all()
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far is committed; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._submitted
            while self._committed < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued, then stop the writer thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _take(self) -> tuple[list[SpanRecord], int] | None:
        with self._cond:
            while not self._pending and not self._closing:
                if not self._cond.wait(IDLE_RETENTION_INTERVAL_S):
                    return [], 0
            if not self._pending:
                return None
            spans: list[SpanRecord] = []
            batches = 0
            while self._pending and (not spans or len(spans) < self._max_commit):
                spans.extend(self._pending.popleft())
                batches += 1
            self._queued -= len(spans)
            return spans, batches

    def _run(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            spans, batches = taken
            try:
                if spans:
                    stored = self._store.insert(spans)
                    if self._on_stored:
                        self._on_stored(stored)
                else:
                    self._store.enforce_retention()
            except Exception:  # keep the writer alive; the batch is lost and logged
                log.exception("span_batch_commit_failed", spans=len(spans))
            with self._cond:
                self._committed += batches
                self._cond.notify_all()
