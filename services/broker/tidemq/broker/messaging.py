"""Send and pull as the broker serves them: topic/queue checks, long polling, offset lookups.

This is the domain behind BrokerService: no gRPC here. It checks what only the broker can
(topic served here, permission, queue in range), hands bytes to the store untouched, and turns
a pull that found nothing into a held pull answered as soon as its queue grows. Send and pull
are coroutines: a SYNC_FLUSH send waits for its group-commit round and a held pull for its
queue without a thread each (unfiltered reads are page-cache copies done on the loop;
tag-filtered scans run on a thread).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.broker import metrics
from tidemq.broker.deadlines import answer_within_deadline
from tidemq.broker.long_poll import PullRequestHoldService
from tidemq.broker.store import (
    AppendResult,
    GetResult,
    GetStatus,
    MessageNotFound,
    MessageStore,
    MessageTooLarge,
    StorageFull,
    StoreError,
)
from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.common import record, sqlfilter
from tidemq.common.errors import (
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    ServiceUnavailable,
    TopicNotExist,
)
from tidemq.common.errors import StorageFull as StorageFullError

# Store refusals of a replica group (store/ha): not (or no longer) the master; too few in-sync
# replicas. Both leave nothing stored and reach the client as FAILED_PRECONDITION + the code.
REPLICATION_REFUSALS = frozenset({"NOT_MASTER", "NOT_ENOUGH_REPLICAS"})
# A replica of a group the controller cannot give a master without losing acknowledged
# messages (no live replica holds its confirmed offset): it waits, and says for whom.
GROUP_HAS_NO_MASTER = "GROUP_HAS_NO_MASTER"


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullOutcome:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: bytes = b""
    record_count: int = 0


def tag_hashes(expression: str) -> frozenset[int] | None:
    """`""`/`"*"` → None (everything); `"A || B"` → the tags' ConsumeQueue hashes."""
    tags = [tag.strip() for tag in expression.split("||")]
    if not expression.strip() or "*" in tags:
        return None
    if any(not tag for tag in tags):
        raise InvalidArgument(f"tag expression {expression!r} has an empty tag")
    return frozenset(record.tag_hash(tag) for tag in tags)


@dataclass(frozen=True, slots=True)
class SubscriptionFilter:
    """What a pull or pop keeps: ConsumeQueue tag hashes (None: any) and a compiled SQL92
    filter over the properties (None: none)."""

    tag_hashes: frozenset[int] | None
    sql: sqlfilter.SqlFilter | None = None

    @property
    def property_filter(self):
        return None if self.sql is None else self.sql.matches_encoded

    @property
    def unfiltered(self) -> bool:
        return self.tag_hashes is None and self.sql is None


def subscription_filter(expression_type: str, expression: str, *,
                        property_filter_enabled: bool = True) -> SubscriptionFilter:
    """The filter of a TAG or SQL92 subscription. A SQL92 filter is compiled once per distinct
    text (sqlfilter's cache); a bad one is INVALID_FILTER, and a broker with
    `enable_property_filter = false` refuses it with FILTER_DISABLED."""
    if sqlfilter.expression_type(expression_type) == sqlfilter.TAG:
        return SubscriptionFilter(tag_hashes(expression))
    if not property_filter_enabled:
        raise PreconditionFailed("this broker does not filter by SQL92 (enable_property_filter"
                                 " = false): subscribe by tag", code="FILTER_DISABLED")
    return SubscriptionFilter(None, sqlfilter.compile_sql92(expression))


def _outcome(result: GetResult, offset: int, on_slave: bool = False) -> PullOutcome:
    """Map the store's answer to the wire's four pull statuses (RocketMQ's mapping). On a
    slave an offset past its log is not illegal: the slave may just hold less than its master
    (behind, or back with a damaged disk), so the reader is told nothing is new there and keeps
    its offset, as RocketMQ's slaves do not correct offsets — a reader told OFFSET_ILLEGAL
    resets (a Kafka client to the earliest offset, re-reading the partition)."""
    status = result.status
    if status is GetStatus.FOUND:
        return PullOutcome(PullStatus.FOUND, result.next_begin_offset, result.min_offset,
                           result.max_offset, result.records, result.record_count)
    if on_slave and (status is GetStatus.OFFSET_OVERFLOW_BADLY or (
            status is GetStatus.NO_MESSAGE_IN_QUEUE and offset != 0)):
        return PullOutcome(PullStatus.NO_NEW_MSG, offset, result.min_offset, result.max_offset)
    if status is GetStatus.NO_MATCHED_MESSAGE:
        pull_status = PullStatus.NO_MATCHED_MSG
    elif status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY) or (
        status is GetStatus.NO_MESSAGE_IN_QUEUE and offset != 0
    ):
        # next_begin_offset is a valid offset to continue from (min, max or 0).
        return PullOutcome(PullStatus.OFFSET_ILLEGAL, result.next_begin_offset,
                           result.min_offset, result.max_offset)
    else:  # NO_MESSAGE_IN_QUEUE at 0, OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL
        pull_status = PullStatus.NO_NEW_MSG
    return PullOutcome(pull_status, result.next_begin_offset, result.min_offset,
                       result.max_offset)


class Messaging:
    def __init__(self, store: MessageStore, topics: TopicTable, holds: PullRequestHoldService,
                 *, long_poll_max_ms: int, max_pull_messages: int, max_pull_bytes: int,
                 accepts_writes: bool = True, enable_property_filter: bool = True,
                 broker_name: str = "") -> None:
        self.store = store
        self.broker_name = broker_name   # named in a STORAGE_FULL refusal
        self.accepts_writes = accepts_writes  # False on a slave: it only takes replicated bytes
        self.topics = topics
        self.holds = holds
        self.long_poll_max_ms = long_poll_max_ms
        self.max_pull_messages = max_pull_messages
        self.max_pull_bytes = max_pull_bytes
        self.enable_property_filter = enable_property_filter  # SQL92 subscriptions allowed
        # "" unless the replica group waits for an electable replica (ReplicaManager.waiting)
        self.group_waiting: Callable[[], str] = lambda: ""

    def topic(self, name: str) -> TopicConfig:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicNotExist(f"topic {name!r} is not served by this broker")
        return topic

    def _queue(self, topic: TopicConfig, queue_id: int) -> None:
        if not 0 <= queue_id < topic.queues:
            raise InvalidArgument(
                f"queue_id {queue_id} is out of range: topic {topic.name!r} has queues "
                f"0..{topic.queues - 1}"
            )

    # -- send ---------------------------------------------------------------------------------

    def writable_queue(self, topic_name: str, queue_id: int) -> TopicConfig:
        """The topic, if this broker takes sends to its queue `queue_id` (else the error)."""
        topic = self.topic(topic_name)
        if not self.accepts_writes:
            raise PreconditionFailed("this broker is a slave and does not accept sends; "
                                     "send to the master of its group", code="NO_PERMISSION")
        if not topic.writable:
            raise PreconditionFailed(f"topic {topic.name!r} is not writable (perm {topic.perm})",
                                     code="NO_PERMISSION")
        self._queue(topic, queue_id)
        return topic

    def admit_send(self) -> None:
        """A producer's send (Send RPC) on a FULL disk is refused here, before anything is
        appended (docs/storage.md, "A full disk"); the broker's own writes — acks, pop
        checkpoints, retries, scheduled deliveries, transaction ends — are not, so consumers
        keep consuming. One attribute read per send."""
        if self.store.disk.refuses_writes:
            metrics.SEND_ERRORS.labels(StorageFullError.code).inc()
            raise self.storage_full(self.store.disk.refusal())

    def storage_full(self, exc: StorageFull) -> StorageFullError:
        """The client's STORAGE_FULL: which broker, where, how much is free, what next."""
        config = self.store.config
        return StorageFullError(
            f"broker {self.broker_name or '(unnamed)'} refuses sends, its storage is full: "
            f"{exc}. Retention is deleting the oldest CommitLog segments; sends resume by "
            f"themselves once use is below {config.disk_full_ratio:.0%} (send to another "
            f"broker group meanwhile)")

    @metrics.counts_send_errors
    async def send(self, topic_name: str, queue_id: int, records: bytes,
                   record_count: int, *, deadline: float | None = None) -> AppendResult:
        """Append one batch. `deadline`: when the caller gives up (`deadlines.call_deadline`);
        the waits for the disk and the in-sync replicas then end a margin before it, with
        FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT (the batch stays appended)."""
        topic = self.writable_queue(topic_name, queue_id)
        if record_count <= 0 or not records:
            raise InvalidArgument("a send must carry at least one record and record_count >= 1")
        if topic.config and len(records) > (limit := topic.setting("max.message.bytes")):
            _check_record_sizes(topic.name, records, limit)   # a batch under it cannot break it
        started = time.perf_counter()
        try:
            result = await self.store.append_batch_async(
                topic.name, queue_id, records, record_count, answer_within_deadline(deadline))
        except MessageTooLarge as exc:
            raise PayloadTooLarge(f"rejected batch: {exc}") from None
        except StorageFull as exc:   # no room for the next segment (ENOSPC), nothing stored
            raise self.storage_full(exc) from None
        except StoreError as exc:
            if exc.code == "SERVICE_UNAVAILABLE":
                raise ServiceUnavailable(f"broker store unavailable: {exc}") from None
            if exc.code in REPLICATION_REFUSALS:  # nothing was appended; the client re-routes
                waiting = self.group_waiting() if exc.code == "NOT_MASTER" else ""
                if waiting:
                    raise PreconditionFailed(waiting, code=GROUP_HAS_NO_MASTER) from None
                raise PreconditionFailed(str(exc), code=exc.code) from None
            raise InvalidArgument(f"rejected batch: {exc}") from None
        metrics.record_put(topic.name, record_count, len(records), time.perf_counter() - started)
        return result

    # -- pull ---------------------------------------------------------------------------------

    async def pull(self, topic_name: str, queue_id: int, queue_offset: int, max_messages: int,
                   max_bytes: int, suspend_timeout_ms: int, tag_expression: str,
                   expression_type: str = sqlfilter.TAG) -> PullOutcome:
        metrics.PULL_REQUESTS.inc()
        topic = self.topic(topic_name)
        if not topic.readable:
            raise PreconditionFailed(f"topic {topic.name!r} is not readable (perm {topic.perm})",
                                     code="NO_PERMISSION")
        self._queue(topic, queue_id)
        if queue_offset < 0:
            raise InvalidArgument(f"queue_offset must be >= 0, got {queue_offset}")
        selector = self.subscription_filter(expression_type, tag_expression)
        max_messages = max_messages if max_messages > 0 else self.max_pull_messages
        max_bytes = max_bytes if max_bytes > 0 else self.max_pull_bytes
        hold_s = min(max(suspend_timeout_ms, 0), self.long_poll_max_ms) / 1000
        deadline = time.monotonic() + hold_s
        offset = queue_offset
        while True:
            read = (topic.name, queue_id, offset, max_messages, max_bytes, selector.tag_hashes,
                    selector.property_filter)
            # An unfiltered read is a few C calls and a slice copy: on the loop. A filtered
            # one may walk 16 000 units in Python: on a thread, so sends are not held up.
            result = (self.store.get_messages(*read) if selector.unfiltered
                      else await asyncio.to_thread(self.store.get_messages, *read))
            outcome = _outcome(result, offset, not self.store.is_master)
            # Hold only when the caller is at the end of the queue with nothing new. Anything
            # else (found, illegal, a hole left by retention) answers now — holding there would
            # spin, as the queue is already longer. A filtered read that skipped non-matching
            # messages answers NO_MATCHED_MSG at once too, with next_begin_offset where the scan
            # stopped (the queue's end): the consumer moves and commits past them, where a hold
            # would leave them counted as the group's lag (RocketMQ: PULL_RETRY_IMMEDIATELY).
            at_end = (outcome.status is PullStatus.NO_NEW_MSG
                      and outcome.next_begin_offset >= outcome.max_offset)
            remaining = deadline - time.monotonic()
            if not at_end or remaining <= 0:
                if outcome.record_count:  # once per pull answer, not per message
                    metrics.MESSAGES_OUT.labels(topic.name).inc(outcome.record_count)
                    metrics.MESSAGES_CONSUMED.labels(topic.name, "pull").inc(
                        outcome.record_count)
                return outcome
            offset = max(offset, outcome.next_begin_offset)
            if not await self.holds.hold(
                    topic.name, queue_id, offset, remaining,
                    lambda: self.store.max_offset(topic.name, queue_id),
                    lambda: self.store.written_max_offset(topic.name, queue_id)):
                return PullOutcome(outcome.status, offset, outcome.min_offset,
                                   self.store.max_offset(topic.name, queue_id))

    def subscription_filter(self, expression_type: str, expression: str) -> SubscriptionFilter:
        return subscription_filter(expression_type, expression,
                                   property_filter_enabled=self.enable_property_filter)

    # -- lookups ------------------------------------------------------------------------------

    def queue_offsets(self, topic_name: str) -> list[tuple[int, int, int]]:
        topic = self.topic(topic_name)
        return [(q, self.store.min_offset(topic.name, q), self.store.max_offset(topic.name, q))
                for q in range(topic.queues)]

    def search_offset(self, topic_name: str, queue_id: int, timestamp_ms: int) -> int:
        return self.search_timestamp(topic_name, queue_id, timestamp_ms)[0]

    def search_timestamp(self, topic_name: str, queue_id: int,
                         timestamp_ms: int) -> tuple[int, int | None]:
        """(the first offset stored at or after `timestamp_ms`, its store time or None when
        there is no such message)."""
        topic = self.topic(topic_name)
        self._queue(topic, queue_id)
        return self.store.search_timestamp(topic.name, queue_id, timestamp_ms)

    def view(self, physical_offset: int) -> bytes:
        if physical_offset < 0:
            raise InvalidArgument(f"physical_offset must be >= 0, got {physical_offset}")
        try:
            return self.store.read_record(physical_offset)
        except MessageNotFound as exc:
            raise NotFound(str(exc), code="MESSAGE_NOT_FOUND") from None

    def query_by_key(self, topic_name: str, key: str, begin_ms: int, end_ms: int,
                     max_results: int) -> list[bytes]:
        topic = self.topic(topic_name)
        if not key:
            raise InvalidArgument("key must not be empty")
        end_ms = end_ms or int(time.time() * 1000) + 1
        return self.store.query_by_key(topic.name, key, begin_ms, end_ms,
                                       max_results if max_results > 0 else 32)


def _check_record_sizes(topic: str, records: bytes, limit: int) -> None:
    """PayloadTooLarge naming the topic's max.message.bytes if a record of the batch is larger
    (only for a batch larger than the limit: one length read per record)."""
    pos, index = 0, 0
    while pos + 4 <= len(records):
        total = int.from_bytes(records[pos:pos + 4], "big", signed=True)
        if total > limit:
            raise PayloadTooLarge(f"rejected batch: record {index} is {total} bytes; topic "
                                  f"{topic!r} sets max.message.bytes={limit}")
        if total <= 0:
            return   # malformed: the store's validation names it
        pos, index = pos + total, index + 1
