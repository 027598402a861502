"""Retention: delete the oldest CommitLog segments by age and by disk-use ratio, and move the
minimum offset of each queue whose topic has its own retention (docs/storage.md).

A segment's age is taken from the store timestamp of the first record after it (the moment it
was finished), so it does not depend on file mtimes that mmap writes do not reliably update.
The active segment is never deleted. Consume queue and index files below the new CommitLog
start go with it, and queue minimum offsets move up.

Retention per topic over the one shared CommitLog ("Retention per topic" in storage.md): a
queue whose topic sets `retention.ms` / `retention.bytes` has its own minimum offset moved
past what expired (durably, its consume queue's floor), so its readers see the expiry on time
while the shared segment stays for the other queues. The oldest segment then goes when

* the global age rule passes (finished `retention_hours` ago, at `delete_when_hour`) and no
  queue whose topic *holds* (a `retention.ms` of its own, or `cleanup.policy=compact`
  without `delete`) still has a readable record in it; or
* no queue has a readable record in it any more (every queue with records in it passed its
  own retention; it is dispatched entirely); or
* the disk is too full (forced clean-up ignores every topic).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import record
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import COMPACTION_TOPIC, DELETED_TOPICS_TOPIC, RELOCATION_TOPIC

from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .disk import DiskGuard, disk_usage
from .index import IndexService

log = get_logger(__name__)
MARKER_TOPICS = frozenset({DELETED_TOPICS_TOPIC, COMPACTION_TOPIC, RELOCATION_TOPIC})
_STORE_TS = struct.Struct(">q")
_SIZE = struct.Struct(">8xi8x")   # the size field of a consume queue unit (UNIT)


@dataclass(frozen=True, slots=True)
class QueueRetention:
    """What one topic's settings ask of retention (the broker derives it: tidemq.broker.
    topic_retention). `ms` / `bytes`: expire a queue's records past them (None: the topic
    sets none); `holds`: the topic keeps its records longer than the global age rule would
    (its own retention.ms, or compaction without deletion), so a segment it still has
    readable records in stays."""

    ms: int | None = None
    bytes: int | None = None
    holds: bool = False
    # compacted, and kept past the global age (compact alone, or compact,delete with its
    # own retention.ms): its live records are copied forward out of a segment that goes
    compact: bool = False


DEFAULT = QueueRetention()
TopicPolicy = Callable[[str], QueueRetention]


def disk_used_ratio(path: Path) -> float:
    """df's Use% of the file system holding `path` (disk.DiskUsage.used_ratio)."""
    return disk_usage(path).used_ratio


class Retention:
    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: ConsumeQueueTable,
                 index: IndexService,
                 used_ratio: Callable[[Path], float] = disk_used_ratio,
                 guard: DiskGuard | None = None,
                 dispatched: Callable[[], int] | None = None) -> None:
        self.config = config
        # per topic (the broker sets it from its topic table; the store knows no topics)
        self.topic_policy: TopicPolicy = lambda topic: DEFAULT
        # the log offset up to which records are in the consume queues: a segment with
        # records not dispatched yet is never "drained"
        self.dispatched = dispatched or (lambda: 0)
        # (topic, queue id) -> (min offset, end offset, bytes of units in between)
        self._sizes: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.guard = guard   # FULL for want of a segment's room: delete until one fits
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.used_ratio = used_ratio
        self._recorrect = False   # the queue minimums are corrected once more at the next run
        # () -> True once every relocation record applied is confirmed by the in-sync
        # replicas (the store's; relocation.py): before that no segment goes but by force
        self.relocations_confirmed: Callable[[], bool] = lambda: True
        # (segment base) -> None: copy compacted queues' live records out of the segment
        # forced clean-up is about to delete (the store's relocator, master only)
        self.relocate_before_force: Callable[[int], None] = lambda base: None

    def finished_at_ms(self, position: int) -> int | None:
        """When segment `position` was finished: store time of the next segment's first record."""
        segments = self.commitlog.segments
        if position + 1 >= len(segments):
            return None
        follower = segments[position + 1]
        header = self.commitlog.read(follower.base_offset, record.HEADER_SIZE)
        if header is None or record.BLANK_HEADER.unpack_from(header)[1] != record.MESSAGE_MAGIC:
            return int(segments[position].path.stat().st_mtime * 1000)
        return _STORE_TS.unpack_from(header, record.OFF_STORE_TIMESTAMP)[0]

    def over_disk(self) -> bool:
        """Forced clean-up (RocketMQ's cleanImmediately): the disk is fuller than
        `disk_max_used_ratio` or than the guard's `disk_full_ratio` (whichever is lower), or
        an append found no room for the next segment and there still is none."""
        config = self.config
        limit = min(config.disk_max_used_ratio, config.disk_full_ratio)
        if self.used_ratio(config.data_dir) > limit:
            return True
        return self.guard is not None and self.guard.short_of_segment()

    def _expired(self, position: int, now_ms: int) -> bool:
        """The global age rule for segment `position`: finished `retention_hours` ago, and
        now is `delete_when_hour`."""
        hour = time.localtime(now_ms / 1000).tm_hour
        if self.config.delete_when_hour is not None and hour != self.config.delete_when_hour:
            return False
        finished = self.finished_at_ms(position)
        return finished is not None and (
            now_ms - finished >= self.config.retention_hours * 3600 * 1000)

    def run_once(self, now_ms: int | None = None) -> int:
        """Delete what is due now; returns the number of segments removed."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.expire_queues(now_ms)
        removed = 0
        flushed = False
        while len(self.commitlog.segments) > 1:
            expired = self._expired(0, now_ms)
            over_disk = self.over_disk()
            reason = "disk_full" if over_disk else "expired"
            if not over_disk and not self.relocations_confirmed():
                break    # a relocated copy a failover could still cut: keep its original
            if not over_disk:
                holders = self._holders(self.commitlog.segments[1].base_offset)
                if expired and any(self.topic_policy(q.topic).holds for q in holders):
                    expired = False    # a topic keeping its records longer still reads it
                if not expired and not holders and (
                        self.commitlog.segments[1].base_offset <= self.dispatched()):
                    expired, reason = True, "drained"
            if not (expired or over_disk):
                break
            if over_disk:   # forced: the compacted queues' live records go forward first
                try:
                    self.relocate_before_force(self.commitlog.segments[0].base_offset)
                except Exception:   # no room even for them: the disk state wins, as before
                    log.exception("compacted records not relocated before forced clean-up")
            if not flushed:   # units repointed at relocated copies are durable first
                self.queues.flush()
                self.index.flush()
                flushed = True
            segment = self.commitlog.remove_oldest()
            if segment is None:
                break
            removed += 1
            log.info("commitlog segment deleted", segment=segment.path.name, reason=reason)
        if removed or self._recorrect:
            # Once more at the next run: units the dispatcher wrote after this correction
            # may point below the new start too (a queue's minimum would stay below them).
            self._recorrect = bool(removed)
            floor = self.commitlog.min_offset
            for queue in self.queues.all():
                queue.correct_min_offset(floor)
            self.index.delete_below(floor)
        return removed

    # -- retention per topic ---------------------------------------------------------------
    def _holders(self, segment_end: int) -> list[ConsumeQueue]:
        """The queues with a readable record below `segment_end` (their oldest one is; gaps
        of a compacted queue are not readable). The store's marker topics (topic deletions,
        compactions, relocations) hold nothing: their records matter only while a
        truncation may cut them, at the log's end."""
        holders = []
        for queue in self.queues.all():
            if queue.topic in MARKER_TOPICS:
                continue
            if queue.has_gaps:     # compacted: relocated units are out of log order
                physical = queue.min_live_physical()
            else:
                first = queue.first_live(queue.min_offset)
                physical = queue.physical_offset_of(first) if first < queue.max_offset else None
            if physical is not None and physical < segment_end:
                holders.append(queue)
        return holders

    def relocation_plan(self, base: int, now_ms: int | None = None, *,
                        forced: bool = False) -> list | None:
        """The relocator's question (relocation.py) for the segment at CommitLog offset
        `base`: None if it stays for a reason relocation cannot remove (a queue that is not
        compacted still needs it, it is not due, or its compacted records are more than
        `compaction_relocate_max_live_ratio` of it: copying them would free too little);
        else the live units of compacted queues in it, (queue, queue offset, physical
        offset, size, tag hash), to copy forward before it can go. `forced`: forced
        clean-up is about to delete it (the disk is too full), which `run_once` found: the
        relocator's own passes never look at the disk."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        segments = self.commitlog.segments
        position = self.commitlog._segment_index(base)
        if not 0 <= position < len(segments) - 1:
            return None
        end = segments[position + 1].base_offset
        holders = self._holders(end)
        compacted = [q for q in holders if self.topic_policy(q.topic).compact]
        others = [q for q in holders if not self.topic_policy(q.topic).compact]
        due = (forced
               or (self._expired(position, now_ms)
                   and not any(self.topic_policy(q.topic).holds for q in others))
               or (not others and end <= self.dispatched()))
        if not due:
            return None
        units, live = [], 0
        limit = self.config.compaction_relocate_max_live_ratio * (end - base)
        for queue in compacted:
            for queue_offset, physical, size, tag in queue.live_units():
                if base <= physical < end:
                    units.append((queue, queue_offset, physical, size, tag))
                    live += size
                    if live > limit:
                        log.debug("segment kept: its compacted records are too much of it "
                                  "to copy", segment_base=base, live_bytes_over=live)
                        return None
        return units

    def expire_queues(self, now_ms: int) -> int:
        """Move the minimum offset of every queue whose topic sets retention.ms or
        retention.bytes past what expired; returns how many queues moved."""
        moved = 0
        for queue in self.queues.all():
            policy = self.topic_policy(queue.topic)
            if policy.ms is None and policy.bytes is None:
                self._sizes.pop((queue.topic, queue.queue_id), None)
                continue
            floor = queue.min_offset
            if policy.ms is not None:
                floor = max(floor, first_stored_after(self.commitlog, queue,
                                                      now_ms - policy.ms))
            if policy.bytes is not None:
                floor = max(floor, self._first_within_bytes(queue, floor, policy.bytes))
            if queue.expire_below(floor):
                moved += 1
                log.debug("queue records expired", topic=queue.topic, queue_id=queue.queue_id,
                          min_offset=queue.min_offset)
        return moved

    def _first_within_bytes(self, queue: ConsumeQueue, start: int, limit: int) -> int:
        """The first offset from which the queue's records add up to at most `limit` bytes.
        The sum is kept per queue between runs: only units new since the last run are read,
        and those that go are subtracted as they go."""
        key, end = (queue.topic, queue.queue_id), queue.max_offset
        low, high, total = self._sizes.get(key, (start, start, 0))
        if low != start or high > end:
            low, high, total = start, start, 0     # moved or cut meanwhile: sum again
        total += sum(_unit_sizes(queue, high, end))
        while total > limit and low < end:
            step = min(end, low + 1024)
            sizes = list(_unit_sizes(queue, low, step))
            for size in sizes:
                if total <= limit:
                    break
                total -= size
                low += 1
            if not sizes:
                break
        self._sizes[key] = (low, end, total)
        return low


def _unit_sizes(queue: ConsumeQueue, start: int, end: int) -> Iterator[int]:
    """The record sizes of the queue's units in [start, end), read 64 Ki units at a time."""
    while start < end:
        raw = queue.read_raw(start, min(end - start, 65536))
        if not raw:
            return
        for (size,) in _SIZE.iter_unpack(raw):
            yield size
        start += len(raw) // _SIZE.size


def first_stored_after(commitlog: CommitLog, queue: ConsumeQueue, cutoff_ms: int) -> int:
    """The first offset of `queue` whose record was stored after `cutoff_ms` (store times rise
    with the log, so a binary search: one header read per step); a record already gone counts
    as expired. Retention per topic (retention.ms) and compaction (min.compaction.lag.ms)."""
    low, high = queue.min_offset, queue.max_offset
    while low < high:
        mid = (low + high) // 2
        physical = queue.physical_offset_of(mid)
        raw = None if physical is None else commitlog.read(
            physical + record.OFF_STORE_TIMESTAMP, _STORE_TS.size)
        if raw is not None and _STORE_TS.unpack(raw)[0] > cutoff_ms:
            high = mid
        else:   # expired, or its record is gone already
            low = mid + 1
    return low
