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


class _Follower:
    """An appender waiting for a group-commit fsync; `wakeup` is released to wake it."""

    __slots__ = ("end_offset", "wakeup", "woken", "lead")

    def __init__(self, end_offset: int) -> None:
        self.end_offset = end_offset
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.woken = False
        self.lead = False


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
        self._lock = threading.Lock()
        self._followers: list[_Follower] = []
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

    def after_append(self, end_offset: int) -> bool:
        """Called after an append; False if SYNC_FLUSH could not make it durable in time."""
        return self._group_commit(end_offset) if self.sync else True

    def _group_commit(self, end_offset: int) -> bool:
        """Leader/follower group commit. The first appender finding no fsync in flight leads:
        it runs one fsync covering every append made before it started. Others queue as
        followers; when the fsync returns, the leader wakes exactly the followers it covered
        and hands leadership to one follower it did not cover. Each appender thread is woken
        at most once, so 64 appenders do not stampede on every fsync."""
        commitlog = self.commitlog
        if commitlog.flushed_offset >= end_offset:
            return True
        deadline = time.monotonic() + self.timeout_s
        with self._lock:
            if commitlog.flushed_offset >= end_offset:
                return True
            follower = None
            if self._flushing:
                follower = _Follower(end_offset)
                self._followers.append(follower)
            else:
                self._flushing = True
        if follower is not None and not self._wait_as_follower(follower, deadline):
            return False
        if follower is not None and not follower.lead:
            return True
        self._lead()
        # Durable now, but if the fsync itself outlasted the timeout the producer is told so.
        return commitlog.flushed_offset >= end_offset and time.monotonic() <= deadline

    def _wait_as_follower(self, follower: _Follower, deadline: float) -> bool:
        """False if the wait timed out before a leader woke this follower."""
        if follower.wakeup.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return True
        with self._lock:
            if follower.woken:  # woken just as the wait gave up: honour it
                return True
            self._followers.remove(follower)
            return False

    def _lead(self) -> None:
        try:
            self._flush_and_announce()
        finally:
            with self._lock:
                flushed = self.commitlog.flushed_offset
                waiting = []
                for follower in self._followers:
                    if follower.end_offset <= flushed:
                        follower.woken = True
                        follower.wakeup.release()
                    else:
                        waiting.append(follower)
                if waiting:  # leadership passes on; _flushing stays True
                    successor = waiting.pop(0)
                    successor.lead = successor.woken = True
                    successor.wakeup.release()
                else:
                    self._flushing = False
                self._followers = waiting

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
