"""LoopAppender: SYNC_FLUSH appends of one asyncio event loop, group-committed.

RocketMQ's asyncPutMessage with its GroupCommitService: the appends a loop iteration produced
are written to the CommitLog as one group on the loop itself (one lock hold, one stamping
pass), and only the fsync goes to another thread, a Syncer, which fdatasyncs everything
written so far and wakes the loop through an eventfd; the loop then resolves every append the
fsync covered, and dispatches the group (consume queues, index) while the fsync runs. No
thread per append, no thread hand-off to write or dispatch, and once `EAGER_GROUP` appends
wait they are written at once, so that their fsync runs while the loop still serves the
other appenders: fsync time overlaps the loop's work instead of adding to it.

An append waits at most `sync_flush_timeout` and then reports FLUSH_DISK_TIMEOUT (its bytes
are in the log, not known durable) — sooner if its caller must be answered sooner: an append
may carry `answer_by` (loop time; the request's deadline less a margin, broker/deadlines.py),
and a written group whose earliest `answer_by` comes first also waits in a heap served by the
same timer. A failed fsync fails every append it covered. This is the
one place where a SYNC_FLUSH append becomes acknowledged: with a replication gate set
(store/ha/gate.py) a synced group is handed to the gate instead of answered, and the gate
answers it once the in-sync replicas confirmed it (or FLUSH_SLAVE_TIMEOUT). Only the gate it
was written under may: a group whose fsync ends after that gate was deposed or replaced (its
master stepped down meanwhile, and may be master again) answers FLUSH_SLAVE_TIMEOUT — stored,
not confirmed — never PUT_OK (issue #36).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import os
from collections import deque
from collections.abc import Callable

from tidemq.common.logs import get_logger

from .commitlog import Appended, AppendRequest, CommitLog
from .config import AppendResult, AppendStatus, FlushFailed, StoreClosed, StoreError
from .flush import FlushService, queue_of
from .ha.gate import ReplicationGate, answer_due
from .syncer import Syncer

log = get_logger(__name__)

# Write a group as soon as this many appends wait (else when the loop has run its ready
# callbacks): 64 one-message appenders then form two cohorts, each written while the other's
# fsync runs; smaller groups pay more fsyncs (figures: docs/storage.md, "Measured figures").
EAGER_GROUP = 32


class _Append:
    __slots__ = ("request", "future", "outcome", "answer_by", "gate")

    def __init__(self, request: AppendRequest, future: asyncio.Future,
                 answer_by: float = math.inf, gate: ReplicationGate | None = None) -> None:
        self.request = request
        self.future = future
        self.outcome: Appended | StoreError | None = None   # set when written
        self.answer_by = answer_by   # loop time its caller must be answered by (inf: none)
        self.gate = gate   # the replication gate it was checked against (None: none)


# A written group with an append checked against another gate than the one it was written
# under: its master stepped down between the two (answered FLUSH_SLAVE_TIMEOUT once synced).
_STEPPED_DOWN = object()


_tie = itertools.count()   # heap order among equal answer-by times


class LoopAppender:
    def __init__(self, loop: asyncio.AbstractEventLoop, flusher: FlushService,
                 commitlog: CommitLog, dispatch: Callable[[], None],
                 syncer_factory: Callable[[int], Syncer] = Syncer,
                 gate_of: Callable[[], ReplicationGate | None] = lambda: None,
                 on_written: Callable[[], None] = lambda: None) -> None:
        self.loop = loop
        self.on_written = on_written   # once per written group (the HA stream's wake-up)
        self.gate_of = gate_of   # the store's replication gate, if any (read per fsync)
        self.flusher = flusher
        self.commitlog = commitlog
        self.dispatch = dispatch
        self.timeout_s = flusher.timeout_s
        self._unwritten: list[_Append] = []
        self._unwritten_since = 0.0   # loop time of the oldest unwritten append
        # (end, group, earliest answer_by, the replication gate it was written under)
        self._syncing: deque[tuple[int, list[_Append], float, object]] = deque()
        self._synced_to = 0   # the greatest log end an fsync answered (or failed)
        # sync_flush_timeout, kept per written group (its appends arrived within one loop
        # iteration) with one timer for the oldest: no per-append timer or deadline entry.
        self._deadlines: deque[tuple[float, list[_Append]]] = deque()
        # Written groups with a caller to answer before that: (earliest answer_by, tie,
        # group's log end, group), served by the same timer; skipped once the group synced.
        self._early: list[tuple[float, int, int, list[_Append]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._notify_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._syncer = syncer_factory(self._notify_fd)
        self._closed = False
        loop.add_reader(self._notify_fd, self._on_synced)

    def append(self, request: AppendRequest, answer_by: float = math.inf,
               gate: ReplicationGate | None = None) -> asyncio.Future[AppendResult]:
        """One producer batch; the future gets its AppendResult (PUT_OK once fsynced,
        FLUSH_DISK_TIMEOUT after the timeout or at `answer_by`, loop time, if sooner), or its
        StoreError, or FlushFailed if the fsync that covered it failed. A future, not a
        coroutine: no frames to resume. `gate`: the replication gate the store checked it
        against (its answer is that gate's, or FLUSH_SLAVE_TIMEOUT once that gate is gone)."""
        future = self.loop.create_future()
        if self._closed:
            future.set_exception(StoreClosed("the store is shutting down: not appended"))
            return future
        unwritten = self._unwritten
        unwritten.append(_Append(request, future, answer_by, gate))
        if len(unwritten) == 1:
            self._unwritten_since = self.loop.time()
            self.loop.call_soon(self._write)
        elif len(unwritten) >= EAGER_GROUP:
            self._write()
        return future

    def _write(self) -> None:
        """Write the waiting appends as one group, have the syncer fsync them and dispatch
        them while it does."""
        if self._closed:
            return   # _detach answers them: the log may be closed already
        group, self._unwritten = self._unwritten, []
        if not group:
            return
        # One run per queue in the log (stable: a queue keeps its arrival order), so the
        # dispatcher writes each queue's units of the group with one copy, not one each.
        group.sort(key=queue_of)
        start = self.commitlog.max_offset
        outcomes = self.flusher.write([pending.request for pending in group])
        written = []
        for pending, outcome in zip(group, outcomes, strict=True):
            pending.outcome = outcome
            if isinstance(outcome, StoreError):
                pending.future.set_exception(outcome)
            else:
                written.append(pending)
        if not written:
            return
        end = self.commitlog.max_offset
        self.on_written()   # slaves fetch the group while it is fsynced here
        answer_by = min(pending.answer_by for pending in written)
        written_under = self.gate_of()
        if any(p.gate is not None and p.gate is not written_under for p in written):
            written_under = _STEPPED_DOWN   # checked under a gate gone before the write
        self._syncing.append((end, written, answer_by, written_under))
        deadline = self._unwritten_since + self.timeout_s
        self._deadlines.append((deadline, written))
        if answer_by < deadline:
            heapq.heappush(self._early, (answer_by, next(_tie), end, written))
        self._arm()
        try:
            self._syncer.request(self.commitlog.segment_fds(start, end), end)
        except Exception as exc:   # closed by a shutdown, or out of descriptors
            log.exception("commitlog fsync request failed")
            self._syncing.pop()   # only this group: earlier ones still wait for their fsync
            self._deadlines.pop()
            error = FlushFailed(f"commitlog fsync could not be requested ({exc}); the batch "
                                "is in the log but not known to be durable")
            for pending in written:
                pending.future.set_exception(error)
        self.dispatch()   # while the syncer's fsync runs

    def _on_synced(self) -> None:
        """The eventfd: resolve the appends every finished fsync covered."""
        with contextlib.suppress(BlockingIOError):   # already read by an earlier call
            os.eventfd_read(self._notify_fd)
        if self._timer is not None and self._timer_at <= self.loop.time():
            self._timer.cancel()   # past their deadline: FLUSH_DISK_TIMEOUT, even if synced now
            self._expire_due()
        for ticket, errno in self._syncer.poll():
            if errno:
                log.error("commitlog fsync failed", error=os.strerror(errno))
                self._fail(ticket, FlushFailed(f"commitlog fsync failed ({os.strerror(errno)});"
                                               " the batch is in the log but not known to be "
                                               "durable"))
                continue
            self.commitlog.mark_flushed(ticket)
            acknowledged = 0
            gate = self.gate_of()
            for end, group, answer_by, written_under in self._synced(ticket):
                if written_under is None:   # no replication when it was written
                    acknowledged += _settle(group, AppendStatus.PUT_OK)
                elif written_under is not gate or not written_under.master:
                    # written by a master that stepped down (and maybe took mastership again,
                    # with a new gate) while the fsync ran: stored here, not confirmed by the
                    # replicas of the tenure it was written in — never PUT_OK (issue #36)
                    acknowledged += _settle(group, AppendStatus.FLUSH_SLAVE_TIMEOUT)
                elif not gate.sync:
                    acknowledged += _settle(group, gate.ack_status())
                else:   # answered by the gate once the in-sync replicas have the bytes
                    gate.hold(end, group, _settle, answer_by)
                    acknowledged += len(group)
            self.flusher.count_synced(acknowledged)

    def _fail(self, ticket: int, error: FlushFailed) -> None:
        for _, group, _, _ in self._synced(ticket):
            _fail_waiting(group, error)

    def _synced(self, ticket: int) -> list[tuple[int, list[_Append], float, object]]:
        """Take the groups an fsync up to `ticket` covered off both queues (none is kept past
        its answer: a retained future costs every garbage collection)."""
        syncing, deadlines, groups = self._syncing, self._deadlines, []
        self._synced_to = max(self._synced_to, ticket)
        while syncing and syncing[0][0] <= ticket:
            entry = syncing.popleft()
            if deadlines and deadlines[0][1] is entry[1]:
                deadlines.popleft()
            groups.append(entry)
        early = self._early
        if not syncing:
            early.clear()   # every entry's group synced: none is due here any more
        while early and early[0][2] <= ticket:   # synced: no future kept for the GC to walk
            heapq.heappop(early)
        return groups

    def _arm(self) -> None:
        """One timer, at the earliest of the oldest group's deadline and the earliest
        caller's answer-by time of a group still syncing."""
        due = min(self._deadlines[0][0] if self._deadlines else math.inf,
                  self._early[0][0] if self._early else math.inf)
        if due == math.inf or (self._timer is not None and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self.loop.call_at(due, self._expire_due), due

    def _expire_due(self) -> None:
        """FLUSH_DISK_TIMEOUT for the appends of groups past their deadline, and for those
        whose caller must be answered now (of groups not synced yet)."""
        self._timer, self._timer_at = None, math.inf
        deadlines, early, now = self._deadlines, self._early, self.loop.time()
        while deadlines and deadlines[0][0] <= now:
            _settle(deadlines.popleft()[1], AppendStatus.FLUSH_DISK_TIMEOUT)
        while early and early[0][0] <= now:
            _, _, end, group = heapq.heappop(early)
            if end <= self._synced_to:
                continue   # synced: the gate (if any) answers it by the same answer_by
            later = answer_due(group, _settle, now, AppendStatus.FLUSH_DISK_TIMEOUT)
            if later < math.inf:
                heapq.heappush(early, (later, next(_tie), end, group))
        self._arm()

    def close(self) -> None:
        """Stop the syncer (after the fsyncs asked for), then, on the loop's thread, answer
        every append still waiting (PUT_OK for those the last fsyncs covered, StoreClosed for
        the others) and let go of the eventfd. On a closed loop nobody waits any more."""
        self._closed = True
        self._syncer.close()
        if self.loop.is_closed():
            os.close(self._notify_fd)
            return
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._detach()
        else:
            self.loop.call_soon_threadsafe(self._detach)

    def _detach(self) -> None:
        self._on_synced()   # what the syncer finished while it closed
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        waiting = [*self._unwritten, *(p for _, group, _, _ in self._syncing for p in group)]
        _fail_waiting(waiting, StoreClosed("the store shut down before this batch was known to "
                                           "be durable (it may be in the log)"))
        self._unwritten, self._syncing, self._deadlines = [], deque(), deque()
        self._early = []
        self.loop.remove_reader(self._notify_fd)
        os.close(self._notify_fd)


def _settle(group: list[_Append], status: AppendStatus) -> int:
    """Give each still-waiting append of a written group its result; returns how many."""
    settled = 0
    for pending in group:
        future = pending.future
        if not future.done():
            first, physical_offsets, end = pending.outcome  # type: ignore[misc]
            future.set_result(AppendResult(status, first, physical_offsets, end))
            settled += 1
    return settled


def _fail_waiting(group: list[_Append], error: StoreError) -> None:
    for pending in group:
        if not pending.future.done():
            pending.future.set_exception(error)
