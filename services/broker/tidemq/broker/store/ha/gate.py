"""ReplicationGate: where a master's append waits for its in-sync replicas (SYNC_MASTER).

How the broker's role layer (`tidemq.broker.replication.host`) uses it: on becoming master, `gate = ReplicationGate(tracker, store.commitlog_max_offset,
sync=..., timeout_ms=...)`, `store.set_replication_gate(gate)` and `HAServer(store, gate, ...)`;
on stepping down `gate.depose()` (waiting appends answer FLUSH_SLAVE_TIMEOUT, new ones
NotMaster) and `store.set_replication_gate(None)`.

The store calls `check_writable()` before appending (O(1): NotMaster, NotEnoughReplicas) and,
once a group of appends is locally acknowledged, `hold(end_offset, group, settle)`: one entry
per group (not per append) in a deque per event loop, ordered by end offset and by time. The
HA server calls `on_progress()` when an ack moves the confirmed offset; every group below it
is answered at once (bulk, no task or timer per append); one timer per loop answers the oldest
groups FLUSH_SLAVE_TIMEOUT when `sync_replication_timeout_ms` passed. ASYNC_MASTER
(`sync=False`): the store does not hold anything.

A caller may need its answer sooner than that: each held append carries `answer_by`, the
loop time by which its caller must be answered (the request's deadline less a margin,
broker/deadlines.py; inf = none). A group whose earliest `answer_by` falls before the
configured wait also goes into a heap per loop, served by the same timer: at that time the
appends of the group that are due are answered FLUSH_SLAVE_TIMEOUT, the others wait on. The
batch stays in the log either way (RocketMQ's FLUSH_SLAVE_TIMEOUT: stored on the master,
not confirmed by its replicas).

A SYNC gate is also the store's read fence: `readable_end()` (the greatest confirmed offset
seen, starting at the master's log end when the store begins to serve as master) bounds what
readers see (store/reader.py), and `on_readable()` is called when `on_progress` moves it,
which wakes long polls held on records not yet readable.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ..config import AppendStatus, NotEnoughReplicas, NotMaster
from .in_sync import InSyncTracker

# settle(group, status) -> how many appends it answered (loop_appender._settle)
Settle = Callable[[list[Any], AppendStatus], int]


class _LoopWaiters:
    """The held groups of one event loop; touched only on that loop's thread."""

    __slots__ = ("loop", "held", "early", "timer", "timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: deque[tuple[int, float, list[Any], Settle]] = deque()  # end, deadline, ...
        # Groups whose callers must be answered before their `deadline` above:
        # (earliest answer_by, tie-breaker, end offset, group, settle). Entries of released
        # groups leave from the top as their groups are released (callers' deadlines mostly
        # come in arrival order), the rest when due or when `held` empties; answering them
        # again is a no-op.
        self.early: list[tuple[float, int, int, list[Any], Settle]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf

    def arm(self, expire: Callable[[_LoopWaiters], None]) -> None:
        """One timer, at the earliest of the oldest group's deadline and the earliest
        caller's answer-by time."""
        due = min(self.held[0][1] if self.held else math.inf,
                  self.early[0][0] if self.early else math.inf)
        if due == math.inf or (self.timer is not None and self.timer_at <= due):
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.timer_at = self.loop.call_at(due, expire, self), due

    def disarm(self) -> None:
        self.early.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer, self.timer_at = None, math.inf


_tie = itertools.count()   # heap order among equal answer-by times (groups are not ordered)


class ReplicationGate:
    def __init__(self, tracker: InSyncTracker, log_end: Callable[[], int], *, sync: bool = True,
                 timeout_ms: int = 5000) -> None:
        self.tracker = tracker
        self.log_end = log_end
        self.sync = sync
        self.timeout_s = timeout_ms / 1000
        self.master = True
        self._loops: dict[asyncio.AbstractEventLoop, _LoopWaiters] = {}
        self._lock = threading.Lock()   # _loops is written from the loops that append
        # The read fence (Kafka's high watermark as readers see it): the greatest confirmed
        # offset seen, so it never moves back when the in-sync set is too small to confirm.
        self._readable_end = 0
        self._readable_lock = threading.Lock()
        self._notified_end = 0   # the readable end the last on_readable() told of
        self.on_readable: Callable[[], None] = lambda: None   # the readable end advanced

    # -- before an append ------------------------------------------------------------------
    def check_writable(self) -> None:
        if not self.master:
            raise NotMaster("this broker is no longer the master of its replica group; "
                            "refresh the route and send to the new master")
        tracker = self.tracker
        if len(tracker.in_sync) < tracker.min_in_sync:
            raise NotEnoughReplicas(
                f"only {len(tracker.in_sync)} replicas are in sync and min_in_sync_replicas is "
                f"{tracker.min_in_sync}: nothing was appended")

    def may_acknowledge(self) -> bool:
        """Asked again when an append is answered, not only before it: a master frozen in
        between (SIGSTOP, a stalled VM) may have been replaced meanwhile (LeasedGate)."""
        return self.master

    def ack_status(self) -> AppendStatus:
        return AppendStatus.PUT_OK if self.may_acknowledge() else AppendStatus.FLUSH_SLAVE_TIMEOUT

    # -- after the local acknowledgement ---------------------------------------------------
    def confirmed_offset(self) -> int:
        """-1 while the in-sync set is too small to confirm anything."""
        tracker = self.tracker
        if not self.master or len(tracker.in_sync) < tracker.min_in_sync:
            return -1
        return tracker.confirmed_offset(self.log_end())

    def readable_end(self) -> int:
        """The CommitLog offset consumers may read below (reader.py): every in-sync replica
        holds the records before it. Monotonic."""
        confirmed = self.confirmed_offset()
        if confirmed <= self._readable_end:
            return self._readable_end
        return self.raise_readable_end(confirmed)

    def raise_readable_end(self, offset: int) -> int:
        with self._readable_lock:
            if offset > self._readable_end:
                self._readable_end = offset
            return self._readable_end

    def hold(self, end_offset: int, group: list[Any], settle: Settle,
             answer_by: float = math.inf) -> int:
        """On the running loop: answer `group` PUT_OK once the confirmed offset reaches
        `end_offset`, FLUSH_SLAVE_TIMEOUT after the timeout — or, for each append, at its own
        `answer_by` (loop time) if that comes first. `answer_by` here is the group's
        earliest; its items carry their own (`item.answer_by`). Returns how many it answered
        now."""
        if end_offset <= self.confirmed_offset():
            return settle(group, self.ack_status())
        if not self.master:
            return settle(group, AppendStatus.FLUSH_SLAVE_TIMEOUT)
        loop = asyncio.get_running_loop()
        waiters = self._loops.get(loop)
        if waiters is None:
            with self._lock:   # a copy without closed loops (a test's loops come and go)
                loops = {k: v for k, v in self._loops.items() if not k.is_closed()}
                waiters = loops[loop] = _LoopWaiters(loop)
                self._loops = loops
        deadline = loop.time() + self.timeout_s
        waiters.held.append((end_offset, deadline, group, settle))
        if answer_by < deadline:
            heapq.heappush(waiters.early, (answer_by, next(_tie), end_offset, group, settle))
        waiters.arm(self._expire)
        return 0

    def on_progress(self) -> None:
        """Acks or the in-sync set changed: answer every held group the confirmed offset
        covers, on its own loop (at once for the caller's loop, scheduled for the others)."""
        confirmed = self.confirmed_offset()
        if confirmed < 0:
            return
        if confirmed > self._notified_end:   # not _readable_end: a reader may have raised it
            self._notified_end = self.raise_readable_end(confirmed)
            self.on_readable()
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for waiters in list(self._loops.values()):
            if not waiters.held:
                continue
            if waiters.loop is current:
                _release(waiters, confirmed, self.ack_status)
            elif not waiters.loop.is_closed():
                waiters.loop.call_soon_threadsafe(_release, waiters, confirmed, self.ack_status)

    def _expire(self, waiters: _LoopWaiters) -> None:
        waiters.timer, waiters.timer_at = None, math.inf
        held, early, now = waiters.held, waiters.early, waiters.loop.time()
        while held and held[0][1] <= now:
            _, _, group, settle = held.popleft()
            settle(group, AppendStatus.FLUSH_SLAVE_TIMEOUT)
        while early and early[0][0] <= now:
            _, _, end, group, settle = heapq.heappop(early)
            later = answer_due(group, settle, now, AppendStatus.FLUSH_SLAVE_TIMEOUT)
            if later < math.inf:
                heapq.heappush(early, (later, next(_tie), end, group, settle))
        if not held:
            waiters.disarm()
        waiters.arm(self._expire)

    def depose(self) -> None:
        """No longer master: refuse new appends and answer every held one FLUSH_SLAVE_TIMEOUT
        (a deposed master acknowledges nothing more)."""
        self.master = False
        self.close()

    def close(self) -> None:
        """Answer every held group FLUSH_SLAVE_TIMEOUT (the gate is being replaced)."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for waiters in list(self._loops.values()):
            if waiters.loop is current:
                _drain(waiters)
            elif not waiters.loop.is_closed():
                waiters.loop.call_soon_threadsafe(_drain, waiters)


def answer_due(group: list[Any], settle: Settle, now: float, status: AppendStatus) -> float:
    """Answer `status` to the items of `group` whose `answer_by` passed; the earliest
    `answer_by` of the others (inf: none). Items already answered are skipped by `settle`."""
    due = [item for item in group if item.answer_by <= now]
    if due:
        settle(due, status)
    return min((item.answer_by for item in group if item.answer_by > now), default=math.inf)


def _release(waiters: _LoopWaiters, confirmed: int,
             ack_status: Callable[[], AppendStatus]) -> None:
    held, early = waiters.held, waiters.early
    while held and held[0][0] <= confirmed:
        _, _, group, settle = held.popleft()
        settle(group, ack_status())
    if not held:
        waiters.disarm()
    while early and early[0][2] <= confirmed:   # released just now: no future kept for GC
        heapq.heappop(early)


def _drain(waiters: _LoopWaiters) -> None:
    held = waiters.held
    while held:
        _, _, group, settle = held.popleft()
        settle(group, AppendStatus.FLUSH_SLAVE_TIMEOUT)
    waiters.disarm()
