"""Reads: queue ranges as contiguous CommitLog slices, records by offset id, key and time.

A pull walks consume queue units and merges units whose records sit back to back in the
CommitLog into one slice, so a reply costs one copy per run of records, not per message.

Visibility (the read fence, docs/replication.md "What consumers can see"): `visible_end`, when
set, is the CommitLog offset below which records may be read — a SYNC_MASTER's confirmed
offset (store/ha/gate.py `readable_end`). A queue then ends, for every read, at its first unit
whose record ends past that offset (`visible_max_offset`), and records by id or key past it are
not found. None (single replica, ASYNC_MASTER, slaves) reads everything written.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from tidemq.common import record

from .commitlog import CommitLog
from .config import CQ_UNIT_SIZE, GetResult, GetStatus, MessageNotFound
from .consume_queue import GAP_TAG, UNIT, ConsumeQueue, ConsumeQueueTable
from .index import IndexService
from .loops import KEYS_NAME, UNIQ_NAME, extend_runs, property_value, unit_runs
from .property_scan import PropertyFilter, scan_properties

MAX_FILTER_SCAN = 16_000   # units a filtered pull may skip before answering NO_MATCHED_MESSAGE
_I64 = struct.Struct(">q")
_TAIL_UNITS = 64         # units the read fence looks at from a queue's end before bisecting
_UNREADABLE = 1 << 62   # a unit gone under a reader: not visible (a read finds it gone anyway)


def visible_max_offset(queue: ConsumeQueue, bound: int,
                       relocated: Callable[[int], bool] | None = None) -> int:
    """The number of `queue`'s units (from offset 0: its max offset as readers see it) whose
    record ends (commitlog offset + size) at or below CommitLog offset `bound`. Records enter a
    queue in CommitLog order, so these are a prefix, and the unconfirmed tail is short: one
    read of the last units (one unit's check when the last is visible, the common case), a
    bisection only when the whole tail read is past the bound; never a walk per message.

    `relocated(physical)`, for a compacted queue: whether the record there is a relocated copy
    (store/relocation.py) — an old record whose unit now points at the log's head, out of
    log order: it counts as visible (it was readable before it moved), so the visible units
    stay a prefix and the queue's visible end never moves back."""
    low, high = queue.min_offset, queue.max_offset
    if high <= low or _unit_end(queue, high - 1, relocated) <= bound:
        return high
    tail_start = max(low, high - _TAIL_UNITS)
    tail = queue.read_raw(tail_start, high - tail_start)   # stops at a file's end
    count = len(tail) // CQ_UNIT_SIZE
    if tail_start + count == high:
        for index in range(count - 1, -1, -1):
            physical, size, _ = UNIT.unpack_from(tail, index * CQ_UNIT_SIZE)
            if physical + size <= bound or (relocated is not None and relocated(physical)):
                return tail_start + index + 1
        high = tail_start   # the whole tail is past the bound
        if high <= low:
            return low
    high -= 1   # the first unit past the bound is at or before `high`
    while low < high:
        middle = (low + high) // 2
        if _unit_end(queue, middle, relocated) <= bound:
            low = middle + 1
        else:
            high = middle
    return low if _unit_end(queue, low, relocated) > bound else low + 1


def _unit_end(queue: ConsumeQueue, queue_offset: int,
              relocated: Callable[[int], bool] | None = None) -> int:
    raw = queue.read_raw(queue_offset, 1)
    if not raw:
        return _UNREADABLE
    physical, size, _ = UNIT.unpack(raw)
    if relocated is not None and physical + size > 0 and relocated(physical):
        return 0
    return physical + size


class StoreReader:
    def __init__(self, commitlog: CommitLog, queues: ConsumeQueueTable, index: IndexService):
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        # () -> the CommitLog offset readers may see up to; None: everything written
        self.visible_end: Callable[[], int] | None = None

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as readers see it (the read fence applied)."""
        queue = self.queues.get(topic, queue_id)
        return self._visible_max(queue) if queue is not None else 0

    def _visible_max(self, queue: ConsumeQueue) -> int:
        visible_end = self.visible_end
        if visible_end is None:
            return queue.max_offset
        return visible_max_offset(queue, visible_end(),
                                  self._relocated if queue.has_gaps else None)

    def _relocated(self, physical: int) -> bool:
        """The record at `physical` is a relocated copy: it keeps the offset it was first
        written at, which is not where it is now."""
        raw = self.commitlog.read(physical + record.OFF_PHYSICAL_OFFSET, 8)
        return raw is not None and _I64.unpack(raw)[0] != physical

    def get_messages(self, topic: str, queue_id: int, queue_offset: int, max_messages: int,
                     max_bytes: int, tag_hashes: frozenset[int] | None,
                     property_filter: PropertyFilter | None = None, *,
                     fenced: bool = True) -> GetResult:
        """Up to `max_messages` records from `queue_offset`: those whose ConsumeQueue tag hash
        is in `tag_hashes` (None: any) and whose properties `property_filter` accepts (None:
        any; it sees the encoded properties only, never the body). `fenced` False: past the
        read fence too — the broker's own state replays (pop's revive log), never readers."""
        queue = self.queues.get(topic, queue_id)
        low = queue.min_offset if queue else 0
        high = (self._visible_max(queue) if fenced else queue.max_offset) if queue else 0
        if queue is None or high == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, b"", 0, 0, low, high)
        if queue_offset < low:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, b"", 0, low, low, high)
        if queue_offset == high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, b"", 0, queue_offset, low, high)
        if queue_offset > high:
            if fenced and queue_offset <= queue.max_offset:
                # held here, not yet known confirmed (a reader that read up to the confirmed
                # offset another replica knew): nothing to read yet, as Kafka answers a fetch
                # between the high watermark and the log end — not an offset to reset
                return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, b"", 0, queue_offset, low, high)
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, b"", 0, high, low, high)
        if (tag_hashes is None and property_filter is None and max_messages > 0
                and not queue.has_gaps):
            found = self._unfiltered_runs(queue, queue_offset,
                                          min(max_messages, high - queue_offset), max_bytes)
            if found is not None:
                records, count = found
                return GetResult(GetStatus.FOUND, records, count, queue_offset + count, low, high)
        if property_filter is not None:
            runs, offset, scanned = scan_properties(self.commitlog, queue, queue_offset, high,
                                                    max_messages, max_bytes, tag_hashes,
                                                    property_filter)
        else:
            runs, offset, scanned = self._scan(queue, queue_offset, high, max_messages,
                                               max_bytes, tag_hashes)
        slices, found = [], 0
        for start, end, records in runs:
            chunk = self.commitlog.read(start, end - start)
            if chunk is None:  # removed by retention while we read
                break
            slices.append(chunk)
            found += records
        if found:
            return GetResult(GetStatus.FOUND, b"".join(slices), found, offset, low, high)
        status = GetStatus.NO_MATCHED_MESSAGE if scanned else GetStatus.OFFSET_FOUND_NULL
        return GetResult(status, b"", 0, offset if scanned else queue_offset, low, high)

    def _scan(self, queue, queue_offset: int, high: int, max_messages: int, max_bytes: int,
              tag_hashes: frozenset[int] | None) -> tuple[list[list[int]], int, int]:
        """The units to answer with, by tag hash: ([start, end, record count] runs of
        records, next offset, units scanned)."""
        gaps = queue.has_gaps   # a compacted queue: skip gaps (a tag filter skips them anyway)
        scan_limit = max_messages if tag_hashes is None and not gaps else max(max_messages,
                                                                               MAX_FILTER_SCAN)
        runs: list[list[int]] = []   # [start, end, record count]
        offset, count, total_bytes, scanned = queue_offset, 0, 0, 0
        floor = self.commitlog.min_offset
        done = max_messages <= 0
        while not done and offset < high and scanned < scan_limit:
            raw = queue.read_raw(offset, min(scan_limit - scanned, 8192, high - offset))
            if not raw:
                break
            for physical, size, tag in UNIT.iter_unpack(raw):
                if count >= max_messages or (count and total_bytes + size > max_bytes):
                    done = True
                    break
                offset += 1
                scanned += 1
                if physical < floor or (tag_hashes is not None and tag not in tag_hashes) or (
                        gaps and tag == GAP_TAG):
                    continue
                extend_runs(runs, physical, size)
                count += 1
                total_bytes += size
        return runs, offset, scanned

    def _unfiltered_runs(self, queue, queue_offset: int, count: int,
                         max_bytes: int) -> tuple[bytes, int] | None:
        """Fast path of an unfiltered pull: the wanted units in one read, where they stop
        being back to back in the CommitLog found in one pass (`loops.unit_runs`, C when
        built), and the answer as one slice per run — one per producer batch, typically, as
        concurrent batches for other queues interleave. None means "take the general path"."""
        raw = queue.read_raw(queue_offset, count)
        units = len(raw) // CQ_UNIT_SIZE
        if not units:
            return None
        take, runs = unit_runs(raw, max_bytes)
        if take == units < count:  # stopped by a CQ file end, not by a limit: general path
            return None
        if runs[0][0] < self.commitlog.min_offset:  # retention passed it: general path
            return None
        slices = []
        for physical, length in runs:
            chunk = self.commitlog.read(physical, length)
            if chunk is None:  # removed by retention while we read
                return None
            slices.append(chunk)
        return (slices[0] if len(slices) == 1 else b"".join(slices)), take

    def read_record(self, physical_offset: int, *, relocated: bool = False,
                    fenced: bool = True) -> bytes:
        """The record starting exactly at `physical_offset` (an offset message id), verified.
        `relocated`: also a relocated copy (relocation.py), which keeps the offset it was
        first written at (an index hit: the caller checks its queue still points there).
        `fenced=False`: past the read fence too (the store's own reads of its unconfirmed
        tail, e.g. the markers a truncation cuts), never for a client."""
        size = self.commitlog.record_size_at(physical_offset)
        data = self.commitlog.read(physical_offset, size) if size and size > 0 else None
        visible_end = self.visible_end if fenced else None
        written_at = _I64.unpack_from(data, record.OFF_PHYSICAL_OFFSET)[0] if data else None
        if (
            data is None
            or (visible_end is not None and physical_offset + size > visible_end())
            or not (written_at == physical_offset
                    or (relocated and written_at is not None and written_at < physical_offset))
            or zlib.crc32(memoryview(data)[record.CRC_START:]) != int.from_bytes(data[8:12], "big")
        ):
            raise MessageNotFound(f"no message at commitlog offset {physical_offset}")
        return data

    def store_timestamp_at(self, physical_offset: int) -> int | None:
        raw = self.commitlog.read(physical_offset + record.OFF_STORE_TIMESTAMP, 8)
        return _I64.unpack(raw)[0] if raw else None

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms`."""
        return self.search_timestamp(topic, queue_id, timestamp_ms)[0]

    def search_timestamp(self, topic: str, queue_id: int,
                         timestamp_ms: int) -> tuple[int, int | None]:
        """(the first queue offset whose message was stored at or after `timestamp_ms`, that
        message's store time); the time is None when no readable message is (the offset is
        then the queue's visible end)."""
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            return 0, None
        low, high = queue.min_offset, self._visible_max(queue)
        end = high
        while low < high:
            mid = (low + high) // 2
            physical = queue.physical_offset_of(mid)
            stored = self.store_timestamp_at(physical) if physical is not None else None
            if stored is None or stored < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        if low >= end:
            return low, None
        physical = queue.physical_offset_of(low)
        return low, self.store_timestamp_at(physical) if physical is not None else None

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int,
                     max_results: int) -> list[bytes]:
        """Records of `topic` whose KEYS contain `key` or whose UNIQ_KEY is `key`, oldest first."""
        wanted = key.encode()
        results: dict[int, bytes] = {}
        candidates = self.index.query(f"{topic}#{key}".encode(), begin_ms, end_ms, max_results * 4)
        for physical in sorted(set(candidates)):
            try:
                data = self.read_record(physical, relocated=True)
            except MessageNotFound:
                continue   # stale entry from before a truncation, or below retention
            if self._matches(data, topic.encode(), wanted, begin_ms, end_ms) and \
                    not self._below_floor(topic, data, physical):
                results[physical] = data
                if len(results) >= max_results:
                    break
        return list(results.values())

    def _below_floor(self, topic: str, data: bytes, physical: int) -> bool:
        """A record of a deleted topic (before its floor), still in the CommitLog; or, in a
        compacted queue, one compaction removed or a copy its unit no longer points at (a
        relocated record's old copy, or a relocated copy read by an offset it never had)."""
        header = record.HEADER.unpack_from(data)
        queue = self.queues.get(topic, header[record.H_QUEUE_ID])
        if queue is None:
            return header[record.H_PHYSICAL_OFFSET] != physical
        queue_offset = header[record.H_QUEUE_OFFSET]
        if queue_offset < queue.min_offset:
            return True
        if not queue.has_gaps:
            return header[record.H_PHYSICAL_OFFSET] != physical
        units = queue.read_units(queue_offset, 1)
        return not units or units[0][2] == GAP_TAG or units[0][0] != physical

    @staticmethod
    def _matches(data: bytes, topic: bytes, key: bytes, begin_ms: int, end_ms: int) -> bool:
        stored = _I64.unpack_from(data, record.OFF_STORE_TIMESTAMP)[0]
        if not begin_ms <= stored <= end_ms:
            return False
        topic_at = record.HEADER_SIZE + int.from_bytes(data[84:88], "big", signed=True)
        topic_end = topic_at + 1 + data[topic_at]
        if data[topic_at + 1:topic_end] != topic:
            return False
        props = data[topic_end + 2:]
        if property_value(props, UNIQ_NAME) == key:
            return True
        keys = property_value(props, KEYS_NAME)
        return bool(keys) and key in keys.split(b" ")
