"""Compaction of `cleanup.policy=compact` queues (docs/storage.md, "Compaction").

Decided by the master, applied by every replica from the log:

* The **compactor** (master only, a background thread within an I/O budget) reads each
  compacted queue's records older than `min.compaction.lag.ms` — header and properties,
  never a body — and finds, per message key, the records a later record of the same key
  supersedes, and the tombstones (the latest record of a key, with a null value) older than
  `delete.retention.ms`. It appends one **compaction marker** record to the system topic
  COMPACTION_TOPIC naming those queue offsets (topic, queue id, ranges).
* The **dispatcher** of every replica, reaching the marker in the log, marks those consume
  queue units as gaps (`ConsumeQueue.mark_gaps`, tag hash GAP_TAG). Readers skip gaps (pull,
  pop, HTTP, Kafka, Spark all read through the store's reader); offsets never change.

So the compacted state is a pure function of the log, like the queues themselves: a slave
reaches it by replicating the markers, a crash at any point leaves either no marker or a
whole one (a record is all or nothing), and recovery's re-dispatch applies the markers again
after the records they name (they always come later in the log). A truncation that cuts a
marker rebuilds the queues it touched from the log (store.truncate_to).

The key is the Kafka key where gateway-kafka set one (property KAFKA_KEY, binary-safe; for a
key too long for the properties, its SHA-256 in KAFKA_KEY_DIGEST), else the message's KEYS. A record without a key is never compacted. A tombstone is a record whose
KAFKA_VALUE property is "null" (a Kafka null value) or whose body is empty.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common import record
from tidemq.common.logs import get_logger

from .config import CQ_UNIT_SIZE
from .consume_queue import GAP_TAG, UNIT, ConsumeQueue
from .loops import KEYS_NAME, property_value
from .retention import first_stored_after

log = get_logger(__name__)

KAFKA_KEY_NAME = b"KAFKA_KEY\x01"
KAFKA_KEY_DIGEST_NAME = b"KAFKA_KEY_DIGEST\x01"
KAFKA_VALUE_NAME = b"KAFKA_VALUE\x01"
_MARKER_HEAD = struct.Struct(">HiI")     # topic length, queue id, range count
_RANGE = struct.Struct(">qq")            # [start, end) queue offsets
MAX_RANGES_PER_MARKER = 50_000           # 800 KB of ranges: well under any record limit
_FIELDS = struct.Struct(">i52xq20xi")    # total, store_timestamp, body_len
assert _FIELDS.size == record.HEADER_SIZE


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """What a topic's settings ask of compaction (None: not compacted)."""

    min_lag_ms: int = 0
    delete_retention_ms: int = 86_400_000


TopicCompaction = Callable[[str], CompactionPolicy | None]


def encode_marker(topic: str, queue_id: int, ranges: list[tuple[int, int]]) -> bytes:
    name = topic.encode()
    return (_MARKER_HEAD.pack(len(name), queue_id, len(ranges)) + name
            + b"".join(_RANGE.pack(start, end) for start, end in ranges))


def decode_marker(body: bytes) -> tuple[str, int, list[tuple[int, int]]]:
    length, queue_id, count = _MARKER_HEAD.unpack_from(body)
    at = _MARKER_HEAD.size
    topic = body[at:at + length].decode()
    at += length
    return topic, queue_id, [_RANGE.unpack_from(body, at + i * _RANGE.size)
                             for i in range(count)]


def to_ranges(offsets: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct offsets as [start, end) ranges."""
    ranges: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if ranges and ranges[-1][1] == offset:
            ranges[-1] = (ranges[-1][0], offset + 1)
        else:
            ranges.append((offset, offset + 1))
    return ranges


@dataclass(slots=True)
class _QueueState:
    """What the last passes learned of one queue (Kafka's offset map): the latest offset of
    every key among the records scanned [min, end), and the tombstones among them, so a pass
    reads only the records that became eligible since. Rebuilt by a full scan whenever it
    cannot be trusted (a new master, a truncation, a failed pass)."""

    end: int = -1                  # scanned up to here (exclusive); -1: never
    min_offset: int = 0
    latest: dict[bytes, int] = field(default_factory=dict)
    tombstones: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # off: (ms, key)


class Compactor:
    """Decide compaction for the compacted queues; `append_marker(topic, queue_id, ranges)`
    writes a marker (the store's, master only). `budget_bytes_s`: bytes of records read per
    second at most (the I/O budget; 0 = unlimited)."""

    def __init__(self, commitlog, queues, append_marker: Callable[[str, int, list], int], *,
                 is_master: Callable[[], bool], interval_s: float = 10.0,
                 budget_bytes_s: int = 32 << 20) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.append_marker = append_marker
        self.is_master = is_master
        self.interval_s = interval_s
        self.budget_bytes_s = budget_bytes_s
        self.topic_policy: TopicCompaction = lambda topic: None
        self._states: dict[tuple[str, int], _QueueState] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._budget_start = time.monotonic()
        self._budget_used = 0
        self.bytes_read = 0        # counters for metrics and the bench
        self.records_removed = 0
        self.queue_passes = 0      # queues read (or their tombstones expired) by a pass
        # after each pass on the master: the copy-forward that frees segments (relocation.py)
        self.relocator = None

    # -- thread ----------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="store-compactor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if self.is_master():
                    self.run_once()
                    if self.relocator is not None and not self._stop.is_set():
                        self.relocator.run_once()
            except InterruptedError:
                return    # stopping
            except Exception:
                log.exception("compaction failed")

    # -- a pass ----------------------------------------------------------------------------
    def run_once(self, now_ms: int | None = None) -> int:
        """One pass over every compacted queue; returns the offsets newly marked removed.
        Each queue's records are read once: later passes read only those that became
        eligible since (the queue's map, `_QueueState`)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        removed = 0
        for queue in self.queues.all():
            if self._stop.is_set():
                break
            policy = self.topic_policy(queue.topic)
            if policy is None:
                self._states.pop((queue.topic, queue.queue_id), None)
                continue
            removed += self.compact_queue(queue, policy, now_ms)
        return removed

    def reset(self) -> None:
        """Forget every queue's map: the next pass of each scans it whole (this replica
        became master or slave, or its log was cut: what the maps saw may be gone)."""
        self._states = {}

    def compact_queue(self, queue: ConsumeQueue, policy: CompactionPolicy, now_ms: int) -> int:
        key = (queue.topic, queue.queue_id)
        state = self._states.get(key)
        low, high = queue.min_offset, queue.max_offset
        if state is None or state.end < low or state.end > high:
            state = self._states[key] = _QueueState(end=low, min_offset=low)
        elif low > state.min_offset:    # retention moved the queue's start: forget below it
            state.latest = {k: o for k, o in state.latest.items() if o >= low}
            state.tombstones = {o: t for o, t in state.tombstones.items() if o >= low}
            state.min_offset = low
        end = first_stored_after(self.commitlog, queue, now_ms - policy.min_lag_ms)
        cutoff = now_ms - policy.delete_retention_ms
        tombstone_due = any(stored <= cutoff for stored, _ in state.tombstones.values())
        if end <= state.end and not tombstone_due:
            return 0
        try:
            return self._compact(queue, state, max(end, state.end), cutoff)
        except BaseException:
            self._states.pop(key, None)    # half-updated: scan it whole next time
            raise

    def _compact(self, queue: ConsumeQueue, state: _QueueState, end: int, cutoff: int) -> int:
        log.info("compacting queue", topic=queue.topic, queue_id=queue.queue_id,
                 from_offset=state.end, to_offset=end)
        latest, tombstones = state.latest, state.tombstones
        superseded: list[int] = []
        for offset, key, tombstone, stored in self._keyed_records(queue, state.end, end):
            previous = latest.get(key)
            if previous is not None:
                superseded.append(previous)
                tombstones.pop(previous, None)
            latest[key] = offset
            if tombstone:
                tombstones[offset] = (stored, key)
        if self._stop.is_set():
            raise InterruptedError("the compactor is stopping")   # state dropped: rescanned
        expired = [offset for offset, (stored, _) in tombstones.items() if stored <= cutoff]
        for offset in expired:
            _, key = tombstones.pop(offset)
            del latest[key]
        state.end = end
        self.queue_passes += 1
        ranges = to_ranges(superseded + expired)
        for at in range(0, len(ranges), MAX_RANGES_PER_MARKER):
            self.append_marker(queue.topic, queue.queue_id,
                               ranges[at:at + MAX_RANGES_PER_MARKER])
        count = len(superseded) + len(expired)
        if count:
            self.records_removed += count
            log.info("queue compacted", topic=queue.topic, queue_id=queue.queue_id,
                     superseded=len(superseded), tombstones_removed=len(expired),
                     up_to=end)
        return count

    def _keyed_records(self, queue: ConsumeQueue, start: int, end: int):
        """(offset, key, tombstone?, store ms) of the records in [start, end) that are not
        gaps and have a key; reads header and properties, within the I/O budget."""
        offset = start
        while offset < end and not self._stop.is_set():
            raw = queue.read_raw(offset, min(end - offset, 4096))
            if not raw:
                break
            for index in range(len(raw) // CQ_UNIT_SIZE):
                physical, size, tag = UNIT.unpack_from(raw, index * CQ_UNIT_SIZE)
                at = offset + index
                if tag == GAP_TAG:
                    continue
                data = self.commitlog.read(physical, size)
                if data is None:
                    continue     # retention took it meanwhile
                self._spend(size)
                total, stored, body_len = _FIELDS.unpack_from(data)
                topic_at = record.HEADER_SIZE + body_len
                properties = data[topic_at + 3 + data[topic_at]:total]
                key = property_value(properties, KAFKA_KEY_NAME)
                if key is not None:
                    key = b"b:" + key
                elif (digest := property_value(properties, KAFKA_KEY_DIGEST_NAME)) is not None:
                    key = b"d:" + digest    # a long Kafka key: its SHA-256
                else:
                    keys = property_value(properties, KEYS_NAME)
                    key = b"k:" + keys if keys else None
                if key is None:
                    continue
                tombstone = body_len == 0 or property_value(
                    properties, KAFKA_VALUE_NAME) == b"null"
                yield at, key, tombstone, stored
            offset += len(raw) // CQ_UNIT_SIZE

    def _spend(self, size: int) -> None:
        """The I/O budget: sleep as needed to read at most `budget_bytes_s` a second."""
        self.bytes_read += size
        if not self.budget_bytes_s:
            return
        self._budget_used += size
        elapsed = time.monotonic() - self._budget_start
        ahead = self._budget_used / self.budget_bytes_s - elapsed
        if ahead > 0.05:
            self._stop.wait(ahead)
        if elapsed > 1.0:
            self._budget_start, self._budget_used = time.monotonic(), 0
