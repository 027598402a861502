"""PopBook: what is popped, in flight and due, as a projection of the revive log.

Pop consumption keeps no state of its own: every pop appends a CHECKPOINT record (group, topic,
queue, the popped queue offsets, where the next pop of that queue starts, the invisible-until
time) to this broker's queue of the revive topic, every ack / change of invisible time / revive
appends an ACK record naming (checkpoint, queue offset); acks that are logged together (a batch
ack, or the acks of calls that arrive together) are one ACKS record naming all of them. This class is the in-memory view of
that log: `apply` folds one record in, in log order, so replaying the revive queue from its
start after a restart (or on a new master that received it by replication) rebuilds exactly
the state the old process had (RocketMQ's PopCheckPoint / AckMsg on REVIVE_LOG).

A checkpoint's id is its queue offset in the revive queue: unique per broker and increasing,
which is what tells a handle that was acked already (id known, message no longer in flight)
from one never issued (id beyond the last checkpoint).

The log is compacted by SNAPSHOT records: the whole book as it stood after the revive record
`upto`, so a replay starts at the latest snapshot instead of the queue's start, and the cursors
and in-flight messages of old checkpoints survive the CommitLog's retention deleting them. A
snapshot is a head record (JSON, `parts` = how many follow) and that many part records in the
same append: the zlib-compressed JSON of the book cut to fit the store's message size (a part
starts with a NUL byte, which `apply` skips), so a large book never fails to snapshot.

What the book remembers stays bounded: acked handles leave nothing behind (DONE is "checkpoint
known, not in flight"), and an expired handle is remembered for EXPIRED_KEPT_MS after it expired
and at most MAX_EXPIRED_KEPT of them (oldest forgotten first; an ack of a forgotten one answers
as for an acked one). Before this, every expired handle was kept for an hour and the live book
never advanced past a snapshot record it had not applied: at 1 000 msgs/s with one message in
ten left to expire the broker's anonymous memory grew by about 18 MiB a minute.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import NamedTuple

CHECKPOINT = "ck"
ACK = "ack"
ACKS = "acks"  # the acks of one batch, `h` = [[checkpoint, queue offset], ...], all ACKED
SNAPSHOT = "snap"
# An expired handle is remembered this long after it expired (an ack then says EXPIRED; later,
# DONE), and at most this many of them (the oldest forgotten first), so the set stays bounded.
EXPIRED_KEPT_MS = 10 * 60 * 1000
MAX_EXPIRED_KEPT = 100_000
SNAPSHOT_PART = b"\0"  # the first byte of a snapshot part record (not JSON: `apply` skips it)
# why an ACK record was written
ACKED, REVIVED, MOVED = "acked", "revived", "moved"  # moved: change of invisible time
REDO = "redo"  # an orderly message's invisible time passed: delivered again from its queue

Key = tuple[str, str, int]  # (group, topic, queue_id)


class InFlight(NamedTuple):
    group: str
    topic: str
    queue_id: int
    invisible_until_ms: int
    orderly: bool = False


class HandleState:
    IN_FLIGHT = "IN_FLIGHT"
    DONE = "DONE"          # acked: acking again is a no-op
    EXPIRED = "EXPIRED"    # its invisible time passed (the message is, or will be, delivered
    #                        again) or it was replaced by change of invisible time
    UNKNOWN = "UNKNOWN"    # no such checkpoint was ever written here


def checkpoint_body(group: str, topic: str, queue_id: int, offsets: list[int], next_offset: int,
                    invisible_until_ms: int) -> bytes:
    return json.dumps({"t": CHECKPOINT, "g": group, "topic": topic, "q": queue_id,
                       "offs": offsets, "next": next_offset, "until": invisible_until_ms},
                      separators=(",", ":")).encode()


def acks_entry(handles: list[tuple[int, int]]) -> dict:
    """One record for a batch of acks (RocketMQ logs a batch ack as one record of offsets):
    a pop of 32 acked together costs one revive record, not 32."""
    return {"t": ACKS, "h": [list(handle) for handle in handles]}


def closing_entry(checkpoint: int, flight: InFlight, queue_offset: int, why: str,
                  at_ms: int) -> dict:
    """An ACK record that names its queue (the in-flight entry may be gone when it is applied)
    and when the handle expired (`at`: how long it is remembered counts from there)."""
    return {"t": ACK, "ck": checkpoint, "off": queue_offset, "why": why, "g": flight.group,
            "topic": flight.topic, "q": flight.queue_id, "at": at_ms}


class PopBook:
    def __init__(self, applied: int = -1) -> None:
        self.cursors: dict[Key, int] = {}                  # where the next pop of a queue reads
        self.in_flight: dict[tuple[int, int], InFlight] = {}  # (checkpoint, queue offset)
        self.expired: dict[tuple[int, int], int] = {}       # handle -> when it expired, ms
        self.last_checkpoint = -1
        # Orderly pop (topics defined with "order"): deliveries so far of each unacked message,
        # and per queue the expired offsets to hand out again before anything newer.
        self.attempts: dict[tuple[str, str, int, int], int] = {}
        self.redo: dict[Key, set[int]] = {}
        self._applied = applied     # highest revive-queue offset applied in order
        self._ahead: set[int] = set()  # applied out of order (our own appends, before catch-up)

    def apply(self, revive_offset: int, body: bytes | dict) -> None:
        """Fold the revive record at `revive_offset` in (each offset at most once)."""
        if revive_offset <= self._applied or revive_offset in self._ahead:
            return
        if isinstance(body, bytes | bytearray) and body[:1] == SNAPSHOT_PART:
            entry = {}
        else:
            entry = json.loads(body) if isinstance(body, bytes | bytearray) else body
        if entry.get("t") == CHECKPOINT:
            key = (entry["g"], entry["topic"], entry["q"])
            self.cursors[key] = max(self.cursors.get(key, 0), entry["next"])
            orderly = bool(entry.get("ord"))
            flight = InFlight(entry["g"], entry["topic"], entry["q"], entry["until"], orderly)
            for offset in entry["offs"]:  # one checkpoint's messages share their InFlight
                self.in_flight[(revive_offset, offset)] = flight
                if orderly:
                    self.attempts[(*key, offset)] = self.attempts.get((*key, offset), 0) + 1
                    self.redo.get(key, set()).discard(offset)
            self.last_checkpoint = max(self.last_checkpoint, revive_offset)
        elif entry.get("t") == ACKS:
            for checkpoint, offset in entry["h"]:
                flight = self.in_flight.pop((checkpoint, offset), None)
                if flight is not None:
                    self.attempts.pop((flight.group, flight.topic, flight.queue_id, offset),
                                      None)
        elif entry.get("t") == ACK:
            handle = (entry["ck"], entry["off"])
            flight = self.in_flight.pop(handle, None)
            why = entry.get("why")
            if why in (REVIVED, MOVED, REDO):  # the handle is dead, not the message
                self._remember_expired(
                    handle, entry.get("at", flight.invisible_until_ms if flight else 0))
            key = ((entry["g"], entry["topic"], entry["q"]) if "g" in entry else
                   (flight.group, flight.topic, flight.queue_id) if flight else None)
            if why == REDO:
                self.redo.setdefault(key, set()).add(entry["off"])
            elif why in (ACKED, REVIVED) and key is not None:
                self.attempts.pop((*key, entry["off"]), None)
        self._ahead.add(revive_offset)
        while self._applied + 1 in self._ahead:
            self._applied += 1
            self._ahead.discard(self._applied)

    @property
    def applied(self) -> int:
        """Every revive record up to this offset has been applied."""
        return self._applied

    def cursor(self, key: Key) -> int | None:
        return self.cursors.get(key)

    def state(self, checkpoint: int, queue_offset: int, now_ms: int) -> HandleState | str:
        flight = self.in_flight.get((checkpoint, queue_offset))
        if flight is not None:
            return HandleState.IN_FLIGHT if now_ms < flight.invisible_until_ms \
                else HandleState.EXPIRED
        if (checkpoint, queue_offset) in self.expired:
            return HandleState.EXPIRED
        if 0 <= checkpoint <= self.last_checkpoint:
            return HandleState.DONE
        return HandleState.UNKNOWN

    def progress(self) -> dict[Key, tuple[int, int]]:
        """Per queue a group pops: (where its next pop reads, messages popped below that and
        not acked yet: in flight, or expired and waiting to be handed out again in order)."""
        pending = Counter((f.group, f.topic, f.queue_id) for f in self.in_flight.values())
        return {key: (cursor, pending[key] + len(self.redo.get(key, ())))
                for key, cursor in self.cursors.items()}

    def busy(self, key: Key) -> bool:
        """Something of this queue is in flight (an orderly queue then hands out nothing)."""
        return any((f.group, f.topic, f.queue_id) == key for f in self.in_flight.values())

    def take_for_revive(self, handle: tuple[int, int], now_ms: int) -> InFlight | None:
        """Mark an in-flight message expired (at `now_ms`, what its closing record says) before
        it is moved (an ack racing the move gets EXPIRED); `untake` puts it back if the move
        fails."""
        flight = self.in_flight.pop(handle, None)
        if flight is not None:
            self._remember_expired(handle, now_ms)
        return flight

    def _remember_expired(self, handle: tuple[int, int], at_ms: int) -> None:
        if handle in self.expired:
            return
        self.expired[handle] = at_ms  # insertion order is (about) expiry order
        while len(self.expired) > MAX_EXPIRED_KEPT:
            del self.expired[next(iter(self.expired))]

    def untake(self, handle: tuple[int, int], flight: InFlight) -> None:
        self.expired.pop(handle, None)
        self.in_flight[handle] = flight

    def due(self, now_ms: int, limit: int = 256) -> list[tuple[int, int, InFlight]]:
        """In-flight messages whose invisible time has passed, earliest first."""
        found = [(ck, off, f) for (ck, off), f in self.in_flight.items()
                 if f.invisible_until_ms <= now_ms]
        found.sort(key=lambda item: item[2].invisible_until_ms)
        return found[:limit]

    # -- snapshots ------------------------------------------------------------------------------

    def prune_expired(self, now_ms: int, kept_ms: int = EXPIRED_KEPT_MS) -> int:
        """Forget handles expired more than `kept_ms` ago; how many. Reads from the oldest and
        stops at the first one kept: the cost is what is forgotten."""
        cutoff, forgotten = now_ms - kept_ms, 0
        while self.expired:
            handle = next(iter(self.expired))
            if self.expired[handle] >= cutoff:
                break
            del self.expired[handle]
            forgotten += 1
        return forgotten

    def snapshot(self) -> dict:
        """The whole book as a SNAPSHOT entry: it stands for every record up to `applied`."""
        return {
            "t": SNAPSHOT, "upto": self._applied, "last": self.last_checkpoint,
            "cursors": [[*key, n] for key, n in self.cursors.items()],
            "flight": [[ck, off, f.group, f.topic, f.queue_id, f.invisible_until_ms, f.orderly]
                       for (ck, off), f in self.in_flight.items()],
            "expired": [[ck, off, until] for (ck, off), until in self.expired.items()],
            "attempts": [[*key, n] for key, n in self.attempts.items()],
            "redo": [[*key, sorted(offs)] for key, offs in self.redo.items() if offs],
        }

    def snapshot_records(self, max_size: int) -> list[bytes]:
        """The SNAPSHOT as revive records to append together: a JSON head naming how many
        parts follow, then the zlib-compressed snapshot cut into parts under `max_size`."""
        packed = zlib.compress(json.dumps(self.snapshot(), separators=(",", ":")).encode(), 6)
        room = max(1024, max_size - 1024)  # the record's header and properties
        parts = [SNAPSHOT_PART + packed[i:i + room] for i in range(0, len(packed), room)]
        head = {"t": SNAPSHOT, "upto": self._applied, "parts": len(parts), "z": "zlib"}
        return [json.dumps(head, separators=(",", ":")).encode(), *parts]

    @staticmethod
    def unpack_snapshot(head: dict, parts: list[bytes]) -> dict:
        """The snapshot entry from its head and part records (a head without parts is a whole
        snapshot, as older brokers wrote them)."""
        if "parts" not in head:
            return head
        if len(parts) != head["parts"] or any(p[:1] != SNAPSHOT_PART for p in parts):
            raise ValueError(f"snapshot has {len(parts)} of its {head['parts']} parts")
        return json.loads(zlib.decompress(b"".join(p[1:] for p in parts)))

    @classmethod
    def from_snapshot(cls, entry: dict) -> PopBook:
        book = cls(applied=entry["upto"])
        book.last_checkpoint = entry["last"]
        book.cursors = {(g, t, q): n for g, t, q, n in entry["cursors"]}
        book.in_flight = {(ck, off): InFlight(g, t, q, until, orderly)
                          for ck, off, g, t, q, until, orderly in entry["flight"]}
        book.expired = {(ck, off): at for ck, off, at in entry["expired"]}
        book.attempts = {(g, t, q, off): n for g, t, q, off, n in entry["attempts"]}
        book.redo = {(g, t, q): set(offs) for g, t, q, offs in entry["redo"]}
        return book
