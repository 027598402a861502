"""IndexFile: hash index of `topic#key` → physical offset, for queries by key and unique id.

Layout (docs/storage.md): 40-byte header, then `slots` 4-byte slot heads, then `entries` 20-byte
entries chained newest-first through `prev_index`. Entry 0 is the null entry, so a slot value
of 0 means empty. Hashes collide by design: callers verify the records they get back.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from pathlib import Path

from .config import StoreError
from .mapped_file import MappedFile

HEADER = struct.Struct(">qqqqii")  # begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count
ENTRY = struct.Struct(">iqii")      # key_hash, phy_offset, time_diff_s, prev_index
SLOT = struct.Struct(">i")
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 40 and ENTRY.size == 20


def index_put_py(mm, slots: int, entries_at: int, count: int, begin_ts: int, end_ts: int,
                 entries: list[tuple[int, int, int]]) -> tuple[int, int]:
    """Chain (key hash, physical offset, store ms) entries into an IndexFile mapping (layout
    above) as entries `count`, `count + 1`, ...: each entry points at the previous head of its
    slot and becomes the head. Returns (count, end_ts) after them; the caller has checked that
    they fit. The contract of the C `index_put`, and its fallback."""
    slot_unpack, slot_pack, entry_pack = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
    last_ts = diff = None   # a batch's records share their store time: compute once
    for hashed, physical, store_ts in entries:
        slot_at = HEADER_SIZE + (hashed % slots) * 4
        previous = slot_unpack(mm, slot_at)[0]
        if not 0 <= previous < count:
            previous = 0
        if store_ts != last_ts:
            last_ts = store_ts
            diff = min(max((store_ts - begin_ts) // 1000, 0), 0x7FFFFFFF)
            end_ts = max(end_ts, store_ts)
        entry_pack(mm, entries_at + count * ENTRY.size, hashed, physical, diff, previous)
        slot_pack(mm, slot_at, count)
        count += 1
    return count, end_ts


try:  # the C loop of native/ (loops.ACCELERATED says whether the extension is installed)
    from tidemq_speedups import index_put
except ImportError:
    index_put = index_put_py


def key_hash(key: bytes) -> int:
    return zlib.crc32(key) & 0x7FFFFFFF


class IndexFile:
    def __init__(self, path: Path, slots: int, entries: int) -> None:
        self.slots = slots
        self.entries = entries
        self.file = MappedFile(path, HEADER_SIZE + slots * 4 + entries * 20, preallocate=False)
        mm = self.file.mm
        (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, slot_count,
         self.count) = HEADER.unpack_from(mm, 0)
        if self.count == 0:
            self.count = 1
        elif slot_count != slots:
            raise StoreError(
                f"index file {path} has {slot_count} slots but index_slots is {slots}; "
                "keep the configuration or delete the index directory to rebuild it"
            )
        self._entries_at = HEADER_SIZE + slots * 4
        # Truncations of the log (a returning old master): entries numbered below `count`
        # whose record starts at or past `offset` point at cut records. In memory only: after
        # a restart the reader's check of every hit (offset, CRC, key) filters them.
        self.cuts: list[tuple[int, int]] = []   # (count, offset)

    @property
    def full(self) -> bool:
        return self.count >= self.entries

    def put(self, key: bytes, physical_offset: int, store_ts_ms: int) -> None:
        self.put_many([(key, physical_offset, store_ts_ms)])

    def put_many(self, entries: list[tuple[bytes, int, int]]) -> int:
        """put() for a run of (key, physical offset, store ms); see put_hashed."""
        return self.put_hashed([(key_hash(key), physical, ts) for key, physical, ts in entries])

    def put_hashed(self, entries: list[tuple[int, int, int]]) -> int:
        """Index a run of (key_hash(key), physical offset, store ms); header written once.
        Returns how many entries it took (it stops when full)."""
        start = self.count
        if start == 1 and entries:
            self.begin_ts, self.begin_phy = entries[0][2], entries[0][1]
        taking = entries[:self.entries - start]
        count, end_ts = index_put(self.file.mm, self.slots, self._entries_at, start,
                                  self.begin_ts, self.end_ts, taking)
        if taking:
            self.end_ts = end_ts
            self.end_phy = taking[-1][1]
        self.count = count
        HEADER.pack_into(self.file.mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                         self.slots, self.count)
        self.file.dirty = True
        return count - start

    def _cut(self, index: int, physical: int) -> bool:
        return any(index < count and physical >= offset for count, offset in self.cuts)

    def query(self, key: bytes, begin_ms: int, end_ms: int, limit: int) -> list[int]:
        """Physical offsets of entries with this key hash stored within [begin_ms, end_ms]."""
        mm = self.file.mm
        hashed = key_hash(key)
        index = SLOT.unpack_from(mm, HEADER_SIZE + (hashed % self.slots) * 4)[0]
        found: list[int] = []
        while 0 < index < self.count and len(found) < limit:
            entry_hash, physical, diff_s, previous = ENTRY.unpack_from(
                mm, self._entries_at + index * 20
            )
            approx = self.begin_ts + diff_s * 1000  # stored in whole seconds
            if (entry_hash == hashed and approx <= end_ms and approx + 999 >= begin_ms
                    and not self._cut(index, physical)):
                found.append(physical)
            if previous >= index:  # chains only point backwards; anything else is damage
                break
            index = previous
        return found


class IndexService:
    """The list of index files: append to the newest, roll when full, query newest first."""

    def __init__(self, directory: Path, slots: int, entries: int) -> None:
        self.directory = directory
        self.slots = slots
        self.entries = entries
        self.files: list[IndexFile] = []
        self.resume_after = -1   # re-dispatch skips records at or below this physical offset
        self._lock = threading.Lock()

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in self.directory.iterdir() if p.name.isdigit())
        self.files = [IndexFile(self.directory / n, self.slots, self.entries) for n in names]

    def end_physical_offset(self) -> int:
        return self.files[-1].end_phy if self.files and self.files[-1].count > 1 else -1

    def put(self, keys: list[bytes], physical_offset: int, store_ts_ms: int) -> None:
        self.put_many([(key, physical_offset, store_ts_ms) for key in keys])

    def put_many(self, entries: list[tuple[bytes, int, int]]) -> None:
        """Index (key, physical offset, store ms) entries in order, skipping re-dispatched ones."""
        self.put_hashed([(key_hash(key), physical, ts) for key, physical, ts in entries])

    def put_hashed(self, entries: list[tuple[int, int, int]]) -> None:
        """put_many with the keys already hashed (key_hash; the dispatcher hashes `topic#key`
        without building it, continuing the CRC of `topic#`)."""
        if entries and entries[0][1] <= self.resume_after:
            entries = [e for e in entries if e[1] > self.resume_after]
        while entries:
            current = self.files[-1] if self.files else None
            if current is None or current.full:
                current = self._roll()
            entries = entries[current.put_hashed(entries):]

    def _roll(self) -> IndexFile:
        name = time.time_ns() // 1000
        if self.files:
            name = max(name, int(self.files[-1].file.path.name) + 1)
        index_file = IndexFile(self.directory / f"{name:020d}", self.slots, self.entries)
        with self._lock:
            self.files = [*self.files, index_file]
        return index_file

    def query(self, key: bytes, begin_ms: int, end_ms: int, limit: int) -> list[int]:
        found: list[int] = []
        for index_file in reversed(self.files):
            if index_file.count <= 1:
                continue
            if index_file.end_ts < begin_ms - 1000 or index_file.begin_ts > end_ms:
                continue
            try:
                found.extend(index_file.query(key, begin_ms, end_ms, limit - len(found)))
            except ValueError:  # removed by retention while we read
                continue
            if len(found) >= limit:
                break
        return found

    def flush(self) -> None:
        for index_file in self.files:
            index_file.file.sync()

    def hide_from(self, offset: int) -> None:
        """The log was cut at `offset`: hits at or past it become invisible (new entries for
        records appended there later stay visible), and re-dispatch indexes from there."""
        for index_file in self.files:
            if index_file.end_phy >= offset:
                index_file.cuts.append((index_file.count, offset))
        self.resume_after = min(self.resume_after, offset - 1)

    def delete_below(self, commitlog_min: int) -> None:
        while len(self.files) > 1 and self.files[0].end_phy < commitlog_min:
            with self._lock:
                oldest, self.files = self.files[0], self.files[1:]
            oldest.file.delete()

    def forget_all(self) -> int:
        """A replica rebuilding from its master: delete every index file (the dispatcher
        indexes the replicated records again). Returns how many files."""
        with self._lock:
            doomed, self.files = self.files, []
        for index_file in doomed:
            index_file.file.delete()
        self.resume_after = -1
        return len(doomed)

    def close(self) -> None:
        for index_file in self.files:
            index_file.file.close()
