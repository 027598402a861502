"""Pop consumption (docs/consumption.md, RocketMQ 5's POP): Pop / Ack / ChangeInvisibleDuration.

A pop reads from the group's cursor on each queue of the topic and of `%RETRY%{group}`, appends
one CHECKPOINT record to this broker's revive queue and answers the messages with receipt
handles. Ack and change of invisible time append ACK (and CHECKPOINT) records. A message not
acked before its invisible time is revived: moved with `RetryService.move` into
`%RETRY%{group}` with reconsume_times + 1 (or `%DLQ%{group}` past the group's limit), which the
next pop reads — then an ACK(revived) record closes it. All state is the revive log folded by
PopBook; `rebuild()` replays it at start, from the latest SNAPSHOT (`compact()` writes one every
`snapshot_interval_s`, a head record and its compressed parts in one append, and saves the head's
offset as a consumer offset of SNAPSHOT_GROUP, a replicated table): start-up replays only the
tail after it. Each revive round forgets expired handles past EXPIRED_KEPT_MS. At least once: a crash between the move and its ACK revives the message
twice.

Pops of one broker are serialised (one asyncio lock: the cursor is read, the checkpoint
written, then the cursor moves); the book itself is guarded by a thread lock, since revive
rounds run on their own thread and loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tidemq.broker import metrics, trace_events
from tidemq.broker.messaging import Messaging, SubscriptionFilter
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.pop.book import (
    EXPIRED_KEPT_MS,
    MOVED,
    REDO,
    REVIVED,
    SNAPSHOT,
    HandleState,
    PopBook,
    acks_entry,
    closing_entry,
)
from tidemq.broker.retry import RetryService
from tidemq.broker.store import AppendStatus, GetStatus
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.broker.system_topics import SystemTopics
from tidemq.common import errors, record, tracing
from tidemq.common.logs import get_logger
from tidemq.common.receipt import MAX_ACK_BATCH, ReceiptHandle, encode_handles
from tidemq.common.system_topics import REVIVE_PREFIX, retry_topic

log = get_logger(__name__)

MAX_POP = 32
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # SQS's and RocketMQ's ceiling
REPLAY_PAGE = 256
ACKS_PER_RECORD = 4096  # acks one ACKS revive record names (about 20 bytes each)
SNAPSHOT_GROUP = "CID_SYS_RMQ_POP_SNAPSHOT"  # its offset on the revive queue: the latest snapshot


def revive_topic(cluster: str) -> str:
    return REVIVE_PREFIX + cluster


class AckOutcome(NamedTuple):
    """What became of one handle of a batch ack: error None = acked (or acked before)."""

    receipt_handle: str
    error: errors.TideMQError | None = None

    @property
    def code(self) -> str:
        return self.error.code if self.error is not None else ""

    @property
    def message(self) -> str:
        return self.error.message if self.error is not None else ""


@dataclass(frozen=True, slots=True)
class Popped:
    records: bytes           # the popped records, concatenated as stored
    handles: list[str]       # one receipt handle per record, in order


def _check_invisible(invisible_ms: int) -> None:
    if not 0 < invisible_ms <= MAX_INVISIBLE_MS:
        raise errors.InvalidArgument(
            f"invisible duration must be 1..{MAX_INVISIBLE_MS} ms, got {invisible_ms}",
            code="INVALID_INVISIBLE_DURATION")


class PopService:
    def __init__(self, messaging: Messaging, retry: RetryService, topics: SystemTopics,
                 groups: SubscriptionGroupTable, offsets: ConsumerOffsetManager, *,
                 broker_name: str, revive: str, revive_interval_s: float = 0.2,
                 snapshot_interval_s: float = 60.0, expired_kept_ms: int = EXPIRED_KEPT_MS,
                 clock: Callable[[], float] = time.time) -> None:
        self.messaging, self.retry, self.topics, self.groups = messaging, retry, topics, groups
        self.offsets = offsets
        self.broker_name, self.revive = broker_name, revive
        self.revive_interval_s, self.clock = revive_interval_s, clock
        self.snapshot_interval_s = snapshot_interval_s
        self.expired_kept_ms = expired_kept_ms
        self.book = PopBook()
        self._shadow = PopBook()  # the book folded in log order only: what a snapshot saves
        self._last_snapshot = -1
        self._lock = threading.Lock()
        self._pop_lock: asyncio.Lock | None = None
        self._queued_acks: list[tuple[list[tuple[bytes, dict]], asyncio.Future]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_master = True  # start() replays the log anyway
        self._promotion = threading.Lock()  # one replay per promotion (requests, revive thread)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- the revive log -------------------------------------------------------------------------

    def rebuild(self) -> int:
        """Replay this broker's revive queue into a fresh book, from its latest snapshot; the
        records applied after it."""
        store = self.messaging.store
        store.wait_dispatched(30)  # every revive record appended so far is in its queue
        book = self._latest_snapshot()
        count = self._replay_into(book)
        with self._lock:
            self.book = book
            self._shadow = PopBook.from_snapshot(book.snapshot())
        return count

    def _latest_snapshot(self) -> PopBook:
        store = self.messaging.store
        start = store.min_offset(self.revive, 0)
        saved = [offset for _, _, offset in self.offsets.query(SNAPSHOT_GROUP, self.revive)]
        if saved and saved[0] >= start:
            got = store.get_messages(self.revive, 0, saved[0], 1, fenced=False)
            if got.status is GetStatus.FOUND:
                head = json.loads(bytes(record.decode(got.records).body))
                if head.get("t") == SNAPSHOT:
                    parts = self._read_parts(saved[0] + 1, head.get("parts", 0))
                    try:
                        book = PopBook.from_snapshot(PopBook.unpack_snapshot(head, parts))
                    except (ValueError, KeyError, zlib.error) as exc:
                        # a torn snapshot (a power loss cut its parts): the whole log instead,
                        # where every snapshot is a no-op — slower, nothing lost
                        log.warning("pop_snapshot_unreadable", revive=self.revive,
                                    saved=saved[0], error=str(exc))
                        return PopBook(applied=start - 1)
                    self._last_snapshot = saved[0] + len(parts)
                    return book
        if saved:  # cannot happen while snapshots are taken far more often than retention
            log.warning("pop_snapshot_missing", revive=self.revive, saved=saved[0],
                        log_start=start)
        return PopBook(applied=start - 1)

    def _read_parts(self, offset: int, count: int) -> list[bytes]:
        parts: list[bytes] = []
        while len(parts) < count:
            got = self.messaging.store.get_messages(self.revive, 0, offset + len(parts),
                                                    count - len(parts), fenced=False)
            if got.status is not GetStatus.FOUND:
                break
            parts.extend(bytes(rec.body) for rec in record.iter_records(got.records))
        return parts[:count]

    def _replay_into(self, book: PopBook) -> int:
        """Fold the revive records after `book.applied`, in log order; how many. Past the
        read fence: the book is this broker's log, and a new master's last revive records
        (a pop's checkpoint, an ack its old master confirmed) may lie above the confirmed
        offset it knew as a slave — replayed short of them, it handed the checkpointed
        messages out again and kept acked ones in flight (issue #36)."""
        store, offset, count = self.messaging.store, book.applied + 1, 0
        while True:
            got = store.get_messages(self.revive, 0, offset, REPLAY_PAGE, fenced=False)
            if got.status is not GetStatus.FOUND:
                return count
            for rec in record.iter_records(got.records):
                book.apply(rec.queue_offset, bytes(rec.body))
                count += 1
            offset = got.next_begin_offset

    async def compact(self) -> int | None:
        """Write a SNAPSHOT of the book as of the last record in the revive queue (a head record
        and its parts, one append) and save its offset; None when nothing was logged since the
        last snapshot. Also forgets expired handles past EXPIRED_KEPT_MS, in the snapshot and
        in the live book, and fills the live book's gaps (records it never applied)."""
        shadow = self._shadow
        await asyncio.to_thread(self._replay_into, shadow)
        if shadow.applied <= self._last_snapshot:
            return None
        shadow.prune_expired(self._now_ms(), self.expired_kept_ms)
        bodies = shadow.snapshot_records(self.messaging.store.config.max_message_size)
        offset, status = await self._append(bodies)
        with self._lock:  # its records are in the log: the live book moves past them
            for i in range(len(bodies)):
                self.book.apply(offset + i, {})
        await asyncio.to_thread(self._catch_up)
        if status is not AppendStatus.PUT_OK:
            return None  # not confirmed: the next round writes a newer one
        self.offsets.commit(SNAPSHOT_GROUP, [(self.revive, 0, offset)])
        self._last_snapshot = offset + len(bodies) - 1
        return offset

    def _catch_up(self) -> None:
        """Apply to the live book whatever revive record it missed (each is applied once: what
        it has applied already is skipped), so its in-order mark keeps up with the log and
        the records it applied ahead of a gap are not held for ever."""
        store, offset = self.messaging.store, self.book.applied + 1
        while True:
            got = store.get_messages(self.revive, 0, offset, REPLAY_PAGE, fenced=False)
            if got.status is not GetStatus.FOUND:
                return
            with self._lock:
                for rec in record.iter_records(got.records):
                    self.book.apply(rec.queue_offset, bytes(rec.body))
            offset = got.next_begin_offset

    async def _append(self, bodies: list[bytes]) -> tuple[int, AppendStatus]:
        """Append revive records (one batch: all or none); the first one's revive offset and
        the append's status (PUT_OK once the in-sync replicas and the flush confirmed it)."""
        topic = self.messaging.topics.get(self.revive) or await asyncio.to_thread(
            self.topics.ensure, self.revive, 1)
        now = self._now_ms()
        raw = b"".join(record.encode(topic.name, body, born_timestamp=now) for body in bodies)
        result = await self.messaging.send(topic.name, 0, raw, len(bodies))
        return result.first_queue_offset, result.status

    async def _record(self, entries: list[tuple[bytes, dict]]) -> int:
        """Append and apply revive records. They are applied whatever the append's status
        (the book is the projection of this broker's log, and they are in it), but a call
        is answered only once they are confirmed: an ack answered before its record reached
        the in-sync replicas would be lost with this master, and the message handed out
        again by the next one."""
        first, status = await self._append([body for body, _ in entries])
        with self._lock:
            for i, (_, entry) in enumerate(entries):
                self.book.apply(first + i, entry)
        if status is not AppendStatus.PUT_OK:
            raise errors.ServiceUnavailable(
                f"the pop state change is stored on this master but not confirmed in time "
                f"({status.value}): an ack may not survive a failover, so it is not answered "
                "as done; the message may be delivered again", code=status.value)
        return first

    # -- pop ------------------------------------------------------------------------------------

    async def pop(self, group: str, topic_name: str, max_messages: int, invisible_ms: int,
                  wait_ms: int, tag_expression: str, expression_type: str = "TAG") -> Popped:
        self.groups.check_consume(group)
        if not group:
            raise errors.InvalidArgument("consumer_group must not be empty")
        _check_invisible(invisible_ms)
        if not 0 < max_messages <= MAX_POP:
            raise errors.InvalidArgument(f"max_messages must be 1..{MAX_POP}, got {max_messages}")
        topic = self.messaging.topic(topic_name)
        if not topic.readable:
            raise errors.PreconditionFailed(f"topic {topic.name!r} is not readable",
                                            code="NO_PERMISSION")
        selector = self.messaging.subscription_filter(expression_type, tag_expression)
        wanted = None if selector.tag_hashes is None else {
            t.strip() for t in tag_expression.split("||")}
        deadline = time.monotonic() + min(max(wait_ms, 0), self.messaging.long_poll_max_ms) / 1000
        if self._pop_lock is None:
            self._pop_lock = asyncio.Lock()
        while True:
            async with self._pop_lock:
                self._serving_master()  # a just-promoted master replays before it pops
                popped = await self._pop_once(group, topic.name, topic.queues, max_messages,
                                              invisible_ms, selector, wanted, topic.order)
            remaining = deadline - time.monotonic()
            if popped.handles or remaining <= 0:
                return popped
            await self._hold(topic.name, topic.queues, group, min(remaining, 1.0))

    async def _hold(self, topic: str, queues: int, group: str, timeout_s: float) -> None:
        """Wait until any queue of `topic` grows past the group's cursor (or the timeout)."""
        store, holds = self.messaging.store, self.messaging.holds
        waits = []
        for q in range(queues):
            at = self.book.cursor((group, topic, q))
            at = store.max_offset(topic, q) if at is None else at
            waits.append(asyncio.ensure_future(holds.hold(
                topic, q, at, timeout_s, lambda q=q: store.max_offset(topic, q),
                lambda q=q: store.written_max_offset(topic, q))))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def _sources(self, group: str, topic: str, queues: int,
                 orderly: bool) -> list[tuple[str, int, bool]]:
        sources = [(topic, q, False) for q in range(queues)]
        retry = self.messaging.topics.get(retry_topic(group))
        if retry is not None and not orderly:  # orderly messages are redelivered in place
            sources += [(retry.name, q, True) for q in range(retry.queues)]
        return sources

    async def _pop_once(self, group, topic, queues, max_messages, invisible_ms,
                        selector: SubscriptionFilter, wanted, orderly=False) -> Popped:
        store, now = self.messaging.store, self._now_ms()
        chunks: list[bytes] = []
        handles: list[str] = []
        for source, q, is_retry in self._sources(group, topic, queues, orderly):
            if len(handles) >= max_messages:
                break
            key = (group, source, q)
            if orderly:
                with self._lock:
                    if self.book.busy(key):
                        continue  # FIFO: nothing of this queue while one of it is in flight
                    redo = sorted(self.book.redo.get(key, ()))
                if redo:
                    await self._redeliver(key, redo[:max_messages - len(handles)],
                                          now + invisible_ms, chunks, handles)
                    continue
            cursor = max(self.book.cursor(key) or 0, store.min_offset(source, q))
            # a retry topic holds what already passed the filter: read it whole
            hashes = None if is_retry else selector.tag_hashes
            by_properties = None if is_retry else selector.property_filter
            read = (source, q, cursor, max_messages - len(handles), 4 << 20, hashes,
                    by_properties)
            # a SQL92 scan evaluates thousands of records in Python: on a thread
            got = (await asyncio.to_thread(store.get_messages, *read) if by_properties
                   else store.get_messages(*read))
            if got.next_begin_offset <= cursor and got.status is not GetStatus.FOUND:
                continue
            kept, offsets, next_offset = [], [], cursor  # kept: [start, end] of record runs
            view = memoryview(got.records)
            for pos, header in record.scan_records(view, verify_crc=False):
                end = pos + header[record.H_TOTAL_SIZE]
                props = None
                if is_retry or wanted is not None:
                    props = record.properties_at(view, pos, header)
                if is_retry and int(props.get(record.PROP_NOT_BEFORE_MS, 0) or 0) > now:
                    break  # retries of a queue come due in order: stop at the first not due
                next_offset = header[record.H_QUEUE_OFFSET] + 1
                if wanted is not None and not is_retry and \
                        props.get(record.PROP_TAGS, "") not in wanted:
                    continue
                if kept and kept[-1][1] == pos:  # adjacent records are copied as one run
                    kept[-1][1] = end
                else:
                    kept.append([pos, end])
                offsets.append(header[record.H_QUEUE_OFFSET])
            else:
                next_offset = max(next_offset, got.next_begin_offset)
            kept = [bytes(view[start:end]) for start, end in kept]
            view.release()
            if next_offset <= cursor:
                continue
            entry = {"t": "ck", "g": group, "topic": source, "q": q, "offs": offsets,
                     "next": next_offset, "until": now + invisible_ms, "ord": orderly}
            checkpoint = await self._record([(json.dumps(entry).encode(), entry)])
            chunks.extend(kept)
            handles.extend(encode_handles(self.broker_name, checkpoint, source, q, offsets))
            metrics.MESSAGES_CONSUMED.labels(source, "pop").inc(len(offsets))
        return Popped(b"".join(chunks), handles)

    async def _redeliver(self, key, offsets: list[int], until: int, chunks: list[bytes],
                         handles: list[str]) -> None:
        """Hand out an orderly queue's expired messages again, oldest first, with their
        delivery count stamped into the copies (the stored records are not touched)."""
        group, source, q = key
        with self._lock:
            cursor = self.book.cursor(key) or 0
            counts = [self.book.attempts.get((*key, off), 1) for off in offsets]
        copies = []
        for off, count in zip(offsets, counts, strict=True):
            got = self.messaging.store.get_message_at(source, q, off, fenced=False)
            if got.status is GetStatus.FOUND:
                copies.append((off, record.with_reconsume_times(got.records, count)))
        if not copies:
            return
        entry = {"t": "ck", "g": group, "topic": source, "q": q,
                 "offs": [off for off, _ in copies], "next": cursor, "until": until, "ord": True}
        checkpoint = await self._record([(json.dumps(entry).encode(), entry)])
        chunks.extend(raw for _, raw in copies)
        handles.extend(encode_handles(self.broker_name, checkpoint, source, q,
                                      [off for off, _ in copies]))
        metrics.MESSAGES_CONSUMED.labels(source, "pop").inc(len(copies))

    # -- ack / change invisible -----------------------------------------------------------------

    def _in_flight(self, group: str, text: str) -> ReceiptHandle:
        """The handle of a message in flight for `group`; raises what acking it answers
        (_AlreadyDone for one acked or moved already)."""
        (verdict,) = self._in_flight_many(group, [text])
        if isinstance(verdict, Exception):
            raise verdict
        return verdict

    def _in_flight_many(self, group: str,
                        texts: list[str]) -> list[ReceiptHandle | Exception]:
        """`_in_flight` of each text, the error returned rather than raised; the book is read
        under one lock for the whole batch."""
        decoded: list[ReceiptHandle | Exception] = []
        for text in texts:
            try:
                handle = ReceiptHandle.decode(text)
            except errors.InvalidArgument as exc:
                decoded.append(exc)
                continue
            if handle.broker_name != self.broker_name:
                decoded.append(errors.InvalidArgument(
                    f"receipt handle belongs to broker group {handle.broker_name!r}, not "
                    f"{self.broker_name!r}", code="INVALID_RECEIPT_HANDLE"))
                continue
            decoded.append(handle)
        now = self._now_ms()
        with self._lock:
            return [self._verdict(group, h, now) if isinstance(h, ReceiptHandle) else h
                    for h in decoded]

    def _verdict(self, group: str, handle: ReceiptHandle,
                 now_ms: int) -> ReceiptHandle | Exception:
        """Under the lock: the handle when its message is in flight for `group`, else why not."""
        state = self.book.state(handle.checkpoint, handle.queue_offset, now_ms)
        flight = self.book.in_flight.get((handle.checkpoint, handle.queue_offset))
        if state == HandleState.UNKNOWN or (flight is not None and flight.group != group):
            return errors.NotFound(f"no message of group {group!r} was popped with this "
                                   "receipt handle", code="RECEIPT_HANDLE_NOT_FOUND")
        if state == HandleState.EXPIRED:
            return errors.PreconditionFailed(
                "the receipt handle expired: the message's invisible time passed (it is "
                "delivered again) or its invisible time was changed; use the newer handle",
                code="RECEIPT_HANDLE_EXPIRED")
        if state == HandleState.DONE:
            return _AlreadyDone()
        return handle

    async def ack(self, group: str, text: str) -> None:
        """Done with a popped message (acking one already acked is a no-op)."""
        (outcome,) = await self.ack_many(group, [text])
        if outcome.error is not None:
            raise outcome.error

    async def ack_many(self, group: str, texts: list[str]) -> list[AckOutcome]:
        """Done with a batch of popped messages: every valid ACK in ONE revive-log append (a
        consumer's acks cost one round trip and one write, not one per message). One outcome
        per handle, in order; a bad handle fails alone with the error `ack` raises for it."""
        if len(texts) > MAX_ACK_BATCH:
            raise errors.InvalidArgument(f"one ack carries at most {MAX_ACK_BATCH} receipt "
                                         f"handles, got {len(texts)}")
        self._serving_master()  # a just-promoted master knows what its old master handed out
        outcomes, acked, seen = [], [], set()
        for text, verdict in zip(texts, self._in_flight_many(group, texts), strict=True):
            if isinstance(verdict, ReceiptHandle):
                outcomes.append(AckOutcome(text))
                key = (verdict.checkpoint, verdict.queue_offset)
                if key not in seen:  # the same handle twice in a batch: acked once
                    seen.add(key)
                    acked.append(verdict)
            else:
                outcomes.append(AckOutcome(
                    text, None if isinstance(verdict, _AlreadyDone) else verdict))
        if acked:
            await self._record_acks([(h.checkpoint, h.queue_offset) for h in acked])
            self._trace_settled(group, acked, acked=True)
        return outcomes

    async def _record_acks(self, handles: list[tuple[int, int]]) -> None:
        """Log the acks; those of calls that arrive together share one ACKS record and one
        revive-log append (RocketMQ merges its pop checkpoints in memory before they reach the
        log). Each caller is answered once its acks are appended, as before: no ack is
        answered before it is logged."""
        loop = asyncio.get_running_loop()
        answered = loop.create_future()
        self._queued_acks.append((handles, answered))
        if len(self._queued_acks) == 1:  # the first: write what has queued by its turn
            loop.create_task(self._write_queued_acks())
        await answered

    async def _write_queued_acks(self) -> None:
        queued, self._queued_acks = self._queued_acks, []
        every = [handle for handles, _ in queued for handle in handles]
        entries = [acks_entry(every[start:start + ACKS_PER_RECORD])
                   for start in range(0, len(every), ACKS_PER_RECORD)]
        try:
            await self._record([(json.dumps(entry, separators=(",", ":")).encode(), entry)
                                for entry in entries])
        except Exception as exc:  # noqa: BLE001 - every caller gets the append's error
            for _, answered in queued:
                if not answered.done():
                    answered.set_exception(exc)
            return
        for _, answered in queued:
            if not answered.done():
                answered.set_result(None)

    def _trace_settled(self, group: str, handles: list[ReceiptHandle], *, acked: bool,
                       invisible_ms: int = 0) -> None:
        """The message journey's last step (trace_events.message_settled): reads each
        message's properties, so only when this broker exports spans."""
        if not tracing.exporting():
            return
        now_ms = self._now_ms()
        for handle in handles[:trace_events.MAX_EVENTS_PER_BATCH]:
            got = self.messaging.store.get_message_at(handle.topic, handle.queue_id,
                                                      handle.queue_offset)
            if got.status is GetStatus.FOUND:
                trace_events.message_settled(group, record.decode(got.records), acked, now_ms,
                                             invisible_ms)

    async def change_invisible(self, group: str, text: str, invisible_ms: int) -> str:
        """Hide an in-flight message for `invisible_ms` from now; its new receipt handle."""
        _check_invisible(invisible_ms)
        self._serving_master()
        try:
            handle = self._in_flight(group, text)
        except _AlreadyDone:
            raise errors.PreconditionFailed("the message was acked already",
                                            code="RECEIPT_HANDLE_EXPIRED") from None
        until = self._now_ms() + invisible_ms
        key = (group, handle.topic, handle.queue_id)
        with self._lock:
            cursor = self.book.cursor(key) or handle.queue_offset + 1
            flight = self.book.in_flight.get((handle.checkpoint, handle.queue_offset))
        ck = {"t": "ck", "g": group, "topic": handle.topic, "q": handle.queue_id,
              "offs": [handle.queue_offset], "next": cursor, "until": until,
              "ord": bool(flight and flight.orderly)}
        ack = {"t": "ack", "ck": handle.checkpoint, "off": handle.queue_offset, "why": MOVED,
               "at": until - invisible_ms}
        first = await self._record([
            (json.dumps(ck).encode(), ck),
            (json.dumps(ack, separators=(",", ":")).encode(), ack)])
        self._trace_settled(group, [handle], acked=False, invisible_ms=invisible_ms)
        return ReceiptHandle(self.broker_name, first, handle.topic, handle.queue_id,
                             handle.queue_offset).encode()

    def progress(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        """PopBook.progress, for the consumer-lag metric (read at scrape time)."""
        with self._lock:
            return self.book.progress()

    def stats(self) -> dict[str, int]:
        """The book's size (metrics.PopStateCollector): handles in flight, expired handles
        remembered, revive records applied past the latest snapshot."""
        with self._lock:
            return {"in_flight": len(self.book.in_flight), "expired": len(self.book.expired),
                    "revive_tail": max(0, self.book.applied - max(self._last_snapshot, -1))}

    # -- revive ---------------------------------------------------------------------------------

    async def revive_due(self) -> int:
        """Move every message whose invisible time passed; how many were moved."""
        if not self._serving_master():
            return 0  # a slave leaves reviving to its master
        now = self._now_ms()
        with self._lock:
            self.book.prune_expired(now, self.expired_kept_ms)
            due = self.book.due(now)
            taken = [(ck, off, self.book.take_for_revive((ck, off), now)) for ck, off, _ in due]
        moved = 0
        for ck, off, flight in taken:
            try:
                why = await self._revive_one(ck, off, flight)
            except errors.TideMQError as exc:
                log.warning("revive_failed", topic=flight.topic, queue=flight.queue_id,
                            offset=off, error=str(exc))
                with self._lock:
                    self.book.untake((ck, off), flight)
                continue
            # Moved: whatever happens to the closing record, the delivery stays taken (an ack
            # answers EXPIRED). Put back in flight, it would be moved again next round — the
            # move is idempotent (its revive key), but an ack in between would succeed while
            # the retry copy is already stored and handed out again.
            try:
                closing = closing_entry(ck, flight, off, why, now)
                await self._record([(json.dumps(closing).encode(), closing)])
                moved += 1
            except errors.TideMQError as exc:
                log.warning("revive_close_failed", topic=flight.topic, queue=flight.queue_id,
                            offset=off, error=str(exc),
                            note="the retry copy is stored; a new master replays the move "
                                 "idempotently")
        return moved

    def _serving_master(self) -> bool:
        """True on a master. A broker that just became master (replication promoted it)
        replays the revive log it received first, so pops, acks and revives go on from the
        state its old master left in the log (its book as a slave is the one it started with).
        Called by each request as well as each revive round: a round up to
        `revive_interval_s` later is too late, the first pops would read the stale cursors
        and hand out acked messages again."""
        master = self.messaging.accepts_writes and self.messaging.store.is_master
        if master == self._was_master:
            return master
        with self._promotion:
            if master and not self._was_master:
                self.rebuild()
            self._was_master = master
        return master

    async def _revive_one(self, ck: int, off: int, flight) -> str:
        """Move one expired message on; the ACK reason that closes its checkpoint entry."""
        if self.messaging.topics.get(flight.topic) is None:
            # deleting a topic discards what was in flight from it (like the timer drops a
            # delayed message of a deleted topic); reviving it would re-create the retry topic
            log.warning("popped_message_dropped", topic=flight.topic, queue=flight.queue_id,
                        offset=off, group=flight.group,
                        reason="its topic is not served here any more")
            return REVIVED
        # unfenced: handed out once, it is in the log even where a new master's fence is
        # still below it ("not found" must mean aged out or compacted away, or the message
        # would be dropped)
        got = self.messaging.store.get_message_at(flight.topic, flight.queue_id, off,
                                                  fenced=False)
        if got.status is not GetStatus.FOUND:
            return REVIVED  # aged out of the store: nothing left to deliver
        raw = got.records
        if flight.orderly:
            with self._lock:
                count = self.book.attempts.get((flight.group, flight.topic, flight.queue_id,
                                                off), 1)
            if count <= self.groups.effective(flight.group).retry_max_times:
                return REDO  # handed out again, in place, by the next pop of its queue
            await self.retry.move(flight.group, raw, record.decode(raw), delayed=False,
                                  dead_letter=True, times=count, revive_key=f"{ck}:{off}")
            return REVIVED
        await self.retry.move(flight.group, raw, record.decode(raw), delayed=False,
                              revive_key=f"{ck}:{off}")
        return REVIVED

    def start(self) -> None:
        records = self.rebuild()
        log.info("pop state replayed", records=records, from_snapshot=self._last_snapshot,
                 in_flight=len(self.book.in_flight))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._revive_forever()),
                                        name="pop-revive", daemon=True)
        self._thread.start()

    async def _revive_forever(self) -> None:
        snapshot_due = time.monotonic() + self.snapshot_interval_s
        while not self._stop.is_set():
            try:
                await self.revive_due()
                if time.monotonic() >= snapshot_due and self._serving_master():
                    snapshot_due = time.monotonic() + self.snapshot_interval_s
                    await self.compact()
            except Exception:  # keep reviving: one bad round must not stop redelivery
                log.exception("revive_round_failed")
            await asyncio.to_thread(self._stop.wait, self.revive_interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


class _AlreadyDone(Exception):
    """The handle's message was acked (or moved) already."""
