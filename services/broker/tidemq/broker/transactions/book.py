"""The transaction book: half messages and op records folded into "what is still open".

Pure state, no I/O: the service appends half messages (RMQ_SYS_TRANS_HALF_TOPIC) and op records
(RMQ_SYS_TRANS_OP_HALF_TOPIC) and applies them here in the same order; a restart or a promoted
replica rebuilds the same book by replaying both topics from the saved progress. A half message
is keyed by its queue offset in the half topic. An op record says what happened to one:

    C committed   R rolled back   D discarded (checked too often)   K checked back once

`advance()` moves the progress past the resolved prefix of the half topic, so a replay starts
there and not at the beginning of history; the op topic's progress is the first op record that
still refers to a half message at or past it. Op records just before it (RECENT_KEPT) are
replayed too, only to remember how those transactions ended.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass

COMMIT, ROLLBACK, DISCARD, CHECKED = "C", "R", "D", "K"
FINAL_OPS = frozenset({COMMIT, ROLLBACK, DISCARD})
# Resolutions remembered below the progress, so a repeated EndTransaction gets a precise answer;
# a replay reads this many op records before the op progress to remember them again.
RECENT_KEPT = 10_000


class TxnState(enum.Enum):
    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"
    RESOLVED = "RESOLVED"    # resolved before the saved progress; which way is no longer kept
    UNKNOWN = "UNKNOWN"      # no half message at this offset


STATE_OF_OP = {COMMIT: TxnState.COMMITTED, ROLLBACK: TxnState.ROLLED_BACK,
               DISCARD: TxnState.DISCARDED}


def op_body(kind: str, half_offset: int) -> bytes:
    """An op record's body: the kind and the half message's queue offset ("C:42")."""
    return f"{kind}:{half_offset}".encode()


def parse_op(body: bytes) -> tuple[str, int]:
    kind, _, offset = bytes(body).decode().partition(":")
    return kind, int(offset)


@dataclass(slots=True)
class HalfMessage:
    half_offset: int          # queue offset in the half topic
    physical_offset: int      # where the record is in the CommitLog
    producer_group: str
    transaction_id: str
    stored_ms: int
    checks: int = 0
    last_check_ms: int = 0


class Action(enum.Enum):
    CHECK = "CHECK"
    DISCARD = "DISCARD"


class TransactionBook:
    def __init__(self, half_progress: int = 0, op_progress: int = 0) -> None:
        self.half_progress = half_progress   # every half message below is resolved
        self.op_progress = op_progress       # op records below refer only to those
        self.pending: dict[int, HalfMessage] = {}
        self.resolved: dict[int, str] = {}   # half offset >= half_progress -> C/R/D
        self.recent: OrderedDict[int, str] = OrderedDict()  # resolved below the progress
        self._op_refs: dict[int, int] = {}   # op offset >= op_progress -> its half offset
        self._op_next = op_progress

    # -- applying the log ----------------------------------------------------------------------

    def add_half(self, half: HalfMessage) -> None:
        if half.half_offset >= self.half_progress and half.half_offset not in self.resolved:
            self.pending.setdefault(half.half_offset, half)

    def apply_op(self, op_offset: int, kind: str, half_offset: int, stored_ms: int) -> None:
        self._op_next = max(self._op_next, op_offset + 1)
        if half_offset < self.half_progress:
            if kind in FINAL_OPS:
                self.recent.setdefault(half_offset, kind)
                if len(self.recent) > RECENT_KEPT:
                    self.recent.popitem(last=False)
            return
        self._op_refs[op_offset] = half_offset
        if kind in FINAL_OPS:
            if half_offset not in self.resolved:
                self.resolved[half_offset] = kind
            self.pending.pop(half_offset, None)
        elif kind == CHECKED:
            half = self.pending.get(half_offset)
            if half is not None:
                half.checks += 1
                half.last_check_ms = max(half.last_check_ms, stored_ms)

    # -- questions -----------------------------------------------------------------------------

    def state(self, half_offset: int) -> TxnState:
        if half_offset in self.pending:
            return TxnState.PENDING
        kind = self.resolved.get(half_offset) or self.recent.get(half_offset)
        if kind is not None:
            return STATE_OF_OP[kind]
        if 0 <= half_offset < self.half_progress:
            return TxnState.RESOLVED
        return TxnState.UNKNOWN

    def due(self, now_ms: int, *, timeout_ms: int, interval_ms: int,
            max_checks: int) -> list[tuple[HalfMessage, Action]]:
        """Half messages whose next check-back (or discard, past `max_checks`) is due: the first
        check `timeout_ms` after the half was stored, the next ones `interval_ms` apart."""
        found = []
        for half in self.pending.values():
            due_ms = (half.stored_ms + timeout_ms if half.checks == 0
                      else half.last_check_ms + interval_ms)
            if due_ms <= now_ms:
                found.append((half, Action.DISCARD if half.checks >= max_checks
                              else Action.CHECK))
        return found

    # -- progress ------------------------------------------------------------------------------

    def advance(self) -> bool:
        """Move the progress past resolved half messages; True if it moved."""
        start = self.half_progress
        while self.half_progress in self.resolved:
            self.recent[self.half_progress] = self.resolved.pop(self.half_progress)
            self.half_progress += 1
        while len(self.recent) > RECENT_KEPT:
            self.recent.popitem(last=False)
        if self.half_progress == start:
            return False
        self._op_refs = {op: half for op, half in self._op_refs.items()
                         if half >= self.half_progress}
        self.op_progress = min(self._op_refs, default=self._op_next)
        return True
