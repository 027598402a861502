"""Transactional messages (docs/transactions.md): half messages, EndTransaction, check-backs.

A prepared send is moved with one `record.retarget` into RMQ_SYS_TRANS_HALF_TOPIC, its real
topic and queue kept in properties, where no consumer reads it. EndTransaction(COMMIT) appends
it to the real topic and queue (visible from then on) and then an op record to
RMQ_SYS_TRANS_OP_HALF_TOPIC; ROLLBACK appends only the op record. Half messages left open past
`timeout_ms` are checked back with a live producer of their group every `interval_ms`, at most
`max_checks` times (each check is an op record too), then discarded with an op record.

All state is those two topics, folded by TransactionBook; the replayed prefix is bounded by the
progress saved as consumer offsets of CHECK_GROUP (a replicated table). A promoted replica
replays before its first check. Only a master checks back. At least once: a crash between a
commit's append and its op record leaves the half open, and a check-back answered COMMIT
appends it a second time (same unique id).

Everything here runs on the broker's event loop (sends, EndTransaction, the check loop, the
streams), so the book needs no lock; one asyncio lock per half message orders its resolutions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from tidemq.broker import metrics, trace_events
from tidemq.broker.idempotence import IdempotentSends
from tidemq.broker.messaging import Messaging
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.store import AppendResult, GetStatus, MessageNotFound
from tidemq.broker.system_topics import SystemTopics
from tidemq.broker.transactions.book import (
    CHECKED,
    COMMIT,
    DISCARD,
    RECENT_KEPT,
    ROLLBACK,
    STATE_OF_OP,
    Action,
    HalfMessage,
    TransactionBook,
    TxnState,
    op_body,
    parse_op,
)
from tidemq.broker.transactions.producers import ProducerTable
from tidemq.common import errors, record
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import HALF_TOPIC, OP_TOPIC

log = get_logger(__name__)

CHECK_GROUP = "CID_SYS_RMQ_TRANS"  # RocketMQ's group for the check-back's progress
COMMIT_PRODUCER_ID = "CID_SYS_TXN_COMMIT"  # the idempotent-send producer of every commit
REPLAY_PAGE = 256
VERBS = {COMMIT: "committed", ROLLBACK: "rolled back"}
EVENTS = {COMMIT: "committed", ROLLBACK: "rolled_back", DISCARD: "discarded", CHECKED: "checked"}


@dataclass(frozen=True, slots=True)
class CheckSettings:
    timeout_ms: int = 6_000       # first check-back this long after the half was stored
    interval_ms: int = 60_000     # then this often
    max_checks: int = 15          # then discarded

    @property
    def tick_s(self) -> float:
        return max(0.05, min(1.0, self.timeout_ms / 2000, self.interval_ms / 2000))


@dataclass(frozen=True, slots=True)
class Check:
    """A check-back for a producer: the half message and how often it was asked about."""

    transaction_id: str
    half_offset: int       # CommitLog offset
    record: bytes
    check_times: int


def _not_found(transaction_id: str, physical_offset: int) -> errors.NotFound:
    return errors.NotFound(
        f"no transaction {transaction_id!r} has a half message at offset {physical_offset} on "
        "this broker", code="TRANSACTION_NOT_FOUND")


class TransactionService:
    def __init__(self, messaging: Messaging, topics: SystemTopics,
                 offsets: ConsumerOffsetManager, *, settings: CheckSettings = CheckSettings(),
                 clock: Callable[[], float] = time.time,
                 idempotence: IdempotentSends | None = None) -> None:
        self.messaging, self.topics, self.offsets = messaging, topics, offsets
        # commits go through the idempotent-send table (keyed by the half message's unique
        # id): a commit appended just before a crash, before its op record, is not stored
        # again when the replayed transaction is committed a second time
        self.idempotence = idempotence
        self.settings, self.clock = settings, clock
        self.producers = ProducerTable()
        self.book = TransactionBook()
        self._resolving: dict[int, list] = {}  # half offset -> [asyncio.Lock, users]
        self._was_master = False  # the first round as master replays (start() sets it)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checking = None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- replay --------------------------------------------------------------------------------

    def rebuild(self) -> tuple[int, int]:
        """Replay the half and op topics from the saved progress; (halves, ops) read."""
        store = self.messaging.store
        store.wait_dispatched(30)
        saved = {topic: offset for topic, _, offset in self.offsets.query(CHECK_GROUP)}
        half_from = max(saved.get(HALF_TOPIC, 0), store.min_offset(HALF_TOPIC, 0))
        op_from = max(saved.get(OP_TOPIC, 0), store.min_offset(OP_TOPIC, 0))
        book = TransactionBook(half_from, op_from)
        halves = ops = 0
        for rec in self._replay(HALF_TOPIC, half_from):
            book.add_half(_half_of(rec))
            halves += 1
        lookback = max(op_from - RECENT_KEPT, store.min_offset(OP_TOPIC, 0))
        for rec in self._replay(OP_TOPIC, lookback):
            kind, half_offset = parse_op(rec.body)
            book.apply_op(rec.queue_offset, kind, half_offset, rec.born_timestamp)
            ops += 1
        self.book = book
        return halves, ops

    def _replay(self, topic: str, offset: int):
        """This broker's log past the read fence too: a new master's last half and op
        records may lie above the confirmed offset it knew as a slave (as pop's revive log)."""
        store = self.messaging.store
        while True:
            got = store.get_messages(topic, 0, offset, REPLAY_PAGE, fenced=False)
            if got.status is not GetStatus.FOUND:
                return
            yield from record.iter_records(got.records)
            offset = got.next_begin_offset

    # -- prepare -------------------------------------------------------------------------------

    async def prepare(self, topic_name: str, queue_id: int, records: bytes,
                      record_count: int, *, deadline: float | None = None) -> AppendResult:
        """Store one prepared message as a half message; the half topic's append result.
        `deadline`: the caller's (Messaging.send)."""
        topic = self.messaging.topic(topic_name)
        if record_count != 1:
            raise errors.InvalidArgument(
                f"a transactional send carries exactly one message, got {record_count}",
                code="TRANSACTION_BATCH")
        if not topic.writable:
            raise errors.PreconditionFailed(f"topic {topic.name!r} is not writable",
                                            code="NO_PERMISSION")
        if not 0 <= queue_id < topic.queues:
            raise errors.InvalidArgument(f"queue_id {queue_id} is out of range: topic "
                                         f"{topic.name!r} has queues 0..{topic.queues - 1}")
        try:
            view = memoryview(records)
            props = record.properties_at(view, 0, record.checked_header(view, 0))
        except record.RecordFormatError as exc:
            raise errors.InvalidArgument(f"rejected transactional message: {exc}") from None
        group = props.get(record.PROP_PRODUCER_GROUP, "")
        if not group:
            raise errors.InvalidArgument(
                "a transactional message names its producer group (property PGROUP): the "
                "broker checks back with that group", code="PRODUCER_GROUP_MISSING")
        self._serving_master()  # a just-promoted master replays before it adds to the book
        half = self.messaging.topics.get(HALF_TOPIC) or await asyncio.to_thread(
            self.topics.ensure, HALF_TOPIC, 1)
        raw = record.retarget(records, half.name, transaction_type=record.TRANSACTION_PREPARED_TYPE,
                              set_properties={record.PROP_REAL_TOPIC: topic.name,
                                              record.PROP_REAL_QUEUE_ID: str(queue_id),
                                              record.PROP_TRANSACTION_PREPARED: "true"})
        result = await self.messaging.send(half.name, 0, raw, 1, deadline=deadline)
        metrics.TRANSACTIONS.labels("prepared").inc()
        self.book.add_half(HalfMessage(result.first_queue_offset, result.physical_offsets[0],
                                       group, props.get(record.PROP_UNIQ_KEY, ""),
                                       self._now_ms()))
        return result

    # -- end -----------------------------------------------------------------------------------

    async def end(self, producer_group: str, transaction_id: str, physical_offset: int,
                  commit: bool | None) -> tuple[TxnState, bool]:
        """COMMIT (True), ROLLBACK (False) or UNKNOWN (None) the half message at
        `physical_offset`; its state after, and whether that had happened already."""
        self._check_master()
        if physical_offset < 0 or not transaction_id:
            raise _not_found(transaction_id, physical_offset)
        try:
            raw = self.messaging.store.read_record(physical_offset)
            stored = record.decode(raw)
        except (MessageNotFound, record.RecordFormatError):
            raise _not_found(transaction_id, physical_offset) from None
        group = stored.properties.get(record.PROP_PRODUCER_GROUP, "")
        if (stored.topic != HALF_TOPIC or stored.unique_id != transaction_id
                or producer_group and group != producer_group):
            raise _not_found(transaction_id, physical_offset)
        if commit is None:
            return self.book.state(stored.queue_offset), False
        kind = COMMIT if commit else ROLLBACK
        return await self._resolve(stored.queue_offset, kind, raw, stored)

    async def _resolve(self, half_offset: int, kind: str, raw: bytes,
                       stored: record.Record | None) -> tuple[TxnState, bool]:
        entry = self._resolving.setdefault(half_offset, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                state = self.book.state(half_offset)
                if state is TxnState.PENDING:
                    began_ns = time.time_ns()
                    if kind == COMMIT:
                        await self._append_committed(raw, stored)
                    await self._append_op(kind, half_offset)
                    if stored is not None:
                        trace_events.transaction_ended(stored, kind == COMMIT, began_ns)
                    return self.book.state(half_offset), False
                if kind == DISCARD or state is STATE_OF_OP[kind]:
                    return state, True
                raise self._already(stored.unique_id, state, kind)
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._resolving[half_offset]

    @staticmethod
    def _already(transaction_id: str, state: TxnState, kind: str) -> errors.TideMQError:
        if state is TxnState.UNKNOWN:
            return errors.NotFound(f"transaction {transaction_id!r} is not known here",
                                   code="TRANSACTION_NOT_FOUND")
        was = ("resolved earlier (its outcome is no longer kept)" if state is TxnState.RESOLVED
               else f"{state.value.lower().replace('_', ' ')} already")
        return errors.PreconditionFailed(
            f"transaction {transaction_id!r} was {was}; it cannot be {VERBS[kind]}",
            code="TRANSACTION_ALREADY_RESOLVED")

    async def _append_committed(self, raw: bytes, stored: record.Record) -> None:
        real = self.messaging.topic(stored.properties.get(record.PROP_REAL_TOPIC, ""))
        queue_id = int(stored.properties.get(record.PROP_REAL_QUEUE_ID, "0") or 0) % real.queues
        idempotent = self.idempotence is not None
        visible = record.retarget(
            raw, real.name, queue_id=queue_id, transaction_type=record.TRANSACTION_COMMIT_TYPE,
            set_properties={record.PROP_PRODUCER_ID: COMMIT_PRODUCER_ID} if idempotent else None)
        if idempotent:
            await self.idempotence.send(COMMIT_PRODUCER_ID, real.name, queue_id, visible, 1)
        else:
            await self.messaging.send(real.name, queue_id, visible, 1)

    async def _append_op(self, kind: str, half_offset: int) -> None:
        topic = self.messaging.topics.get(OP_TOPIC) or await asyncio.to_thread(
            self.topics.ensure, OP_TOPIC, 1)
        now = self._now_ms()
        raw = record.encode(topic.name, op_body(kind, half_offset), born_timestamp=now,
                            properties=record.encode_properties({record.PROP_TAGS: "d"}))
        result = await self.messaging.send(topic.name, 0, raw, 1)
        metrics.TRANSACTIONS.labels(EVENTS[kind]).inc()
        self.book.apply_op(result.first_queue_offset, kind, half_offset, now)

    def _check_master(self) -> None:
        """Refuse on a slave; on a master that was just promoted, replay first."""
        if not self._serving_master():
            raise errors.PreconditionFailed(
                "this broker is not the master of its group: end transactions on the master",
                code="NOT_MASTER")

    # -- check-back ----------------------------------------------------------------------------

    async def check_round(self) -> int:
        """Check back (or discard) every half message that is due; how many were handled."""
        if not self._serving_master():
            return 0
        s = self.settings
        due = self.book.due(self._now_ms(), timeout_ms=s.timeout_ms, interval_ms=s.interval_ms,
                            max_checks=s.max_checks)
        for half, action in due:
            if self.book.state(half.half_offset) is not TxnState.PENDING:
                continue  # resolved while this round awaited an append
            if action is Action.DISCARD:
                await self._discard(half)
            else:
                await self._check(half)
        if self.book.advance():
            self.offsets.commit(CHECK_GROUP, [(HALF_TOPIC, 0, self.book.half_progress),
                                              (OP_TOPIC, 0, self.book.op_progress)])
        return len(due)

    async def _check(self, half: HalfMessage) -> None:
        try:
            raw = self.messaging.store.read_record(half.physical_offset)
        except MessageNotFound:  # aged out of the store: nothing left to commit
            raw = b""
        if not raw:
            await self._discard(half)
            return
        check = Check(half.transaction_id, half.physical_offset, raw, half.checks + 1)
        client = self.producers.deliver(half.producer_group, check)
        if not client:
            log.info("transaction_check_no_producer", group=half.producer_group,
                     transaction_id=half.transaction_id, check_times=half.checks + 1)
        await self._append_op(CHECKED, half.half_offset)

    async def _discard(self, half: HalfMessage) -> None:
        state, _ = await self._resolve(half.half_offset, DISCARD, b"", None)
        if state is TxnState.DISCARDED:
            log.warning("transaction_discarded", group=half.producer_group,
                        transaction_id=half.transaction_id, checks=half.checks,
                        half_offset=half.half_offset)

    def _serving_master(self) -> bool:
        """A broker that just became master replays the log its old master left first."""
        master = self.messaging.accepts_writes and self.messaging.store.is_master
        if master and not self._was_master:
            halves, ops = self.rebuild()
            log.info("transactions_replayed", halves=halves, ops=ops)
        self._was_master = master
        return master

    # -- producers -----------------------------------------------------------------------------

    def heartbeat(self, producer_group: str, client_id: str) -> None:
        if not producer_group or not client_id:
            raise errors.InvalidArgument("producer_group and client_id must not be empty")
        self.producers.heartbeat(producer_group, client_id)

    async def checks(self, producer_group: str, client_id: str) -> AsyncIterator[Check]:
        """The check-backs for one producer, until it goes away or the broker stops."""
        self.heartbeat(producer_group, client_id)
        queue = self.producers.open_stream(producer_group, client_id)
        try:
            while (check := await queue.get()) is not None:
                yield check
        finally:
            self.producers.close_stream(producer_group, client_id, queue)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Replay, then run the check loop on the broker's event loop."""
        halves, ops = self.rebuild()
        self._was_master = self.messaging.accepts_writes and self.messaging.store.is_master
        log.info("transactions_replayed", halves=halves, ops=ops,
                 pending=len(self.book.pending))
        self._loop = loop
        self._checking = asyncio.run_coroutine_threadsafe(self._check_forever(), loop)

    async def _check_forever(self) -> None:
        while True:
            try:
                await self.check_round()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep checking: one failed round must not stop check-backs
                log.exception("transaction_check_round_failed")
            await asyncio.sleep(self.settings.tick_s)

    def stop(self) -> None:
        """Stop checking and end the producers' streams (before the server drains)."""
        if self._loop is None:
            return
        if self._checking is not None:
            self._checking.cancel()
        self._loop.call_soon_threadsafe(self.producers.close_all)


def _half_of(rec: record.Record) -> HalfMessage:
    return HalfMessage(rec.queue_offset, rec.physical_offset,
                       rec.properties.get(record.PROP_PRODUCER_GROUP, ""), rec.unique_id,
                       rec.store_timestamp)
