"""The CommitLog: every topic's records appended to one log of fixed-size segments.

Owns the segment list, the roll policy (blank filler, then a new segment), batch append with
in-place stamping of the broker-assigned fields, slice reads and tail recovery.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import record
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN, is_topic_name

from .config import InvalidBatch, ReplicationGap, StorageFull, StoreError
from .disk import NO_SPACE_ERRNOS
from .ha.records import complete_prefix
from .loops import stamp_batch
from .segment import Segment, parse_segment_name, segment_name
from .segment_allocator import SegmentAllocator

_SIZE_MAGIC = struct.Struct(">iI")
_STORE_TIME_AND_HOST = struct.Struct(">q8s")        # at OFF_STORE_TIMESTAMP


MAX_QUEUE_ID = 1 << 20


def check_topic(topic: str) -> None:
    """Topic names become directory names under consumequeue/: tidemq.common.topic_names."""
    if not is_topic_name(topic):
        raise InvalidBatch(
            f"topic {topic!r} must be 1-{MAX_TOPIC_NAME_LEN} characters of letters, digits, "
            "'.', '%', '|', '_' or '-', and not '.' or '..'"
        )


# One producer batch for one queue: (topic, queue_id, concatenated records, record_count).
AppendRequest = tuple[str, int, bytes, int]
# An appended batch: (first queue offset, physical offsets, end offset of its last record).
Appended = tuple[int, list[int], int]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    start_offset: int     # where the CRC scan began
    end_offset: int       # the log's end after recovery (next append position)
    records_scanned: int
    truncated_bytes: bool  # a damaged tail was cut off
    segments_removed: int


class _Rejected(Exception):
    """An invalid batch found while stamping a group: the group is stamped again without it."""

    def __init__(self, index: int, error: StoreError) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class CommitLog:
    def __init__(self, directory: Path, segment_size: int, max_message_size: int,
                 warm_segments: bool = False) -> None:
        self.directory = directory
        self.allocator = SegmentAllocator(directory, segment_size) if warm_segments else None
        self.segment_size = segment_size
        self.max_message_size = max_message_size
        self.segments: list[Segment] = []   # replaced, never mutated, so readers need no lock
        self._append_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._written = 0     # every byte below is a complete, stamped record or filler
        self._flushed = 0
        self._queue_offsets: dict[tuple[str, int], int] = {}
        self._topic_fields: dict[str, bytes] = {}   # valid topic -> length byte + name
        self._prepare_next_at = 0   # past this offset, ask for the next segment to be prepared
        self._replica_tail = b""    # a slave: replicated bytes of a record not yet complete
        # A segment that cannot be allocated for lack of space (ENOSPC): the StorageFull to
        # raise; the store points this at its DiskGuard, which also turns FULL (disk.py).
        self.no_space: Callable[[OSError], StorageFull] = lambda exc: StorageFull(
            f"no space left on the file system holding {self.directory} for the next "
            f"CommitLog segment ({exc.strerror})", path=str(self.directory))

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.allocator is not None:
            self.allocator.remove_leftovers()
        bases = sorted(
            base for path in self.directory.iterdir()
            if (base := parse_segment_name(path.name)) is not None
        )
        for previous, base in zip(bases, bases[1:], strict=False):
            if base != previous + self.segment_size:
                raise StoreError(
                    f"commitlog segments {segment_name(previous)} and {segment_name(base)} are "
                    f"not contiguous for segment_size {self.segment_size}"
                )
        self.segments = [
            Segment(self.directory / segment_name(b), b, self.segment_size) for b in bases
        ]

    def recover(self, start_offset: int) -> RecoveryReport:
        """CRC-scan from the segment holding `start_offset`; cut the log at the first bad record."""
        if not self.segments:
            if self.allocator is not None:
                self.allocator.request(0)
            return RecoveryReport(0, 0, 0, False, 0)
        index = max(0, min(self._segment_index(start_offset), len(self.segments) - 1))
        scan_from = self.segments[index].base_offset
        records = 0
        while True:
            segment = self.segments[index]
            result = segment.scan(0)
            records += result.records
            has_next = index + 1 < len(self.segments)
            if result.ended_with_filler and has_next:
                index += 1
                continue
            break
        end = segment.base_offset + result.valid_end
        damaged = not result.clean_end
        if damaged:
            segment.truncate(result.valid_end)
        stale = self.segments[index + 1:]
        for extra in stale:
            extra.delete()
        self.segments = self.segments[:index + 1]
        if result.ended_with_filler:
            end = segment.end_offset
        self._written = self._flushed = end
        self._prepare_next()
        return RecoveryReport(scan_from, end, records, damaged, len(stale))

    def _prepare_next(self) -> None:
        """Once the active segment is half full, have the allocator prepare the next one."""
        base = self._written - self._written % self.segment_size
        half = base + self.segment_size // 2
        if self._written < half:
            self._prepare_next_at = half
        else:
            self._prepare_next_at = base + self.segment_size + self.segment_size // 2
            if self.allocator is not None:
                self.allocator.request(base + self.segment_size)

    def close(self) -> None:
        if self.allocator is not None:
            self.allocator.close()
        for segment in self.segments:
            segment.close()

    # -- offsets ---------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self._written

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def min_offset(self) -> int:
        segments = self.segments
        return segments[0].base_offset if segments else self._written

    def set_queue_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        with self._append_lock:
            self._queue_offsets = dict(offsets)

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._queue_offsets.get((topic, queue_id), 0)

    def _segment_index(self, offset: int) -> int:
        segments = self.segments
        if not segments:
            return -1
        return (offset - segments[0].base_offset) // self.segment_size

    def segment_for(self, offset: int) -> Segment | None:
        segments = self.segments
        index = self._segment_index(offset)
        if 0 <= index < len(segments):
            return segments[index]
        return None

    # -- append ----------------------------------------------------------------------------
    def append_batch(
        self, topic: str, queue_id: int, records: bytes, record_count: int, store_host: bytes
    ) -> tuple[int, list[int]]:
        """Stamp and append a batch for one queue; returns (first queue offset, physical
        offsets). Every record is validated before a byte is written: all or nothing."""
        outcome = self.append_group([(topic, queue_id, records, record_count)], store_host)[0]
        if isinstance(outcome, StoreError):
            raise outcome
        return outcome[0], outcome[1]

    def append_group(
        self, requests: list[AppendRequest], store_host: bytes
    ) -> list[Appended | StoreError]:
        """Append several producer batches (possibly for different queues) in one go: one lock
        hold, one store timestamp and one write per segment touched. Each batch's outcome is
        (first queue offset, physical offsets, end offset of its last record). Each batch is all or
        nothing on its own: an invalid one gets its StoreError in the returned list and the
        others are still appended. A failing write raises (nothing of the group is then
        counted as appended; the bytes past the log end are overwritten later).

        This is the hot path: per record only a few struct calls and one CRC; the bytes are
        stamped in a private copy.
        """
        outcomes: list[Appended | StoreError | None] = [
            self._precheck(*request) for request in requests
        ]
        with self._append_lock:
            while True:
                live = [i for i, outcome in enumerate(outcomes) if outcome is None]
                if not live:
                    break
                try:
                    self._stamp_and_write(requests, live, outcomes, store_host)
                    break
                except _Rejected as rejected:  # stamp the group again without that batch
                    outcomes[rejected.index] = rejected.error
        return outcomes  # type: ignore[return-value]

    def _precheck(self, topic: str, queue_id: int, records: bytes,
                  record_count: int) -> StoreError | None:
        if topic not in self._topic_fields:
            try:
                check_topic(topic)
            except StoreError as exc:
                return exc
            raw = topic.encode()
            self._topic_fields[topic] = bytes((len(raw),)) + raw
        if not 0 <= queue_id <= MAX_QUEUE_ID:
            return InvalidBatch(f"queue id {queue_id} is outside 0..{MAX_QUEUE_ID}")
        if not records or record_count <= 0:
            return InvalidBatch("a batch must hold at least one record")
        return None

    def _stamp_and_write(self, requests: list[AppendRequest], live: list[int],
                         outcomes: list, store_host: bytes) -> None:
        """Under the append lock: validate and stamp the live batches in one private copy for
        the log's end, then write it (one write per segment touched, a filler where a segment
        ends). Raises _Rejected for the first invalid batch, before anything is written."""
        buf = bytearray(b"".join([requests[i][2] for i in live]))
        max_size, segment_size = self.max_message_size, self.segment_size
        stamp = _STORE_TIME_AND_HOST.pack(time.time_ns() // 1_000_000, store_host)
        cursor = self._written
        segment_end = cursor - cursor % segment_size + segment_size
        # chunks: (physical offset, buffer start, buffer end, filler offset or -1)
        chunks: list[tuple[int, int, int, int]] = []
        chunk_start, chunk_phys, pos = 0, cursor, 0
        queue_offsets, next_offsets = self._queue_offsets, {}
        topic_fields = self._topic_fields
        results: list[Appended] = []
        for i in live:
            topic, queue_id, records, record_count = requests[i]
            key = (topic, queue_id)
            queue_offset = next_offsets.get(key)
            if queue_offset is None:
                queue_offset = queue_offsets.get(key, 0)
            first_queue_offset = queue_offset
            try:
                (pos, queue_offset, cursor, segment_end, chunk_phys, chunk_start,
                 physical_offsets, rolled) = stamp_batch(
                    buf, pos, pos + len(records), topic_fields[topic],
                    queue_id, queue_offset, cursor, segment_end, segment_size, max_size, stamp,
                    chunk_phys, chunk_start)  # fmt: skip
                if len(physical_offsets) != record_count:
                    raise InvalidBatch(f"batch holds {len(physical_offsets)} records but "
                                       f"record_count is {record_count}")
            except StoreError as exc:
                raise _Rejected(i, exc) from None
            if rolled:
                chunks.extend(rolled)
            next_offsets[key] = queue_offset
            results.append((first_queue_offset, physical_offsets, cursor))
        chunks.append((chunk_phys, chunk_start, pos, -1))
        with memoryview(buf) as view:
            self._write_chunks(view, chunks)
        queue_offsets.update(next_offsets)
        self._written = cursor
        if cursor >= self._prepare_next_at:
            self._prepare_next()
        for i, result in zip(live, results, strict=True):
            outcomes[i] = result

    def _write_chunks(self, view: memoryview, chunks: list[tuple[int, int, int, int]]) -> None:
        for phys, start, end, filler_at in chunks:
            segment = self._segment_at(phys)
            if end > start:
                segment.write(phys - segment.base_offset, view[start:end])
            if filler_at >= 0:
                segment.write_filler(filler_at - segment.base_offset)

    def _segment_at(self, phys: int) -> Segment:
        segment = self.segment_for(phys)
        if segment is None:
            base = phys - phys % self.segment_size
            if self.allocator is not None:
                self.allocator.claim(base)
            try:
                segment = Segment(self.directory / segment_name(base), base, self.segment_size)
            except OSError as exc:   # the write fails whole: nothing of the group is appended
                if exc.errno not in NO_SPACE_ERRNOS:
                    raise
                raise self.no_space(exc) from None
            self.segments = [*self.segments, segment]
        return segment

    # -- replication -----------------------------------------------------------------------
    @property
    def replica_end(self) -> int:
        """Where the next replicated bytes go: the log end plus a held partial record."""
        return self._written + len(self._replica_tail)

    def append_replicated(self, physical_offset: int, chunk: bytes | memoryview) -> int:
        """A slave: write the master's bytes as they are at `physical_offset` (which must be
        `replica_end`); the log end advances over the whole records and fillers, the rest
        is held until it completes. Returns the log end."""
        with self._append_lock:
            expected = self._written + len(self._replica_tail)
            if physical_offset != expected:
                raise ReplicationGap(f"replicated bytes start at {physical_offset} but this "
                                     f"replica's log ends at {expected}")
            data = self._replica_tail + bytes(chunk) if self._replica_tail else chunk
            start = self._written
            complete = complete_prefix(data, start, self.segment_size, self.max_message_size)
            with memoryview(data) as view:
                position = 0
                while position < complete:
                    segment = self._segment_at(start + position)
                    take = min(complete - position, segment.end_offset - start - position)
                    segment.write(start + position - segment.base_offset,
                                  view[position:position + take])
                    position += take
                self._replica_tail = bytes(view[complete:])
            self._written = start + complete
            if self._written >= self._prepare_next_at:
                self._prepare_next()
            return self._written

    def truncate_to(self, offset: int) -> None:
        """Cut the log at `offset` (a record boundary at or below the end): later segments are
        deleted, the one holding `offset` zeroed from there; a held partial record is dropped."""
        with self._append_lock:
            if not self.min_offset <= offset <= self._written:
                raise StoreError(f"cannot truncate the commitlog to {offset}: it holds "
                                 f"{self.min_offset}..{self._written}")
            kept = [s for s in self.segments if s.base_offset < offset]
            for segment in self.segments[len(kept):]:
                segment.delete()
            if kept and offset < kept[-1].end_offset:
                kept[-1].truncate(offset - kept[-1].base_offset)
            self.segments = kept
            self._written = offset
            self._flushed = min(self._flushed, offset)
            self._replica_tail = b""
            self._prepare_next()

    def restart_at(self, offset: int) -> list[str]:
        """A slave rebuilding from its master's oldest segment: delete every segment and let
        the log start empty at `offset` (a segment base, so the first replicated segment is
        named and scanned as on the master). Returns the names of the deleted segments."""
        if offset < 0 or offset % self.segment_size:
            raise StoreError(f"a commitlog can only start at a segment base (a multiple of "
                             f"{self.segment_size}), not at {offset}: do the replicas share "
                             f"segment_size?")
        with self._append_lock:
            doomed, self.segments = self.segments, []
            for segment in reversed(doomed):   # newest first: what stays is contiguous
                segment.delete()
            self._written = self._flushed = offset
            self._replica_tail = b""
            self._queue_offsets = {}
            self._prepare_next()
        return [segment.path.name for segment in doomed]

    def drop_replica_tail(self) -> None:
        with self._append_lock:
            self._replica_tail = b""

    # -- read ------------------------------------------------------------------------------
    def read(self, offset: int, size: int, *, copy: bool = False) -> bytes | None:
        """Bytes [offset, offset+size) if they are inside one live segment, else None.
        `copy`: read with pread (big sequential reads of fresh data: the dispatcher)."""
        if offset < 0 or offset + size > self._written:
            return None
        segment = self.segment_for(offset)
        if segment is None or offset + size > segment.end_offset:
            return None
        position = offset - segment.base_offset
        if copy:
            return segment.read_copy(position, size)
        try:
            return segment.read(position, size)
        except ValueError:  # the segment was closed by retention while we read
            return None

    def record_size_at(self, offset: int) -> int | None:
        header = self.read(offset, 8)
        if header is None:
            return None
        total, magic = _SIZE_MAGIC.unpack_from(header)
        return total if magic == record.MESSAGE_MAGIC else None

    # -- flush and retention ---------------------------------------------------------------
    def flush(self) -> int:
        """fdatasync every segment holding unflushed bytes; returns the new flushed offset."""
        with self._flush_lock:
            target = self._written
            flushed = self._flushed
            if target > flushed:
                index = max(self._segment_index(flushed), 0)
                for segment in self.segments[index:]:
                    if segment.base_offset >= target:
                        break
                    segment.sync()
                self._flushed = target
            return self._flushed

    def segment_fds(self, start: int, end: int) -> list[int]:
        """Descriptors of the live segments holding bytes of [start, end), for a Syncer."""
        return [segment.fd for segment in self.segments
                if segment.base_offset < end and start < segment.end_offset and segment.fd >= 0]

    def mark_flushed(self, offset: int) -> None:
        """Bytes below `offset` were fdatasynced elsewhere (a Syncer). A racing flush() may
        set an older value back: understating what is durable is always safe."""
        if offset > self._flushed:
            self._flushed = offset

    def remove_oldest(self) -> Segment | None:
        """Drop the oldest segment unless it is the active one; returns it (already closed)."""
        with self._append_lock:
            if len(self.segments) < 2:
                return None
            oldest, self.segments = self.segments[0], self.segments[1:]
        oldest.delete()
        return oldest
