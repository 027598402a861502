"""FlushService: when CommitLog pages reach the disk.

ASYNC_FLUSH (RocketMQ's FlushRealTimeService): every `flush_interval_ms` a thread fsyncs if at
least `flush_least_pages` pages are dirty, and whatever is dirty every `full_flush_interval_ms`;
appends never wait for it or wake it, so fsyncs stay few and large under load.
SYNC_FLUSH: every append is written and acknowledged in one place, a LoopAppender
(loop_appender.py) on the caller's event loop, or on the store's own loop thread for a
blocking caller (store_loop.py); this service only writes its groups and counts its fsyncs.
On a slave (which receives bytes from its master, `append_replicated`) the same periodic
thread flushes in both modes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tidemq.common.logs import get_logger

from .commitlog import Appended, AppendRequest, CommitLog
from .config import FlushFailed, FlushMode, StorageFull, StoreConfig, StoreError

log = get_logger(__name__)
PAGE_SIZE = 4096


def queue_of(append: Any) -> tuple[str, int]:
    """The (topic, queue id) of a waiting append: anything holding an AppendRequest as
    `request` (a LoopAppender's appends)."""
    return append.request[0], append.request[1]


class FlushService:
    def __init__(self, commitlog: CommitLog, config: StoreConfig,
                 store_host: bytes = b"\0" * 8) -> None:
        self.commitlog = commitlog
        self.store_host = store_host
        self.sync = config.flush_mode is FlushMode.SYNC
        self.interval_s = config.flush_interval_ms / 1000
        self.full_interval_s = config.full_flush_interval_ms / 1000
        self.least_bytes = max(1, config.flush_least_pages) * PAGE_SIZE
        self.timeout_s = config.sync_flush_timeout_ms / 1000
        self._wakeup = threading.Event()
        # A slave's bytes arrive by replication, never through a LoopAppender: the periodic
        # flush runs for them in SYNC_FLUSH too (set by MessageStore.become_slave).
        self.replicating = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.fsyncs = 0
        self.rounds = 0             # SYNC_FLUSH group commits (fsyncs that acknowledge)
        self.round_requests = 0     # append calls served by those group commits

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_async, name="store-flush", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
        self.commitlog.flush()

    # -- SYNC_FLUSH: written and acknowledged by a LoopAppender (loop_appender.py) ---------
    def write(self, requests: list[AppendRequest]) -> list[Appended | StoreError]:
        """Append a group of batches to the log now; the caller has it fsynced and dispatched.
        Each batch's (first queue offset, physical offsets, end offset), or its StoreError; FlushFailed
        for all when the write itself failed."""
        return self._append_group(requests)

    def count_synced(self, appends: int) -> None:
        """A group commit made by others (a LoopAppender's syncer) acknowledged `appends`
        (none when a timeout or a failure had answered them already)."""
        self.fsyncs += 1
        if appends:
            self.rounds += 1
            self.round_requests += appends

    def _append_group(self, requests: list[AppendRequest]) -> list[Appended | StoreError]:
        try:
            return self.commitlog.append_group(requests, self.store_host)
        except StorageFull as exc:   # no room for the next segment: a state, not a fault
            return [exc] * len(requests)
        except Exception as exc:
            log.exception("commitlog write failed")
            failure = FlushFailed(f"commitlog write failed ({exc}); nothing was appended")
            return [failure] * len(requests)

    # -- ASYNC_FLUSH --------------------------------------------------------------------------
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
            if self.sync and not self.replicating:
                continue   # a LoopAppender's syncer fsyncs every append before its answer
            dirty = self.commitlog.max_offset - self.commitlog.flushed_offset
            now = time.monotonic()
            full_due = now - last_full >= self.full_interval_s
            if dirty >= self.least_bytes or (full_due and dirty > 0):
                self._flush_and_announce()
            if full_due:
                last_full = now
