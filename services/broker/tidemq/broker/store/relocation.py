"""Copy-forward of compacted queues' live records, so compaction reclaims disk
(docs/storage.md, "How compaction frees disk").

The CommitLog is one log shared by every topic, so a segment can only go when no queue still
reads a record in it. Compaction (compaction.py) turns a compacted queue's superseded records
into gaps, but the latest record of each key stays where it was written, and before this a
`cleanup.policy=compact` topic pinned every segment holding one of its live records for ever.

When retention wants the oldest segments gone (its global age rule, a segment every other
queue has drained, or forced clean-up of a full disk) and what still holds one is only live
records of compacted queues, the **relocator** (master only, on the compactor's thread and
within its I/O budget) copies those records forward:

* each live record becomes the body of one **relocation record** of the system topic
  RELOCATION_TOPIC, appended at the log's head: a small head (topic, queue id, queue offset,
  the CommitLog offset it is copied from, its tag hash) followed by the record's bytes,
  unchanged (same queue offset, key, body, properties, store timestamp, and the physical
  offset it was first written at, so its offset message id and what readers decode stay
  the same; its CRC stays valid);
* every replica's **dispatcher**, reaching the relocation record in its log, makes sure the
  copy is durable (fsync up to it), then repoints the queue offset's consume queue unit
  (fixed size, rewritten in place) at the copy inside it, if it still points where the copy
  came from, and indexes the copy's keys. No new queue offset is made: readers (pull, pop,
  HTTP, Kafka, Spark) see the same offsets and bodies, never a second delivery;
* retention, on its next run, finds the segment no longer held by the compacted queue and
  deletes it, after flushing the consume queues (the repoint is durable before the only
  other copy goes) and once the relocation records are confirmed by the in-sync replicas
  (a SYNC_MASTER's read fence), so a failover cannot cut a copy whose original is gone.

Recovery re-dispatches relocation records after the checkpoint like any other: a unit that
already points at the copy, or at a later copy, is left alone (`ConsumeQueue.repoint`).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.common import record
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import RELOCATION_TOPIC

log = get_logger(__name__)

# topic length, queue id, queue offset, copied-from CommitLog offset, tag hash
_HEAD = struct.Struct(">Hiqqq")
_RECORD_FIELDS = struct.Struct(">i8xi4xq")   # total, queue id, queue offset (record header)
BATCH_BYTES = 1 << 20        # relocation records appended per group (one write, one wait)


@dataclass(frozen=True, slots=True)
class Relocation:
    """A decoded relocation record body; `copy_at` is where the copied record starts within
    the body (its CommitLog offset: the relocation record's + record.HEADER_SIZE + copy_at)."""

    topic: str
    queue_id: int
    queue_offset: int
    from_physical: int
    tag: int
    copy_at: int
    size: int


def encode_relocation(topic: str, queue_id: int, queue_offset: int, from_physical: int,
                      tag: int, data: bytes) -> bytes:
    name = topic.encode()
    return _HEAD.pack(len(name), queue_id, queue_offset, from_physical, tag) + name + data


def decode_relocation(body: bytes | memoryview) -> Relocation:
    """Raises ValueError (or struct.error) for a body that is not a whole relocation."""
    length, queue_id, queue_offset, from_physical, tag = _HEAD.unpack_from(body)
    copy_at = _HEAD.size + length
    topic = bytes(body[_HEAD.size:copy_at]).decode()
    size = len(body) - copy_at
    if size < record.HEADER_SIZE:
        raise ValueError("relocation body holds no record")
    total, copied_queue_id, copied_offset = _RECORD_FIELDS.unpack_from(body, copy_at)
    if total != size or copied_queue_id != queue_id or copied_offset != queue_offset:
        raise ValueError("relocated record does not match its relocation head")
    return Relocation(topic, queue_id, queue_offset, from_physical, tag, copy_at, size)


# A unit to relocate: (queue, queue offset, physical offset, size, tag hash)
Planned = tuple[object, int, int, int, int]


class Relocator:
    """Copies live records of compacted queues out of the segments retention wants gone.

    `plan(base)`: retention's answer for the segment starting at CommitLog offset `base` —
    None when it stays for another reason, else the live units of compacted queues in it
    (retention.Retention.relocation_plan). `append(raws)`: append relocation records (the
    store's, master only) and wait until this replica's dispatcher applied them; returns
    the end offset of the last. `spend(size)`: the compactor's I/O budget."""

    def __init__(self, commitlog, plan: Callable[..., list[Planned] | None],
                 append: Callable[[list[bytes]], int], spend: Callable[[int], None],
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self.commitlog = commitlog
        self.plan = plan
        self.append = append
        self.spend = spend
        self.stopping = stopping
        self.bytes_relocated = 0       # counters for metrics and the bench
        self.records_relocated = 0
        self.segments_relocated = 0    # segments emptied of compacted records (freed next)
        # the compactor's thread and forced clean-up (housekeeping) never copy at once
        self._lock = threading.Lock()

    def run_once(self, now_ms: int | None = None) -> int:
        """Relocate what the oldest segments need, oldest first, stopping at the first one
        that stays for another reason; never the active segment, nor one written after the
        pass began (where the copies go). Returns the records relocated."""
        with self._lock:
            return self._run(now_ms)

    def relocate_segment(self, base: int) -> int:
        """Forced clean-up is about to delete the segment at `base` (a full disk): copy what
        compacted queues still read in it first, if that is worth it (`plan`)."""
        with self._lock:
            units = self.plan(base, None, forced=True) if base >= self.commitlog.min_offset \
                else None
            return self._relocate(base, units) if units else 0

    def _run(self, now_ms: int | None) -> int:
        segments = self.commitlog.segments
        bases = [segment.base_offset for segment in segments[:-1]]
        relocated = 0
        for base in bases:
            if self.stopping():
                break
            if base < self.commitlog.min_offset:
                continue    # retention deleted it meanwhile
            units = self.plan(base, now_ms)
            if units is None:
                break
            if units:
                relocated += self._relocate(base, units)
        return relocated

    def _relocate(self, base: int, units: list[Planned]) -> int:
        raws: list[bytes] = []
        pending = moved = count = 0
        for queue, queue_offset, physical, size, tag in units:
            if self.stopping():
                raise InterruptedError("the compactor is stopping")
            data = self.commitlog.read(physical, size, copy=True)
            if data is None:
                continue     # gone meanwhile (forced clean-up): nothing left to copy
            self.spend(size)
            total, queue_id, copied_offset = _RECORD_FIELDS.unpack_from(data)
            if total != size or queue_id != queue.queue_id or copied_offset != queue_offset:
                log.error("consume queue unit does not match its record: not relocated",
                          topic=queue.topic, queue_id=queue.queue_id, queue_offset=queue_offset,
                          commitlog_offset=physical)
                continue
            raws.append(record.encode(RELOCATION_TOPIC, encode_relocation(
                queue.topic, queue.queue_id, queue_offset, physical, tag, data)))
            pending += len(raws[-1])
            moved += size
            count += 1
            if pending >= BATCH_BYTES:
                self.append(raws)
                raws, pending = [], 0
        if raws:
            self.append(raws)
        self.records_relocated += count
        self.bytes_relocated += moved
        self.segments_relocated += 1
        log.info("compacted records relocated out of a segment", segment_base=base,
                 records=count, bytes=moved, log_end=self.commitlog.max_offset)
        return count
