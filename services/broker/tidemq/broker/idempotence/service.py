"""Idempotent sends on the broker: the hook the Send path calls when a batch asks for it.

A batch with `idempotent = true` names its producer; each record carries UNIQ_KEY and the
property PRODUCER_ID (the same producer id, so the table can be rebuilt from the log). Records
whose unique id this producer already stored within the window are dropped; the rest are
appended as one batch (slices of the request's bytes, never re-encoded) and remembered. The
answer gives every record's offsets, a duplicate's being its original's, so a client that
replays a batch sees it succeed where it was first stored.

The table lives in memory and is rebuilt from the CommitLog tail (`rebuild_bytes`) the first
time it is needed on a master: after a restart, and after a promotion (the replica's log is the
old master's, so it holds the old master's idempotent records). Batches without the flag never
come here: no per-message work for them.

Sequenced sends (Kafka's idempotent producer, sequences.py) come here too: a batch naming a
numeric producer id, epoch and base sequence is checked against that producer's state on the
queue (kept in `sequences`, rebuilt from the same CommitLog tail from the PRODUCER_SEQUENCE
property of each batch's first record); the bodies are never looked at.
"""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from tidemq.broker.deadlines import answer_within_deadline
from tidemq.broker.idempotence.sequences import (
    SequenceTable,
    StoredBatch,
    last_sequence,
)
from tidemq.broker.idempotence.table import ProducerTable, StoredAt
from tidemq.broker.messaging import Messaging
from tidemq.broker.store import AppendStatus
from tidemq.broker.store.commitlog import CommitLog
from tidemq.broker.store.config import NotMaster
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PreconditionFailed
from tidemq.common.logs import get_logger
from tidemq.common.record import PROP_PRODUCER_ID, PROP_PRODUCER_SEQUENCE

log = get_logger(__name__)

_SIZE_MAGIC = struct.Struct(">iI")
_READ_CHUNK = 4 << 20   # rebuild reads the log in pieces of this size
_LOCK_STRIPES = 64      # producers hash onto this many locks: check-then-append is atomic


@dataclass(frozen=True, slots=True)
class IdempotentSettings:
    window_ms: int = 600_000
    window_messages: int = 100_000
    max_producers: int = 1000
    rebuild_bytes: int = 256 << 20
    max_sequenced: int = 100_000   # (producer, queue) entries of sequenced sends kept


class IdempotentResult(NamedTuple):
    """AppendResult's fields plus what was dropped; offsets cover every record of the batch."""

    status: AppendStatus
    first_queue_offset: int
    physical_offsets: list[int]
    duplicates: int
    queue_offsets: list[int]


def batch_unique_ids(records: bytes, record_count: int, producer_id: str) -> list[tuple[int, int, str]]:
    """[(start, end, unique id)] of each record; refuses a batch whose records lack UNIQ_KEY,
    name another producer, or do not match `record_count`."""
    try:
        found = record.scan_records(records, verify_crc=False)
    except record.RecordFormatError as exc:
        raise InvalidArgument(f"rejected idempotent batch: {exc}") from None
    if len(found) != record_count:
        raise InvalidArgument(f"record_count {record_count} does not match the "
                              f"{len(found)} records sent")
    out = []
    for index, (pos, header) in enumerate(found):
        unique_id = (record.property_at(records, pos, header, record.PROP_IDEMPOTENCE_KEY)
                     or record.property_at(records, pos, header, record.PROP_UNIQ_KEY))
        if not unique_id:
            raise InvalidArgument(f"record {index} of an idempotent batch has no UNIQ_KEY")
        owner = record.property_at(records, pos, header, PROP_PRODUCER_ID)
        if owner != producer_id:
            raise InvalidArgument(f"record {index} carries {PROP_PRODUCER_ID}={owner!r} but the "
                                  f"batch's producer_id is {producer_id!r}")
        out.append((pos, pos + header[0], unique_id))
    return out


class SequencedAt(NamedTuple):
    """A sequenced batch found in the log (its first record's PRODUCER_SEQUENCE)."""

    producer_id: int
    epoch: int
    topic: str
    queue_id: int
    batch: StoredBatch


def parse_sequence(value: str) -> tuple[int, int, int, int]:
    """(producer id, epoch, first sequence, last sequence) of a PRODUCER_SEQUENCE value."""
    producer_id, epoch, first, last = (int(part) for part in value.split(":"))
    return producer_id, epoch, first, last


def format_sequence(producer_id: int, epoch: int, first: int, last: int) -> str:
    return f"{producer_id}:{epoch}:{first}:{last}"


def scan_idempotent(commitlog: CommitLog, start: int, end: int
                    ) -> Iterator[tuple[str, str, StoredAt] | SequencedAt]:
    """(producer id, unique id, where) of each idempotent record stored in [start, end), and
    a SequencedAt for each sequenced batch, in log order; `start` is a segment base or record
    boundary."""
    for segment in list(commitlog.segments):
        pos = max(start, segment.base_offset)
        limit = min(end, segment.end_offset)
        size = _READ_CHUNK
        while pos < limit:
            chunk = commitlog.read(pos, min(size, limit - pos), copy=True)
            if not chunk:
                break
            consumed, found = _scan_chunk(chunk, pos)
            yield from found
            if consumed == 0:
                if len(chunk) < 8:
                    break
                total, magic = _SIZE_MAGIC.unpack_from(chunk, 0)
                if magic != record.MESSAGE_MAGIC or total <= len(chunk):
                    break   # a filler (the segment's end) or an unreadable record
                size = total   # one record larger than a chunk: read it whole
                continue
            pos, size = pos + consumed, _READ_CHUNK


def _scan_chunk(chunk: bytes, base: int
                ) -> tuple[int, list[tuple[str, str, StoredAt] | SequencedAt]]:
    """(bytes of whole records consumed, records found); 0 consumed = stop in this segment."""
    i, found, marker = 0, [], f"\x02{PROP_PRODUCER_ID}\x01".encode()
    sequenced = f"{PROP_PRODUCER_SEQUENCE}\x01".encode()
    while i + 8 <= len(chunk):
        total, magic = _SIZE_MAGIC.unpack_from(chunk, i)
        if magic != record.MESSAGE_MAGIC or total < record.HEADER_SIZE:
            return i, found
        if i + total > len(chunk):
            break
        header = record.HEADER.unpack_from(chunk, i)
        if chunk.find(marker[1:], i, i + total) >= 0:
            producer_id = record.property_at(chunk, i, header, PROP_PRODUCER_ID)
            unique_id = (record.property_at(chunk, i, header, record.PROP_IDEMPOTENCE_KEY)
                         or record.property_at(chunk, i, header, record.PROP_UNIQ_KEY))
            if producer_id and unique_id:
                topic = record.topic_at(chunk, i, header)
                found.append((producer_id, unique_id, StoredAt(
                    topic, header[3], header[5], base + i, header[record.H_STORE_TIMESTAMP])))
        elif chunk.find(sequenced, i, i + total) >= 0:
            value = record.property_at(chunk, i, header, PROP_PRODUCER_SEQUENCE)
            try:
                producer, epoch, first, last = parse_sequence(value or "")
            except ValueError:
                log.warning("unreadable PRODUCER_SEQUENCE skipped", value=value, at=base + i)
            else:
                count = (last - first) % (1 << 31) + 1
                found.append(SequencedAt(producer, epoch, record.topic_at(chunk, i, header),
                                         header[3], StoredBatch(first, last, header[5],
                                                                base + i, count)))
        i += total
    return i, found


class IdempotentSends:
    def __init__(self, messaging: Messaging, settings: IdempotentSettings,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.messaging = messaging
        self.settings = settings
        self.now_ms = now_ms
        self.table = ProducerTable(window_ms=settings.window_ms,
                                   window_messages=settings.window_messages,
                                   max_producers=settings.max_producers)
        self.sequences = SequenceTable(settings.max_sequenced)
        self._built_for: int | None = None    # the epoch the table was rebuilt for
        self._build_lock: asyncio.Lock | None = None
        self._stripes: list[asyncio.Lock] | None = None

    # -- the Send hook ---------------------------------------------------------------------
    async def send(self, producer_id: str, topic: str, queue_id: int, records: bytes,
                   record_count: int, *, deadline: float | None = None) -> IdempotentResult:
        """`deadline`: the caller's (Messaging.send)."""
        if not producer_id:
            raise InvalidArgument("an idempotent send must name its producer_id")
        self.messaging.writable_queue(topic, queue_id)
        items = batch_unique_ids(records, record_count, producer_id)
        await self._ensure_built()
        async with self._stripe(producer_id):
            return await self._send_locked(producer_id, topic, queue_id, records, items,
                                           deadline)

    async def _send_locked(self, producer_id: str, topic: str, queue_id: int, records: bytes,
                           items: list[tuple[int, int, str]],
                           deadline: float | None = None) -> IdempotentResult:
        now = self.now_ms()
        table = self.table
        placed: list[StoredAt | int] = []   # a StoredAt (duplicate) or an index into `fresh`
        fresh: list[tuple[int, int, str]] = []
        first_in_batch: dict[str, int] = {}
        for start, end, unique_id in items:
            stored = table.lookup(producer_id, unique_id, now)
            if stored is not None:
                placed.append(stored)
            elif unique_id in first_in_batch:   # the same id twice in one batch: stored once
                placed.append(first_in_batch[unique_id])
            else:
                first_in_batch[unique_id] = len(fresh)
                placed.append(len(fresh))
                fresh.append((start, end, unique_id))
        status, appended = AppendStatus.PUT_OK, []
        if fresh:
            payload = (records if len(fresh) == len(items)
                       else b"".join(records[s:e] for s, e, _ in fresh))
            result = await self.messaging.send(topic, queue_id, payload, len(fresh),
                                               deadline=deadline)
            status = result.status
            stamp = self.now_ms()
            for index, (_, _, unique_id) in enumerate(fresh):
                stored = StoredAt(topic, queue_id, result.first_queue_offset + index,
                                  result.physical_offsets[index], stamp)
                table.record(producer_id, unique_id, stored, stamp)
                appended.append(stored)
        where = [p if isinstance(p, StoredAt) else appended[p] for p in placed]
        duplicates = len(items) - len(fresh)
        if duplicates and not fresh:
            # Every record a repeat: answered as its originals would be, PUT_OK only once the
            # in-sync replicas hold them (a retry of a FLUSH_SLAVE_TIMEOUT send must not
            # acknowledge what a failover can still take away). A batch that also appended
            # has its own append's answer, which covers the older originals.
            status = await self._confirmed(
                self._record_end(max(w.physical_offset for w in where)), deadline)
        if duplicates:
            log.info("idempotent send dropped duplicates", producer_id=producer_id,
                     topic=topic, queue_id=queue_id, duplicates=duplicates, stored=len(fresh))
        return IdempotentResult(status, where[0].queue_offset,
                                [w.physical_offset for w in where], duplicates,
                                [w.queue_offset for w in where])

    async def send_sequenced(self, sequence, topic: str, queue_id: int, records: bytes,
                             record_count: int, *,
                             deadline: float | None = None) -> IdempotentResult:
        """A sequenced batch (`sequence`: producer_id, epoch, base_sequence): appended whole,
        answered as the duplicate of a kept batch, or refused (sequences.py)."""
        producer_id, epoch, first = sequence.producer_id, sequence.epoch, sequence.base_sequence
        if producer_id < 0:
            raise InvalidArgument("a sequenced send must name its producer id (>= 0)")
        self.messaging.writable_queue(topic, queue_id)
        if record_count <= 0 or not records:
            raise InvalidArgument("a send must carry at least one record and record_count >= 1")
        last = last_sequence(first, record_count)
        _check_sequence_property(records, format_sequence(producer_id, epoch, first, last))
        await self._ensure_built()
        key = (producer_id, topic, queue_id)
        async with self._stripe(str(producer_id)):
            original = self.sequences.check(key, epoch, first, record_count)
            if original is not None:
                log.info("sequenced send answered as a duplicate", producer_id=producer_id,
                         epoch=epoch, sequence=first, topic=topic, queue_id=queue_id,
                         queue_offset=original.first_queue_offset)
                offsets = list(range(original.first_queue_offset,
                                     original.first_queue_offset + original.count))
                physical, end = self._stored_span(original)
                if len(physical) < original.count:
                    # A replica elected with a lost tail (a power loss cut a copied batch)
                    # holds only its head: answering it as stored would acknowledge records
                    # this log does not hold, storing it again would repeat the head.
                    log.warning("sequenced batch only partly in the log", producer_id=producer_id,
                                epoch=epoch, sequence=first, topic=topic, queue_id=queue_id,
                                held=len(physical), records=original.count)
                    raise PreconditionFailed(
                        f"producer {producer_id} epoch {epoch} sequence {first}..{last} on "
                        f"{topic}:{queue_id} is only partly in this broker's log ("
                        f"{len(physical)} of {original.count} records: its tail was lost "
                        f"before this replica was elected); it can be neither answered as "
                        f"stored nor stored again", code="OUT_OF_ORDER_SEQUENCE_NUMBER")
                status = await self._confirmed(end, deadline)
                return IdempotentResult(status, original.first_queue_offset, physical,
                                        original.count, offsets)
            result = await self.messaging.send(topic, queue_id, records, record_count,
                                               deadline=deadline)
            self.sequences.record(key, epoch, StoredBatch(
                first, last, result.first_queue_offset, result.physical_offsets[0],
                record_count))
            return IdempotentResult(result.status, result.first_queue_offset,
                                    list(result.physical_offsets), 0, [])

    def _record_end(self, physical_offset: int) -> int:
        """Where the record at `physical_offset` ends (a record retention already deleted is
        long confirmed: its start will do)."""
        head = self.messaging.store.commitlog.read(physical_offset, 4)
        return physical_offset + int.from_bytes(head, "big") if head else physical_offset

    def _stored_span(self, batch: StoredBatch) -> tuple[list[int], int]:
        """Where each record of a stored batch is — one append, so its records are contiguous
        from the first (those no longer in the log are left out) — and where the batch ends."""
        commitlog = self.messaging.store.commitlog
        out, pos = [], batch.first_physical_offset
        for _ in range(batch.count):
            head = commitlog.read(pos, 4)
            if head is None:
                break
            out.append(pos)
            pos += int.from_bytes(head, "big")
        return out, pos

    async def _confirmed(self, end: int, deadline: float | None) -> AppendStatus:
        """A repeat is answered as its original would be: PUT_OK only once the in-sync
        replicas hold the original (it may have been answered FLUSH_SLAVE_TIMEOUT, or come
        back with the log after a restart unconfirmed), else FLUSH_SLAVE_TIMEOUT: a repeat
        must never acknowledge what a failover can still take away."""
        try:
            return await self.messaging.store.confirmed_async(end,
                                                              answer_within_deadline(deadline))
        except NotMaster as exc:
            raise PreconditionFailed(str(exc), code="NOT_MASTER") from None

    def describe(self, result: IdempotentResult, reply) -> None:
        """Fill the SendResponse fields that say what was dropped."""
        if result.duplicates:
            reply.duplicates = result.duplicates
            reply.queue_offsets.extend(result.queue_offsets)

    # -- rebuild -------------------------------------------------------------------------
    def _stripe(self, producer_id: str) -> asyncio.Lock:
        if self._stripes is None:
            self._stripes = [asyncio.Lock() for _ in range(_LOCK_STRIPES)]
        return self._stripes[zlib.crc32(producer_id.encode()) % _LOCK_STRIPES]

    async def _ensure_built(self) -> None:
        """Rebuild once per mastership: after a start and after a promotion (a new epoch)."""
        store = self.messaging.store
        if not store.is_master:
            self._built_for = None   # a slave refuses the send anyway (NOT_MASTER)
            return
        epoch = store.epochs.last_epoch
        if self._built_for == epoch:
            return
        if self._build_lock is None:
            self._build_lock = asyncio.Lock()
        async with self._build_lock:
            if self._built_for != epoch:
                await asyncio.to_thread(self.rebuild)
                self._built_for = epoch

    def rebuild(self) -> int:
        """Refill the table from the last `rebuild_bytes` of the CommitLog; entries found."""
        commitlog = self.messaging.store.commitlog
        end = commitlog.max_offset
        start = max(commitlog.min_offset, end - self.settings.rebuild_bytes)
        start -= start % commitlog.segment_size    # a segment base: a record boundary
        started = time.monotonic()
        self.table.clear()
        self.sequences.clear()
        now, found = self.now_ms(), 0
        for item in scan_idempotent(commitlog, start, end):
            if isinstance(item, SequencedAt):
                self.sequences.restore((item.producer_id, item.topic, item.queue_id),
                                       item.epoch, item.batch)
            else:
                producer_id, unique_id, stored = item
                self.table.record(producer_id, unique_id, stored, now)
            found += 1
        log.info("idempotent producer table rebuilt", scan_from=start, scan_to=end,
                 records=found, kept=len(self.table), sequenced=len(self.sequences),
                 elapsed_ms=round((time.monotonic() - started) * 1000, 1))
        return found


def _check_sequence_property(records: bytes, expected: str) -> None:
    """The batch's first record must carry PRODUCER_SEQUENCE = the request's sequence, so the
    state can be rebuilt from the log; only that record's properties are read."""
    try:
        header = record.checked_header(memoryview(records), 0, verify_crc=False)
        found = record.property_at(records, 0, header, PROP_PRODUCER_SEQUENCE)
    except record.RecordFormatError as exc:
        raise InvalidArgument(f"rejected sequenced batch: {exc}") from None
    if found != expected:
        raise InvalidArgument(f"the first record of a sequenced batch must carry "
                              f"{PROP_PRODUCER_SEQUENCE}={expected!r}, not {found!r}")
