"""FlushService: when CommitLog pages reach the disk.

ASYNC_FLUSH (RocketMQ's FlushRealTimeService): every `flush_interval_ms` a thread fsyncs if at
least `flush_least_pages` pages are dirty, and whatever is dirty every `full_flush_interval_ms`;
appends never wait for it or wake it, so fsyncs stay few and large under load.
SYNC_FLUSH with group commit: appends queue up and are appended, fsynced and acknowledged in
rounds, one CommitLog write and one fsync per round, run by one of the appender threads (the
leader); so many concurrent appenders share one fsync and never contend on the log's lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from tidemq.common.logs import get_logger

from .commitlog import AppendRequest, CommitLog
from .config import FlushFailed, FlushMode, StoreConfig, StoreError

log = get_logger(__name__)
PAGE_SIZE = 4096
LEADER_ROUNDS = 4   # SYNC_FLUSH: rounds a leader runs at most before handing over


class _Waiter:
    """One SYNC_FLUSH append waiting for its round; `wakeup` is released to wake it once."""

    __slots__ = ("request", "outcome", "wakeup", "done", "lead", "error")

    def __init__(self, request: AppendRequest) -> None:
        self.request = request
        self.outcome: tuple[int, list[int]] | StoreError | None = None  # set when appended
        self.error: StoreError | None = None   # the round's write/fsync failed
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.done = False   # its round is over (durable, or failed with `error`)
        self.lead = False   # leadership was handed to it


class FlushService:
    def __init__(self, commitlog: CommitLog, config: StoreConfig, store_host: bytes = b"\0" * 8,
                 on_appended: Callable[[], None] = lambda: None) -> None:
        self.commitlog = commitlog
        self.store_host = store_host
        self.on_appended = on_appended
        self.sync = config.flush_mode is FlushMode.SYNC
        self.interval_s = config.flush_interval_ms / 1000
        self.full_interval_s = config.full_flush_interval_ms / 1000
        self.least_bytes = max(1, config.flush_least_pages) * PAGE_SIZE
        self.timeout_s = config.sync_flush_timeout_ms / 1000
        self._wakeup = threading.Event()
        self._pending: deque[_Waiter] = deque()   # appended to without a lock (atomic)
        self._leader = threading.Lock()      # held by the appender running rounds
        self._lock = threading.Lock()        # waiter hand-over: taken, handed leadership, removed
        self._appending = threading.Lock()   # held by the leader while it drains and stamps
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.fsyncs = 0
        self.rounds = 0             # SYNC_FLUSH group commit rounds
        self.round_requests = 0     # append calls served by those rounds

    def start(self) -> None:
        if not self.sync:  # SYNC_FLUSH needs no thread: appenders lead their own rounds
            self._thread = threading.Thread(target=self._run_async, name="store-flush",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
        self.commitlog.flush()

    # -- SYNC_FLUSH group commit --------------------------------------------------------------
    def append(self, topic: str, queue_id: int, records: bytes,
               record_count: int) -> tuple[int, list[int], bool]:
        """Append one batch durably: (first queue offset, physical offsets, durable in time).

        The batch joins the pending queue. If no round is running its own thread leads: it
        drains every pending batch, appends them as one group (one lock hold, one write),
        fdatasyncs once and wakes each waiter of the round once; meanwhile new batches queue
        up for the next round, which the leader runs itself until its own batch is durable,
        then hands leadership to the oldest waiter. Appenders never contend on the CommitLog
        lock and an idle store pays no thread hand-off. Raises the batch's StoreError if it
        is invalid, FlushFailed if its round's write or fsync failed (never acknowledged).
        """
        deadline = time.monotonic() + self.timeout_s
        waiter = _Waiter((topic, queue_id, records, record_count))
        self._pending.append(waiter)
        if self._leader.acquire(blocking=False):
            self._lead(waiter)
        elif not waiter.wakeup.acquire(timeout=max(0.0, deadline - time.monotonic())):
            late = self._give_up(waiter)
            if late is not None:
                return late
            if waiter.lead:
                self._lead(waiter)
        elif waiter.lead:
            self._lead(waiter)
        outcome = waiter.outcome
        if isinstance(outcome, StoreError):
            raise outcome
        if waiter.error is not None:
            raise waiter.error
        first, physical_offsets = outcome  # type: ignore[misc]
        return first, physical_offsets, time.monotonic() <= deadline

    def _give_up(self, waiter: _Waiter) -> tuple[int, list[int], bool] | None:
        """The wait timed out: append the batch now if no round took it yet, and report it as
        not known durable (FLUSH_DISK_TIMEOUT). None if it was woken meanwhile."""
        with self._lock:
            if waiter.done or waiter.lead:
                return None
            try:
                self._pending.remove(waiter)
                taken = False
            except ValueError:
                taken = True
        if taken:
            with self._appending:  # the round that took it has stamped it by now
                outcome = waiter.outcome
        else:
            outcome = self._append_group([waiter])[0]
            self.on_appended()
        if isinstance(outcome, StoreError):
            raise outcome
        first, physical_offsets = outcome  # type: ignore[misc]
        return first, physical_offsets, False

    def _lead(self, me: _Waiter) -> None:
        """Run rounds until `me` is durable (or failed) and, while batches keep arriving, a few
        more (a hand-over costs a thread wake that queues behind the woken appenders for the
        GIL; 64 appenders: ~34 k -> ~38 k msgs/s); then step down."""
        try:
            rounds = 0
            while not me.done or (self._pending and rounds < LEADER_ROUNDS):
                self._round(me)
                rounds += 1
        finally:
            self._step_down()

    def _round(self, me: _Waiter) -> None:
        with self._appending:
            with self._lock:
                pop = self._pending.popleft
                batch = [pop() for _ in range(len(self._pending))]
            outcomes = self._append_group(batch)
            appended = False
            for waiter, outcome in zip(batch, outcomes, strict=True):
                waiter.outcome = outcome
                appended = appended or not isinstance(outcome, StoreError)
        try:
            if appended:
                self.on_appended()
                self.commitlog.flush()
                self.fsyncs += 1
        except Exception as exc:  # nobody of this round may be acknowledged
            log.exception("commitlog fsync failed")
            error = FlushFailed(f"commitlog fsync failed ({exc}); the batch is in the log "
                                "but not known to be durable")
            for waiter in batch:
                waiter.error = error
        self.rounds += 1
        self.round_requests += len(batch)
        with self._lock:
            for waiter in batch:
                waiter.done = True
                if waiter is not me:
                    waiter.wakeup.release()

    def _append_group(self, batch: list[_Waiter]) -> list[tuple[int, list[int]] | StoreError]:
        try:
            return self.commitlog.append_group([w.request for w in batch], self.store_host)
        except Exception as exc:
            log.exception("commitlog write failed")
            failure = FlushFailed(f"commitlog write failed ({exc}); nothing was appended")
            return [failure] * len(batch)

    def _step_down(self) -> None:
        """Hand leadership to the oldest waiter, or release it if nobody waits. An appender
        that queued just before the release found the lock held, so look again after it."""
        while True:
            with self._lock:
                if self._pending:
                    successor = self._pending[0]
                    successor.lead = True
                    successor.wakeup.release()
                    return
                self._leader.release()
            if not self._pending or not self._leader.acquire(blocking=False):
                return

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
            dirty = self.commitlog.max_offset - self.commitlog.flushed_offset
            now = time.monotonic()
            full_due = now - last_full >= self.full_interval_s
            if dirty >= self.least_bytes or (full_due and dirty > 0):
                self._flush_and_announce()
            if full_due:
                last_full = now
