"""The store's per-record loops: stamping at append; scanning at dispatch; the units of a
pull (index chaining, the fourth, lives with its file layout in index.py).

They are most of the store's per-message Python work, so they run in C when the
`tidemq_speedups` extension (native/) is installed; the Python functions here define the
contract and are the fallback. tests/unit/store/test_loops.py holds both to identical results
on random batches. `ACCELERATED` tells which one runs (logged at start, shown by the bench).
"""

from __future__ import annotations

import re
import struct
import zlib
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

from tidemq.common import record

from .config import CQ_UNIT_SIZE, InvalidBatch, MessageTooLarge, StoreError
from .consume_queue import UNIT
from .segment import FILLER_MIN, MIN_RECORD_SIZE

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_SIZE_MAGIC = struct.Struct(">iI")
# What stamping reads of a record: total_size, magic, the producer's flag and the producer's
# sys_flag/born_timestamp/born_host (rewritten unchanged), body_len.
_HEAD = struct.Struct(">iI8x4s16x20s28xi")
# What stamping writes from OFF_QUEUE_ID in one call: queue_id, flag (unchanged), queue_offset,
# physical_offset, the producer's 20 bytes (unchanged), store_timestamp + store_host.
_STAMP = struct.Struct(">i4sqq20s16s")
assert _HEAD.size == record.HEADER_SIZE and 12 + _STAMP.size == record.OFF_RECONSUME_TIMES
assert (record.OFF_QUEUE_ID, record.OFF_FLAG, record.OFF_QUEUE_OFFSET, record.OFF_PHYSICAL_OFFSET,
        record.OFF_SYS_FLAG, record.OFF_STORE_TIMESTAMP, record.OFF_STORE_HOST,
        record.OFF_BODY_LEN) == (12, 16, 20, 28, 36, 56, 64, 84)
# total, magic, queue_id, queue_offset, physical_offset, store_timestamp, body_len
_DISPATCH_FIELDS = struct.Struct(">iI4xi4xqq20xq20xi")
assert _DISPATCH_FIELDS.size == record.HEADER_SIZE

# (pos, queue_offset, cursor, segment_end, chunk_phys, chunk_start, physical offsets,
#  new chunks (physical offset, buffer start, buffer end, filler offset))
Stamped = tuple[int, int, int, int, int, int, list[int], list[tuple[int, int, int, int]]]
# (topic, queue id, first queue offset, unit start, unit end): consecutive units of one queue
Run = tuple[bytes, int, int, int, int]
# (pos, reached a filler, no record at pos, runs, index entries (key hash, physical, store ms))
Scanned = tuple[int, bool, bool, list[Run], list[tuple[int, int, int]]]


def stamp_batch_py(buf: bytearray, pos: int, size: int, topic_field: bytes, queue_id: int,
                   queue_offset: int, cursor: int, segment_end: int, segment_size: int,
                   max_size: int, stamp: bytes, chunk_phys: int, chunk_start: int) -> Stamped:
    """Validate the records of buf[pos:size] (one producer batch for `topic_field`, its
    length byte + name) and stamp queue id, queue offset, physical offset, store time and
    host and the CRC in place; a record that would cross `segment_end` starts the next
    segment (a new chunk). Raises the StoreError of the first invalid record."""
    head, short_at, pack_stamp = _HEAD.unpack_from, _U16.unpack_from, _STAMP.pack_into
    pack_crc, crc32, header_size = _U32.pack_into, zlib.crc32, record.HEADER_SIZE
    physical_offsets: list[int] = []
    chunks: list[tuple[int, int, int, int]] = []
    with memoryview(buf) as view:
        while pos < size:
            index = len(physical_offsets)
            if pos + header_size > size:
                raise InvalidBatch(f"record {index} is truncated")
            total, magic, flag, producer_fields, body_len = head(buf, pos)
            end = pos + total
            if (magic != record.MESSAGE_MAGIC or total < MIN_RECORD_SIZE or end > size
                    or total > max_size):
                raise _rejection(index, total, magic, size - pos, max_size)
            body_end = pos + header_size + body_len
            if not pos + header_size <= body_end <= end - 3:
                raise InvalidBatch(f"record {index} has a bad body_len")
            topic_end = body_end + len(topic_field)
            if not buf.startswith(topic_field, body_end):
                topic = topic_field[1:].decode(errors="replace")
                raise InvalidBatch(f"record {index} is not for topic {topic!r}")
            if topic_end + 2 > end or topic_end + 2 + short_at(buf, topic_end)[0] != end:
                raise InvalidBatch(f"record {index}: field lengths do not add up")
            if cursor + total + FILLER_MIN > segment_end:
                chunks.append((chunk_phys, chunk_start, pos, cursor))
                cursor = chunk_phys = segment_end
                chunk_start = pos
                segment_end += segment_size
            pack_stamp(buf, pos + 12, queue_id, flag, queue_offset, cursor, producer_fields,
                       stamp)
            pack_crc(buf, pos + 8, crc32(view[pos + 12:end]))
            physical_offsets.append(cursor)
            queue_offset += 1
            cursor += total
            pos = end
    return (pos, queue_offset, cursor, segment_end, chunk_phys, chunk_start, physical_offsets,
            chunks)


def _rejection(index: int, total: int, magic: int, remaining: int, max_size: int) -> StoreError:
    if magic != record.MESSAGE_MAGIC:
        return InvalidBatch(f"record {index} has a bad magic {magic:#x}")
    if total > max_size:
        return MessageTooLarge(f"record {index} is {total} bytes; the limit is {max_size}")
    return InvalidBatch(f"record {index} has total_size {total} but {remaining} bytes remain")


# The properties exactly as producers encode them (tags, optional keys, unique id, each ending
# in the separator) matched in one C call; anything else takes the general search below. A
# value cannot hold the separator, so a full match is the one and only parse.
_COMMON_PROPERTIES = re.compile(
    rb"TAGS\x01([^\x02]*)\x02(?:KEYS\x01([^\x02]*)\x02)?UNIQ_KEY\x01([^\x02]*)\x02"
)
TAGS_NAME = b"TAGS\x01"
KEYS_NAME = b"KEYS\x01"
UNIQ_NAME = b"UNIQ_KEY\x01"


def property_value(properties: bytes, needle: bytes) -> bytes | None:
    """Value of the property whose `name\\x01` is `needle`, without decoding the others."""
    at = properties.find(needle)
    while at > 0 and properties[at - 1] != 2:
        at = properties.find(needle, at + 1)
    if at < 0:
        return None
    start = at + len(needle)
    end = properties.find(b"\x02", start)
    return properties[start:end if end >= 0 else len(properties)]


def scan_chunk_py(chunk: bytes, units: bytearray) -> Scanned:
    """Read the CommitLog records at the start of `chunk` (records the log validated and
    stamped): one ConsumeQueue unit per record packed into `units` (tag hash = crc32 of
    TAGS), index entries for UNIQ_KEY and each KEYS key (crc32 of `topic#key`, continued from
    that of `topic#`), grouped in runs of consecutive offsets of one queue. Stops at a
    filler, at a record the chunk cuts, or where no record is (`bad`)."""
    runs: list[Run] = []
    entries: list[tuple[int, int, int]] = []
    pos, size, filler, bad = 0, len(chunk), False, False
    fields, pack_unit, crc32 = _DISPATCH_FIELDS.unpack_from, UNIT.pack_into, zlib.crc32
    find, startswith, common = chunk.find, chunk.startswith, _COMMON_PROPERTIES.fullmatch
    header_size, message_magic = record.HEADER_SIZE, record.MESSAGE_MAGIC
    unit_at, run_topic, run_queue_id, run_first, run_next, run_start = 0, b"", -1, 0, -1, 0
    # The run's topic field (length byte + name), so a record of the same queue is recognised
    # without slicing its topic out.
    topic_field, props_skip, key_crc = b"\xff", 0, 0
    while pos + header_size <= size:
        total, magic, queue_id, queue_offset, physical, store_ts, body_len = fields(chunk, pos)
        if magic != message_magic or total <= 0:
            filler = magic == record.BLANK_MAGIC
            bad = not filler
            break
        end = pos + total
        if end > size:
            break
        topic_at = pos + header_size + body_len
        same_queue = queue_id == run_queue_id and startswith(topic_field, topic_at)
        if not same_queue or queue_offset != run_next:
            if unit_at > run_start:
                runs.append((run_topic, run_queue_id, run_first, run_start, unit_at))
            if not same_queue:
                topic_end = topic_at + 1 + chunk[topic_at]
                run_topic, run_queue_id = chunk[topic_at + 1:topic_end], queue_id
                topic_field = chunk[topic_at:topic_end]
                props_skip = topic_end + 2 - topic_at
                key_crc = crc32(run_topic + b"#")
            run_first, run_start = queue_offset, unit_at
        run_next = queue_offset + 1
        props_at = topic_at + props_skip
        parsed = common(chunk, props_at, end)
        if parsed is not None:
            tags, raw_keys, uniq = parsed.groups()
        else:
            props = chunk[props_at:end]
            tags = property_value(props, TAGS_NAME)
            raw_keys = property_value(props, KEYS_NAME) if find(KEYS_NAME, props_at, end) >= 0 else None
            uniq = property_value(props, UNIQ_NAME)
        pack_unit(units, unit_at, physical, total, crc32(tags) if tags else 0)
        unit_at += CQ_UNIT_SIZE
        if uniq:
            entries.append((crc32(uniq, key_crc) & 0x7FFFFFFF, physical, store_ts))
        if raw_keys:
            entries.extend((crc32(key, key_crc) & 0x7FFFFFFF, physical, store_ts)
                           for key in raw_keys.split(b" ") if key)
        pos = end
    else:  # fewer than a header's bytes left: a filler (8 bytes) or a record cut by the chunk
        if pos + 8 <= size and _SIZE_MAGIC.unpack_from(chunk, pos)[1] == record.BLANK_MAGIC:
            filler = True
    if unit_at > run_start:
        runs.append((run_topic, run_queue_id, run_first, run_start, unit_at))
    return pos, filler, bad, runs, entries


@lru_cache(maxsize=64)
def _units_struct(units: int) -> struct.Struct:
    return struct.Struct(">" + "qiq" * units)


def extend_runs(runs: list[list[int]], physical: int, size: int) -> None:
    """Add the record [physical, physical + size) to `runs` ([start, end, record count]
    each): to the last run when it starts where that one ends (back to back in the CommitLog,
    as one producer batch's records are), else as a new run. What makes a run, written once:
    the pull scans (reader.py, property_scan.py) and `unit_runs` group records by it."""
    if runs and runs[-1][1] == physical:
        last = runs[-1]
        last[1] += size
        last[2] += 1
    else:
        runs.append([physical, physical + size, 1])


def unit_runs_py(units: bytes, max_bytes: int) -> tuple[int, list[tuple[int, int]]]:
    """The ConsumeQueue units of an unfiltered pull: how many to take (their sizes adding up
    to `max_bytes`, at least one) and the CommitLog runs they make (`extend_runs`),
    [(physical offset, length)]."""
    count = len(units) // CQ_UNIT_SIZE
    values = _units_struct(count).unpack_from(units)
    take = max(1, bisect_right(list(accumulate(values[1::3])), max_bytes))
    runs: list[list[int]] = []
    for physical, size in zip(values[0:3 * take:3], values[1:3 * take:3], strict=True):
        extend_runs(runs, physical, size)
    return take, [(start, end - start) for start, end, _ in runs]


try:
    from tidemq_speedups import scan_chunk as _scan_chunk_c
    from tidemq_speedups import stamp_batch as _stamp_batch_c
    from tidemq_speedups import unit_runs as _unit_runs_c
except ImportError:  # not built here: the Python loops, same results, slower
    ACCELERATED = False
    stamp_batch = stamp_batch_py
    scan_chunk = scan_chunk_py
    unit_runs = unit_runs_py
else:
    ACCELERATED = True
    scan_chunk = _scan_chunk_c
    unit_runs = _unit_runs_c

    def stamp_batch(*args) -> Stamped:  # noqa: D103 - stamp_batch_py's contract
        stamped = _stamp_batch_c(*args)
        if stamped is None:  # an invalid record: the Python loop names it precisely
            return stamp_batch_py(*args)
        return stamped
