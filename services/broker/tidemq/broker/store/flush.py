"""FlushService: when CommitLog pages reach the disk.

ASYNC_FLUSH (RocketMQ's FlushRealTimeService): every `flush_interval_ms` a thread fsyncs if at
least `flush_least_pages` pages are dirty, and whatever is dirty every `full_flush_interval_ms`;
appends never wait for it or wake it, so fsyncs stay few and large under load.
SYNC_FLUSH with group commit: an appender that needs its bytes durable either runs the fsync
itself (covering every append made before it started) or, if one is in flight, waits for it
and possibly leads the next; so many concurrent appenders share one fsync.
"""

from __future__ import annotations

import threading
import time

from tidemq.common.logs import get_logger

from .commitlog import CommitLog
from .config import FlushMode, StoreConfig

log = get_logger(__name__)
PAGE_SIZE = 4096


class FlushService:
    def __init__(self, commitlog: CommitLog, config: StoreConfig) -> None:
        self.commitlog = commitlog
        self.sync = config.flush_mode is FlushMode.SYNC
        self.interval_s = config.flush_interval_ms / 1000
        self.full_interval_s = config.full_flush_interval_ms / 1000
        self.least_bytes = max(1, config.flush_least_pages) * PAGE_SIZE
        self.timeout_s = config.sync_flush_timeout_ms / 1000
        self._wakeup = threading.Event()
        self._flushing = False
        self._done = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.fsyncs = 0

    def start(self) -> None:
        if not self.sync:  # SYNC_FLUSH needs no thread: appenders lead their own fsyncs
            self._thread = threading.Thread(target=self._run_async, name="store-flush",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
        self.commitlog.flush()
        with self._done:
            self._done.notify_all()

    def after_append(self, end_offset: int) -> bool:
        """Called after an append; False if SYNC_FLUSH could not make it durable in time."""
        return self._group_commit(end_offset) if self.sync else True

    def _group_commit(self, end_offset: int) -> bool:
        """Leader/follower group commit: the first waiter with nothing in flight runs fsync for
        everyone appended so far; the others wait for it, and one of those still not covered
        leads the next round. No thread hand-off on the common path, one fsync per round."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            with self._done:
                while True:
                    if self.commitlog.flushed_offset >= end_offset:
                        return True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    if not self._flushing:
                        self._flushing = True
                        break
                    self._done.wait(remaining)
            try:
                self._flush_and_announce()
            finally:
                with self._done:
                    self._flushing = False
                    self._done.notify_all()

    def _flush_and_announce(self) -> None:
        try:
            self.commitlog.flush()
            self.fsyncs += 1
        except OSError:
            log.exception("commitlog fsync failed")

    def _run_async(self) -> None:
        last_full = time.monotonic()
        while not self._stopping:
            self._wakeup.wait(self.interval_s)
            self._wakeup.clear()
            dirty = self.commitlog.max_offset - self.commitlog.flushed_offset
            now = time.monotonic()
            full_due = now - last_full >= self.full_interval_s
            if dirty >= self.least_bytes or (full_due and dirty > 0):
                self._flush_and_announce()
            if full_due:
                last_full = now
