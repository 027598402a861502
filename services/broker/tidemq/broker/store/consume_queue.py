"""ConsumeQueue: per (topic, queue) index of fixed 20-byte units into the CommitLog.

Unit i (queue offset i) lives at byte i*20 of the logical queue, split over fixed-size files
named by their first byte position (RocketMQ's layout). Units are written by position, so
dispatching the same record twice is harmless, which is what makes rebuilding safe.

A deleted topic's queues keep a `floor` file: the queue offset below which nothing is readable
any more. Offsets go on from it, so what consumers committed, pop cursors and Spark checkpoints
stay meaningful if the topic is created again (they start at its floor). A queue whose first
unit is not its first file's first (a replica rebuilt from its master's oldest segment, whose
queues start where retention left the master's) gets a floor too: below it the file is zeros,
and `load` finds the written units from there.
"""

from __future__ import annotations

import shutil
import struct
import threading
from pathlib import Path

from .config import CQ_UNIT_SIZE
from .mapped_file import MappedFile
from .metadata import MetadataFile, fsync_dir
from .segment import parse_segment_name, segment_name

UNIT = struct.Struct(">qiq")  # commitlog_offset 8 | size 4 | tag_hash 8
assert UNIT.size == CQ_UNIT_SIZE
_EMPTY_UNIT = bytes(CQ_UNIT_SIZE)
FLOOR_FILE = "floor"
# The tag hash of a unit compaction removed (compaction.py): a gap every reader skips. Tag
# hashes are CRC32s (0..2**32-1), so a negative one is never a real tag's.
GAP_TAG = -1
_TAG = struct.Struct(">q")
_TAG_AT = 12      # the tag hash's byte within a unit
GAPS_FILE = "gaps"   # present once a unit of the queue was ever marked a gap
_GAP_BYTE = _TAG.pack(GAP_TAG)[:1]
_PHYSICAL = struct.Struct(">q")   # a unit's CommitLog offset (its first field)
# A unit no record of which this replica has (below a relocated copy a rebuilt queue got
# first): a gap pointing at offset 0 with a non-zero size, so `load` counts it as written.
HOLE_UNIT = UNIT.pack(0, 1, GAP_TAG)
assert _TAG.pack(GAP_TAG) == _GAP_BYTE * _TAG.size


class ConsumeQueue:
    def __init__(self, directory: Path, topic: str, queue_id: int, units_per_file: int) -> None:
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.units_per_file = units_per_file
        self.file_size = units_per_file * CQ_UNIT_SIZE
        self.files: list[MappedFile] = []   # replaced, never mutated
        # (files, byte position of its first file): parsed once per list, not per lookup
        self._first_start: tuple[list[MappedFile] | None, int] = (None, 0)
        self._max = 0   # next queue offset to be written
        self._min = 0
        self._floor = 0   # as persisted in FLOOR_FILE
        self.has_gaps = False   # compaction marked units: readers take the gap-aware path
        # units rewritten in place that may lower the lowest live unit (truncation,
        # re-dispatch, a relocated copy given a unit): what min_live_physical scanned is stale
        self._mutations = 0
        # (mutations, min, max, lowest physical, its queue offset) as last scanned
        self._live_cache: tuple[int, int, int, int | None, int] = (-1, 0, 0, None, -1)
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        names = [path.name for path in self.directory.iterdir()]
        starts = sorted(start for name in names if (start := parse_segment_name(name)) is not None)
        floor = self._read_floor() if FLOOR_FILE in names else 0  # no extra open per queue
        self.has_gaps = GAPS_FILE in names
        self._floor = floor
        self.files = [MappedFile(self.directory / segment_name(s), self.file_size) for s in starts]
        while self.files and self._first_unit(self.files[0]) + self.units_per_file <= floor:
            self.files.pop(0).delete()   # left by a crash in the middle of a deletion
        self._min = self._max = floor
        if not self.files:
            return
        while len(self.files) > 1 and UNIT.unpack_from(self.files[-1].mm, 0)[1] == 0:
            self.files[-1].delete()   # emptied by a truncation after a crash
            self.files = self.files[:-1]
        self._min = max(floor, self._first_unit(self.files[0]))
        last = self.files[-1]
        # Units are written in order, so the written ones are a prefix of the last file (from
        # the floor, when the floor falls inside it).
        low, high = max(0, floor - self._first_unit(last)), self.units_per_file
        while low < high:
            mid = (low + high) // 2
            if UNIT.unpack_from(last.mm, mid * CQ_UNIT_SIZE)[1] > 0:
                low = mid + 1
            else:
                high = mid
        self._max = max(floor, self._first_unit(last) + low)

    def _read_floor(self) -> int:
        raw = MetadataFile(self.directory / FLOOR_FILE).read()
        return int(raw) if raw else 0

    def _first_unit(self, unit_file: MappedFile) -> int:
        return int(unit_file.path.name) // CQ_UNIT_SIZE

    def close(self) -> None:
        for unit_file in self.files:
            unit_file.close()

    # -- offsets ---------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self._max

    @property
    def min_offset(self) -> int:
        return self._min

    # -- write -----------------------------------------------------------------------------
    def put(self, queue_offset: int, physical_offset: int, size: int, tag_hash: int) -> None:
        if queue_offset < self._max:
            self._mutations += 1
        unit_file = self._file_for(queue_offset, create=True)
        UNIT.pack_into(
            unit_file.mm, (queue_offset % self.units_per_file) * CQ_UNIT_SIZE,
            physical_offset, size, tag_hash,
        )
        unit_file.dirty = True
        if queue_offset >= self._max:
            self._max = queue_offset + 1

    def put_units(self, first_offset: int, units: bytes | bytearray) -> None:
        """Write a run of consecutive units (packed with UNIT) starting at `first_offset`."""
        if first_offset != self._max:
            if first_offset < self._max:
                self._mutations += 1
            elif self.has_gaps and self.files:
                self._fill_holes(self._max, first_offset)   # after a relocated copy's unit
        view, offset = memoryview(units), first_offset
        while view:
            unit_file = self._file_for(offset, create=True)
            position = (offset % self.units_per_file) * CQ_UNIT_SIZE
            take = min(len(view), self.file_size - position)
            unit_file.mm[position:position + take] = view[:take]
            unit_file.dirty = True
            view, offset = view[take:], offset + take // CQ_UNIT_SIZE
        if offset > self._max:
            self._max = offset

    def _file_for(self, queue_offset: int, *, create: bool = False) -> MappedFile | None:
        start = (queue_offset - queue_offset % self.units_per_file) * CQ_UNIT_SIZE
        files = self.files
        if files:
            if self._first_start[0] is not files:   # `files` is replaced, never mutated
                self._first_start = (files, int(files[0].path.name))
            index = (start - self._first_start[1]) // self.file_size
            if 0 <= index < len(files):
                return files[index]
        if not create:
            return None
        with self._lock:
            if not self.files and queue_offset > self._floor:
                self._write_floor(queue_offset)   # before the unit: load() searches from it
            unit_file = MappedFile(self.directory / segment_name(start), self.file_size)
            self.files = sorted([*self.files, unit_file], key=lambda f: f.path.name)
            if len(self.files) == 1:
                self._min = queue_offset
        return unit_file

    def _write_floor(self, floor: int) -> None:
        MetadataFile(self.directory / FLOOR_FILE).write(str(floor).encode())
        self._floor = floor

    def truncate_beyond(self, commitlog_end: int) -> int:
        """Drop trailing units pointing past the end of the recovered CommitLog; returns count."""
        dropped = 0
        while self._max > self._min:
            unit = self.read_units(self._max - 1, 1)
            if unit and unit[0][0] + unit[0][1] <= commitlog_end:
                break
            unit_file = self._file_for(self._max - 1)
            if unit_file is not None:
                position = ((self._max - 1) % self.units_per_file) * CQ_UNIT_SIZE
                unit_file.mm[position:position + CQ_UNIT_SIZE] = _EMPTY_UNIT
                unit_file.dirty = True
            self._max -= 1
            self._mutations += 1
            dropped += 1
        while len(self.files) > 1 and self._first_unit(self.files[-1]) >= self._max:
            emptied, self.files = self.files[-1], self.files[:-1]
            emptied.delete()
        return dropped

    # -- read ------------------------------------------------------------------------------
    def read_raw(self, queue_offset: int, max_units: int) -> bytes:
        """Units from `queue_offset`, at most to the end of its file (never past max)."""
        unit_file = self._file_for(queue_offset)
        if unit_file is None:
            return b""
        count = min(max_units, self._max - queue_offset,
                    self.units_per_file - queue_offset % self.units_per_file)
        if count <= 0:
            return b""
        position = (queue_offset % self.units_per_file) * CQ_UNIT_SIZE
        try:
            return unit_file.mm[position:position + count * CQ_UNIT_SIZE]
        except ValueError:  # deleted by retention meanwhile
            return b""

    def read_units(self, queue_offset: int, max_units: int) -> list[tuple[int, int, int]]:
        return list(UNIT.iter_unpack(self.read_raw(queue_offset, max_units)))

    def physical_offset_of(self, queue_offset: int) -> int | None:
        units = self.read_raw(queue_offset, 1)
        return UNIT.unpack(units)[0] if units else None

    # -- maintenance -----------------------------------------------------------------------
    def drop_all(self) -> None:
        """The topic was deleted: nothing below the current end is readable any more, and the
        next unit goes on at that end. The floor is durable before any file goes."""
        floor = self._max
        self._write_floor(floor)
        with self._lock:
            doomed, self.files = self.files, []
            self._min = floor
        for unit_file in doomed:
            unit_file.delete()
        fsync_dir(self.directory)

    def start_at(self, offset: int) -> None:
        """A queue with no unit yet whose next offset is `offset`: a rebuilt replica's copy of
        a master queue whose records all went with retention (or a topic deletion)."""
        if self.files:
            raise ValueError(f"queue {self.topic}-{self.queue_id} already holds units")
        self._write_floor(offset)
        self._min = self._max = offset

    def flush(self) -> None:
        for unit_file in self.files:
            unit_file.sync()

    def mark_gaps(self, ranges: list[tuple[int, int]]) -> int:
        """Compaction: the units in these [start, end) ranges become gaps (their tag hash
        GAP_TAG); units not held (below the queue's first file, past its end) are skipped.
        Idempotent. Returns how many units were marked."""
        self._mark_irregular()   # before the first gap
        marked = 0
        for start, end in ranges:
            offset = max(start, 0)
            end = min(end, self._max)
            while offset < end:
                unit_file = self._file_for(offset)
                in_file = self.units_per_file - offset % self.units_per_file
                if unit_file is None:
                    offset += in_file
                    continue
                # Units below the max are all written (a prefix): the tag fields of the run
                # become GAP_TAG (all 0xFF bytes) in 8 strided copies, not a loop per unit.
                count = min(in_file, end - offset)
                at = (offset % self.units_per_file) * CQ_UNIT_SIZE + _TAG_AT
                stop = at + count * CQ_UNIT_SIZE
                for byte in range(_TAG.size):
                    unit_file.mm[at + byte:stop + byte:CQ_UNIT_SIZE] = _GAP_BYTE * count
                unit_file.dirty = True
                marked += count
                offset += count
        return marked

    def _mark_irregular(self) -> None:
        """Gaps or relocations: the units are no longer in CommitLog order, so readers and
        retention take the gap-aware paths (durable before the first such unit)."""
        if not self.has_gaps:
            MetadataFile(self.directory / GAPS_FILE).write(b"1")
            self.has_gaps = True

    def repoint(self, queue_offset: int, from_physical: int, to_physical: int,
                size: int) -> bool:
        """Relocation (relocation.py): the unit at `queue_offset` points at `to_physical`
        instead of `from_physical` (same size, same tag: a gap stays a gap). Only a unit that
        still points at `from_physical` moves, so a relocation applied again, or one a later
        relocation of the same record superseded, changes nothing (idempotent in log order).
        True if the unit moved."""
        raw = self.read_raw(queue_offset, 1) if queue_offset >= self._min else b""
        if not raw:
            return False
        physical, unit_size, _ = UNIT.unpack(raw)
        if physical != from_physical or unit_size != size:
            return False
        self._mark_irregular()
        unit_file = self._file_for(queue_offset)
        if unit_file is None:
            return False
        at = (queue_offset % self.units_per_file) * CQ_UNIT_SIZE
        unit_file.mm[at:at + 8] = _PHYSICAL.pack(to_physical)
        unit_file.dirty = True
        return True

    def put_relocated(self, queue_offset: int, physical: int, size: int, tag: int) -> bool:
        """A relocated copy whose queue offset has no unit here (a queue rebuilt from the log
        after its original's segment went): write the unit, holes (HOLE_UNIT) between it and
        the units there are; a floor above it (where the rebuilt queue's first unit went)
        moves down to it. A deleted topic's floor is never passed: in log order, no
        relocation of its records comes after its deletion marker. True if written."""
        if self._min <= queue_offset < self._max and self.read_raw(queue_offset, 1) not in (
                HOLE_UNIT, _EMPTY_UNIT):
            return False
        self._mark_irregular()
        self._mutations += 1
        if queue_offset < self._floor:
            self._write_floor(queue_offset)    # before the unit: load() searches from it
        empty = not self.files
        if not empty:
            self._cover(queue_offset, queue_offset + 1)   # the file list stays contiguous
            if queue_offset > self._max:
                self._fill_holes(self._max, queue_offset)
        self.put(queue_offset, physical, size, tag)
        if not empty and queue_offset < self._min:
            self._fill_holes(queue_offset + 1, self._min)
            with self._lock:
                self._min = queue_offset
        return True

    def _cover(self, start: int, end: int) -> None:
        """Create the unit files missing for [start, end) and between it and the files there
        are: `_file_for` finds a file by its distance from the first, so the list must have
        no hole."""
        files = self.files
        if not files:
            return
        per_file = self.units_per_file
        low = min(start - start % per_file, self._first_unit(files[0]))
        high = max(end, self._first_unit(files[-1]) + per_file)
        have = {self._first_unit(f) for f in files}
        missing = [first for first in range(low, high, per_file) if first not in have]
        if not missing:
            return
        created = [MappedFile(self.directory / segment_name(first * CQ_UNIT_SIZE),
                              self.file_size) for first in missing]
        with self._lock:
            self.files = sorted([*self.files, *created], key=lambda f: f.path.name)

    def _fill_holes(self, start: int, end: int) -> None:
        self._cover(start, end)
        offset = start
        while offset < end:       # a file's run of holes at a time
            unit_file = self._file_for(offset, create=True)
            count = min(end - offset, self.units_per_file - offset % self.units_per_file)
            at = (offset % self.units_per_file) * CQ_UNIT_SIZE
            unit_file.mm[at:at + count * CQ_UNIT_SIZE] = HOLE_UNIT * count
            unit_file.dirty = True
            offset += count
        if end > self._max:
            self._max = end

    def live_units(self, start: int | None = None, end: int | None = None):
        """(queue offset, physical offset, size, tag) of every unit in [start, end) (the
        minimum and the maximum by default) that is not a gap."""
        offset = self._min if start is None else max(start, self._min)
        end = self._max if end is None else min(end, self._max)
        while offset < end:
            raw = self.read_raw(offset, min(4096, end - offset))
            if not raw:
                return
            for index, (physical, size, tag) in enumerate(UNIT.iter_unpack(raw)):
                if tag != GAP_TAG and size > 0:
                    yield offset + index, physical, size, tag
            offset += len(raw) // CQ_UNIT_SIZE

    def min_live_physical(self) -> int | None:
        """The lowest CommitLog offset a readable unit of the queue points at (None: none).
        In an ordinary queue the first unit's; in a compacted one (gaps, relocated units out
        of log order) the minimum over every live unit."""
        if not self.has_gaps:
            return self.physical_offset_of(self._min) if self._min < self._max else None
        mutations, low, high, lowest, lowest_at = self._live_cache
        fresh = mutations == self._mutations and low == self._min and high <= self._max
        if fresh and lowest is not None:
            # gaps and repoints only remove a live unit or move it up the log: the minimum
            # holds unless they took the lowest one itself
            unit = self.read_raw(lowest_at, 1)
            fresh = bool(unit) and unit[:8] == _PHYSICAL.pack(lowest) and (
                UNIT.unpack(unit)[2] != GAP_TAG)
        if not fresh:
            high, lowest, lowest_at = self._min, None, -1   # whole; else only what is new
        now, end = self._mutations, self._max    # the dispatcher may append meanwhile
        for offset, physical, _, _ in self.live_units(high, end):
            if lowest is None or physical < lowest:
                lowest, lowest_at = physical, offset
        self._live_cache = (now, self._min, end, lowest, lowest_at)
        return lowest

    def first_live(self, queue_offset: int) -> int:
        """The first offset from `queue_offset` that is not a gap (the max if none is)."""
        if not self.has_gaps:
            return queue_offset
        while queue_offset < self._max:
            raw = self.read_raw(queue_offset, 4096)
            if not raw:
                return queue_offset
            for index, (_, _, tag) in enumerate(UNIT.iter_unpack(raw)):
                if tag != GAP_TAG:
                    return queue_offset + index
            queue_offset += len(raw) // CQ_UNIT_SIZE
        return queue_offset

    def is_gap(self, queue_offset: int) -> bool:
        units = self.read_raw(queue_offset, 1)
        return bool(units) and UNIT.unpack(units)[2] == GAP_TAG

    def expire_below(self, offset: int) -> bool:
        """Retention per topic: nothing below `offset` (at most the max) is readable any more.
        The floor is durable before files wholly below it go, so a restart keeps the
        expiry. True if the minimum moved."""
        offset = min(offset, self._max)
        if offset <= self._min:
            return False
        self._write_floor(offset)
        with self._lock:
            self._min = offset
        while len(self.files) > 1 and self._first_unit(self.files[1]) <= offset:
            with self._lock:
                first, self.files = self.files[0], self.files[1:]
            first.delete()
        return True

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Retention: forget files wholly below the CommitLog and skip units pointing there."""
        if self.has_gaps:
            self._correct_irregular_min(commitlog_min)
            return
        while len(self.files) > 1:
            first = self.files[0]
            last_unit = UNIT.unpack_from(first.mm, self.file_size - CQ_UNIT_SIZE)
            # Only a completely written file whose last record is gone may go.
            if (self._max < self._first_unit(self.files[1]) or last_unit[1] == 0
                    or last_unit[0] + last_unit[1] > commitlog_min):
                break
            with self._lock:
                self.files = self.files[1:]
            first.delete()
        if not self.files:
            return
        low = max(self._min, self._first_unit(self.files[0]))
        high = self._max
        while low < high:  # first unit whose record is still in the CommitLog
            mid = (low + high) // 2
            physical = self.physical_offset_of(mid)
            if physical is not None and physical >= commitlog_min:
                high = mid
            else:
                low = mid + 1
        self._min = low

    def _correct_irregular_min(self, commitlog_min: int) -> None:
        """correct_min_offset for a compacted queue, whose units are not in log order (a
        relocated record's unit points past later ones): skip the leading units whose record
        is gone (gap or not), never a readable one, and forget the files wholly below."""
        low = self._min
        while low < self._max:
            raw = self.read_raw(low, 4096)
            if not raw:
                break
            stop = next((index for index, (physical, _, _) in enumerate(UNIT.iter_unpack(raw))
                         if physical >= commitlog_min), None)
            if stop is not None:
                low += stop
                break
            low += len(raw) // CQ_UNIT_SIZE
        while len(self.files) > 1 and self._first_unit(self.files[1]) <= low:
            with self._lock:
                first, self.files = self.files[0], self.files[1:]
            first.delete()
        self._min = low


class ConsumeQueueTable:
    """All consume queues of the store, by (topic, queue_id)."""

    def __init__(self, directory: Path, units_per_file: int) -> None:
        self.directory = directory
        self.units_per_file = units_per_file
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    self.get_or_create(topic_dir.name, int(queue_dir.name))

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            with self._lock:
                queue = self._queues.get((topic, queue_id))
                if queue is None:
                    queue = ConsumeQueue(self.directory / topic / str(queue_id), topic, queue_id,
                                         self.units_per_file)
                    queue.load()
                    self._queues = {**self._queues, (topic, queue_id): queue}
        return queue

    def all(self) -> list[ConsumeQueue]:
        return list(self._queues.values())

    def drop_topic(self, topic: str) -> list[ConsumeQueue]:
        """Every queue of a deleted topic drops what it holds (ConsumeQueue.drop_all)."""
        dropped = [queue for (name, _), queue in self._queues.items() if name == topic]
        for queue in dropped:
            queue.drop_all()
        return dropped

    def forget_topic(self, topic: str) -> None:
        """Close the topic's queues and delete their files and floors, to be rebuilt by
        re-dispatching the log (a truncation cut the marker their floors came from)."""
        with self._lock:
            doomed = [queue for (name, _), queue in self._queues.items() if name == topic]
            self._queues = {key: queue for key, queue in self._queues.items()
                            if key[0] != topic}
        for queue in doomed:
            queue.close()
        if (self.directory / topic).exists():
            shutil.rmtree(self.directory / topic)
            fsync_dir(self.directory)

    def forget_all(self) -> int:
        """A replica rebuilding from its master: close every queue and delete every file and
        floor (the dispatcher rebuilds them from the replicated log). Returns how many queues."""
        with self._lock:
            doomed, self._queues = list(self._queues.values()), {}
        for queue in doomed:
            queue.close()
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        fsync_dir(self.directory.parent)
        return len(doomed)

    def max_offsets(self) -> dict[tuple[str, int], int]:
        return {key: queue.max_offset for key, queue in self._queues.items()}

    def flush(self) -> None:
        for queue in self.all():
            queue.flush()

    def close(self) -> None:
        for queue in self.all():
            queue.close()
