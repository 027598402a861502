"""FlushService: when CommitLog pages reach the disk.

ASYNC_FLUSH (RocketMQ's FlushRealTimeService): every `flush_interval_ms` a thread fsyncs if at
least `flush_least_pages` pages are dirty, and whatever is dirty every `full_flush_interval_ms`;
appends never wait for it or wake it, so fsyncs stay few and large under load.
SYNC_FLUSH with group commit, for appender threads: appends queue up and are appended, fsynced
and acknowledged in rounds, one CommitLog write and one fsync per round, run by one of the
appender threads (the leader); so many concurrent appenders share one fsync and never contend
on the log's lock. Asynchronous appends (an asyncio server's) take another road to the same
guarantee: loop_appender.py.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tidemq.common.logs import get_logger

from .commitlog import AppendRequest, CommitLog
from .config import FlushFailed, FlushMode, StoreConfig, StoreError

log = get_logger(__name__)
PAGE_SIZE = 4096
LEADER_ROUNDS = 4   # SYNC_FLUSH: rounds a leader runs at most before handing over


class Waiter:
    """One SYNC_FLUSH append waiting for its round; its thread sleeps on `wakeup`, which is
    released to wake it once."""

    __slots__ = ("request", "outcome", "wakeup", "done", "lead", "error")

    def __init__(self, request: AppendRequest) -> None:
        self.request = request
        self.outcome: tuple[int, list[int]] | StoreError | None = None  # set when appended
        self.error: StoreError | None = None   # the round's write/fsync failed
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.done = False   # its round is over (durable, or failed with `error`)
        self.lead = False   # leadership was handed to it

    def result(self) -> tuple[int, list[int]]:
        """(first queue offset, physical offsets) once appended; raises the batch's own
        StoreError, or FlushFailed when its round's write or fsync failed."""
        outcome = self.outcome
        if isinstance(outcome, StoreError):
            raise outcome
        if self.error is not None:
            raise self.error
        return outcome  # type: ignore[return-value]


def queue_of(append: Any) -> tuple[str, int]:
    """The (topic, queue id) of a waiting append: a Waiter, or anything else holding an
    AppendRequest as `request` (a LoopAppender's appends)."""
    return append.request[0], append.request[1]


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
        self._pending: deque[Waiter] = deque()   # appended to without a lock (atomic)
        self._leader = threading.Lock()      # held by the appender running rounds
        self._lock = threading.Lock()        # waiter hand-over: taken, handed leadership, removed
        self._appending = threading.Lock()   # held by the leader while it drains and stamps
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.fsyncs = 0
        self.rounds = 0             # SYNC_FLUSH group commit rounds (fsyncs that acknowledge)
        self.round_requests = 0     # append calls served by those rounds

    def start(self) -> None:
        if self.sync:  # appender threads lead their own rounds
            return
        self._thread = threading.Thread(target=self._run_async, name="store-flush", daemon=True)
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
        waiter = Waiter((topic, queue_id, records, record_count))
        self._pending.append(waiter)
        if self._leader.acquire(blocking=False):
            self._lead(waiter)
        elif not waiter.wakeup.acquire(timeout=max(0.0, deadline - time.monotonic())):
            late = self.give_up(waiter)
            if late is not None:
                return late
            if waiter.lead:
                self._lead(waiter)
        elif waiter.lead:
            self._lead(waiter)
        first, physical_offsets = waiter.result()
        return first, physical_offsets, time.monotonic() <= deadline

    def give_up(self, waiter: Waiter) -> tuple[int, list[int], bool] | None:
        """The wait timed out: append the batch now if no round took it yet, and report it as
        not known durable (FLUSH_DISK_TIMEOUT). None if its round finished meanwhile."""
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
            outcome = self._append_group([waiter.request])[0]
            self.on_appended()
        if isinstance(outcome, StoreError):
            raise outcome
        first, physical_offsets = outcome  # type: ignore[misc]
        return first, physical_offsets, False

    def _lead(self, me: Waiter) -> None:
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

    def _round(self, me: Waiter | None) -> None:
        with self._appending:
            with self._lock:
                pop = self._pending.popleft
                batch = [pop() for _ in range(len(self._pending))]
            # One run per queue in the log (stable: a queue keeps its arrival order), so the
            # dispatcher writes each queue's units of the round with one copy, not one each.
            batch.sort(key=queue_of)
            outcomes = self._append_group([waiter.request for waiter in batch])
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

    def write(self, requests: list[AppendRequest]) -> list[tuple[int, list[int]] | StoreError]:
        """Append a group of batches to the log now; the caller has it fsynced and dispatched.
        Each batch's (first queue offset, physical offsets), or its StoreError; FlushFailed
        for all when the write itself failed."""
        return self._append_group(requests)

    def count_synced(self, appends: int) -> None:
        """A group commit made by others (a LoopAppender's syncer) acknowledged `appends`
        (none when a timeout or a failure had answered them already)."""
        self.fsyncs += 1
        if appends:
            self.rounds += 1
            self.round_requests += appends

    def _append_group(self, requests: list[AppendRequest]
                      ) -> list[tuple[int, list[int]] | StoreError]:
        try:
            return self.commitlog.append_group(requests, self.store_host)
        except Exception as exc:
            log.exception("commitlog write failed")
            failure = FlushFailed(f"commitlog write failed ({exc}); nothing was appended")
            return [failure] * len(requests)

    def _step_down(self) -> None:
        """Hand leadership to the oldest waiting appender, or release it if nobody waits. An
        appender that queued just before the release found the lock held, so look again
        after it."""
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
