"""One CommitLog segment: a fixed-size memory-mapped file named by its base physical offset.

A segment knows its file, its base offset and how to validate the records inside it; it knows
nothing about queues, flushing policy or other segments (Kafka's LogSegment).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import record

from .mapped_file import MappedFile

NAME_DIGITS = 20
# A segment always keeps room for a blank filler (total_size + magic) at its end.
FILLER_MIN = record.BLANK_HEADER.size
MIN_RECORD_SIZE = record.HEADER_SIZE + 3
# total, magic, record_crc, physical_offset, store_timestamp, body_len
_SCAN_FIELDS = struct.Struct(">iII16xq20xq20xi")
assert _SCAN_FIELDS.size == record.HEADER_SIZE
_U16 = struct.Struct(">H")
_SMALL_WRITE = 16 * 1024


_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_libc = ctypes.CDLL(None, use_errno=True)
_fallocate = _libc.fallocate
_fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
_ZEROS = bytes(1 << 20)


def zero_range(fd: int, offset: int, length: int) -> None:
    """Zero [offset, offset + length) of the file without changing its size (Linux punches
    a hole, then allocates it again: no per-byte writes); where the filesystem cannot punch
    holes, zeros are written."""
    if length <= 0:
        return
    if _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        os.posix_fallocate(fd, offset, length)
        return
    error = ctypes.get_errno()
    if error not in (errno.EOPNOTSUPP, errno.ENOSYS):
        raise OSError(error, os.strerror(error))
    end = offset + length
    while offset < end:
        offset += os.pwrite(fd, memoryview(_ZEROS)[:min(len(_ZEROS), end - offset)], offset)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    return int(name) if len(name) == NAME_DIGITS and name.isdigit() else None


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Where the valid records of a segment end, and why the scan stopped there."""

    valid_end: int          # position (within the segment) after the last valid record
    records: int
    ended_with_filler: bool  # the segment is complete; the log continues in the next one
    clean_end: bool          # stopped on zeros (never written), not on a damaged record


class Segment(MappedFile):
    """Fixed-size file, mapped for reads; blocks are allocated up front so a full disk cannot
    SIGBUS a reader or fail an append halfway."""

    def __init__(self, path: Path, base_offset: int, size: int) -> None:
        super().__init__(path, size, preallocate=True)
        self.base_offset = base_offset

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.size

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        # Large batches: pwrite into the page cache the mapping reads from; the first write
        # fault on a page of a shared mapping made big copies several times slower.
        if len(data) <= _SMALL_WRITE:
            # Small batches are copied into the mapping with the GIL held: a syscall inside
            # the append lock lets every other appender thread run into that lock and sleep
            # on it (figures: docs/architecture.md, "Measurements behind the code").
            self.mm[position:position + len(data)] = data
            return
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, position)
            view, position = view[written:], position + written

    def read(self, position: int, size: int) -> bytes:
        return self.mm[position:position + size]

    def read_copy(self, position: int, size: int) -> bytes | None:
        """read() by the kernel (pread, GIL released) instead of through the mapping, whose
        first touch of freshly written pages faults under the GIL (several times the pread
        cost per KiB). None if the segment was closed meanwhile: the mapping is closed before the
        descriptor, so an open mapping after the pread means the descriptor was this file's."""
        try:
            data = os.pread(self._fd, size, position)
        except OSError:
            return None
        return data if len(data) == size and not self.mm.closed else None

    def write_filler(self, position: int) -> None:
        self.write(position, record.BLANK_HEADER.pack(self.size - position, record.BLANK_MAGIC))

    def sync(self) -> None:
        """fdatasync: on Linux this writes back pages dirtied through the mapping too."""
        fd = self._fd
        if fd >= 0:  # a segment deleted by retention meanwhile has nothing left to flush
            os.fdatasync(fd)

    def truncate(self, position: int) -> None:
        """Discard everything from `position` on (zero it), keeping the file size and blocks,
        so stale bytes of a cut tail can never be mistaken for records later.

        The file never shrinks, not even for a moment: readers (pulls, the dispatcher) may be
        reading through the mapping, and a page past the end of a mapped file is a SIGBUS.
        """
        zero_range(self._fd, position, self.size - position)
        os.fsync(self._fd)

    def scan(self, start: int = 0) -> ScanResult:
        """Walk records from `start`, CRC-checking each; stop at the first invalid one.

        A record counts only if its CRC is right, its physical_offset field is its own position
        and its store timestamp is set: stale bytes, a copy of another record or a producer's
        unstamped bytes (whose own CRC is right) are never taken for log records.
        """
        mm, pos, count, size, base = self.mm, start, 0, self.size, self.base_offset
        fields, short_at, crc32 = _SCAN_FIELDS.unpack_from, _U16.unpack_from, record.record_crc32
        with memoryview(mm) as view:
            while pos + FILLER_MIN <= size:
                total, magic = record.BLANK_HEADER.unpack_from(mm, pos)
                if magic == record.BLANK_MAGIC and total == size - pos:
                    return ScanResult(pos, count, True, True)
                end = pos + total
                if (magic != record.MESSAGE_MAGIC or total < MIN_RECORD_SIZE
                        or end + FILLER_MIN > size):
                    return ScanResult(pos, count, False, total == 0 and magic == 0)
                _, _, crc, physical, store_ts, body_len = fields(mm, pos)
                body_end = pos + record.HEADER_SIZE + body_len
                if physical != base + pos or store_ts == 0 or not (
                    pos + record.HEADER_SIZE <= body_end <= end - 3
                ):
                    return ScanResult(pos, count, False, False)
                topic_end = body_end + 1 + mm[body_end]
                if (topic_end + 2 > end or topic_end + 2 + short_at(mm, topic_end)[0] != end
                        or crc32(view[pos + record.CRC_START:end]) != crc):
                    return ScanResult(pos, count, False, False)
                pos = end
                count += 1
        return ScanResult(pos, count, False, True)
