"""The scan of a property-filtered (SQL92) read: which units of a queue to answer with.

Like the tag-filtered scan of reader.py it walks ConsumeQueue units from an offset, but each
candidate's properties must be read from the CommitLog. Consecutive units whose records lie
back to back in the log (one producer batch, typically) are read as one block, so a run of
records costs one read, not one per record; each record's properties are then sliced out of
the block by its body and topic lengths and handed to the filter — the body is never decoded.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemq.common import record

from .commitlog import CommitLog
from .consume_queue import GAP_TAG, UNIT, ConsumeQueue
from .loops import extend_runs

# Records whose properties one read may evaluate before answering NO_MATCHED_MESSAGE: the bound
# keeps one pull's work short (what a record and a pull cost: docs/storage.md, "Measured
# figures"); the consumer continues from where the scan stopped.
MAX_PROPERTY_FILTER_SCAN = 4_000
BLOCK_MAX = 64 * 1024   # bytes of back-to-back records read at once
UNITS_PER_READ = 1024
PropertyFilter = Callable[[bytes], bool]   # encoded record properties -> matches
_HEADER = record.HEADER_SIZE
_BODY_LEN = record.OFF_BODY_LEN


def scan_properties(commitlog: CommitLog, queue: ConsumeQueue, queue_offset: int, high: int,
                    max_messages: int, max_bytes: int, tag_hashes: frozenset[int] | None,
                    accepts: PropertyFilter) -> tuple[list[list[int]], int, int]:
    """([start, end, record count] runs of matching records, next offset, units scanned)."""
    scan_limit = max(max_messages, MAX_PROPERTY_FILTER_SCAN)
    runs: list[list[int]] = []
    offset, count, total_bytes, scanned = queue_offset, 0, 0, 0
    floor = commitlog.min_offset
    block, block_start, block_end = b"", -1, -1
    done = max_messages <= 0
    while not done and offset < high and scanned < scan_limit:
        raw = queue.read_raw(offset, min(scan_limit - scanned, UNITS_PER_READ, high - offset))
        if not raw:
            break
        for index, (physical, size, tag) in enumerate(UNIT.iter_unpack(raw)):
            if count >= max_messages or (count and total_bytes + size > max_bytes):
                done = True
                break
            offset += 1
            scanned += 1
            if physical < floor or (tag_hashes is not None and tag not in tag_hashes) or (
                    tag == GAP_TAG):
                continue
            if not block_start <= physical < block_end:
                end = _run_end(raw, index, physical + size, physical + BLOCK_MAX)
                block = commitlog.read(physical, end - physical)
                if block is None:  # removed by retention while we read
                    block_start = block_end = -1
                    continue
                block_start, block_end = physical, end
            at = physical - block_start
            topic_at = at + _HEADER + int.from_bytes(block[at + _BODY_LEN:at + _HEADER], "big")
            if not accepts(block[topic_at + 3 + block[topic_at]:at + size]):
                continue
            extend_runs(runs, physical, size)
            count += 1
            total_bytes += size
    return runs, offset, scanned


def _run_end(raw: bytes, index: int, end: int, limit: int) -> int:
    """Where the run of back-to-back records starting at unit `index` of `raw` ends, capped
    at `limit` (so a pull that needs a few records does not read a long run)."""
    unpack, step = UNIT.unpack_from, UNIT.size
    for at in range((index + 1) * step, len(raw), step):
        physical, size, _ = unpack(raw, at)
        if physical != end or end + size > limit:
            break
        end += size
    return end
