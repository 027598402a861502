"""Explicit pull consumption (docs/client.md): the caller chooses queue and offset.

This is the building block for group-coordinated consumers: `pull` is one long-polling Pull
on the queue's master, `commit`/`committed` keep the group's offsets on the broker that owns
the queue. A PushConsumer reuses `pull`, `fetch_queues` and `commit` unchanged.

Reads (pulls, queue offsets, committed offsets) fall back to the group's slaves when its master
is unreachable or not registered: slaves hold the same CommitLog bytes at the same offsets and
a copy of the master's committed offsets, so consumption goes on during a failover. Commits go
to the master only.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemq.client import client_tracing
from tidemq.client.brokers import BrokerClients
from tidemq.client.consume_spans import record_receive
from tidemq.client.message import MessageQueue, PullResult, PullStatus, decode_records
from tidemq.client.routes import MASTER_ID, NameServerClient, RouteCache, TopicRoute
from tidemq.common import errors, sqlfilter
from tidemq.common.rpc import BreakerSettings
from tidemq.v1 import broker_pb2

RPC_MARGIN_S = 2.0           # the RPC deadline outlives the broker's hold by this much
# Calls any replica of a group can answer (a slave is read-only).
REPLICA_READS = frozenset({"Pull", "GetQueueOffsets", "SearchOffset", "QueryOffsets"})


def checked_subscription(expression: str, expression_type: str) -> str:
    """The canonical expression type ("TAG" or "SQL92") after checking the expression here,
    so a bad SQL92 filter fails at once with INVALID_FILTER (compiled once per text)."""
    kind = sqlfilter.expression_type(expression_type)
    if kind == sqlfilter.SQL92:
        sqlfilter.compile_sql92(expression)
    return kind


def exact_tags(expression: str) -> frozenset[str] | None:
    """`"*"`/`""` → None (every tag); `"A || B"` → {"A", "B"}. The broker filters by tag hash,
    so two tags with the same hash both pass it; the client keeps only the exact ones."""
    tags = frozenset(tag.strip() for tag in expression.split("||"))
    return None if not expression.strip() or "*" in tags else tags


class PullConsumer:
    """Pull messages from chosen queues at chosen offsets.

    >>> from tidemq.client import PullConsumer
    >>> with PullConsumer("127.0.0.1:9876", consumer_group="audit") as consumer:  # doctest: +SKIP
    ...     for mq in consumer.fetch_queues("orders"):
    ...         result = consumer.pull(mq, consumer.committed(mq) or 0, max_messages=32)
    ...         for message in result.messages:
    ...             print(mq, message.queue_offset, message.body)
    ...         consumer.commit(mq, result.next_offset)
    """

    def __init__(self, namesrv_addrs: str | Sequence[str], *, consumer_group: str = "DEFAULT_CONSUMER",
                 timeout: float = 3.0, breaker: BreakerSettings | None = None,
                 route_refresh_s: float = 30.0, client_id: str = "") -> None:
        if not consumer_group:
            raise errors.InvalidArgument("consumer_group must not be empty")
        client_tracing.start_export()  # before any channel: its calls carry the trace
        self.consumer_group = consumer_group
        self.timeout = timeout
        self.routes = RouteCache(NameServerClient(namesrv_addrs, timeout=timeout, breaker=breaker),
                                 refresh_interval=route_refresh_s)
        # client_id: the entity client quotas charge (docs/quotas.md); '' = <host>@<pid>
        self.brokers = BrokerClients(timeout=timeout, breaker=breaker, client_id=client_id)
        # queue -> registered broker id its replica group advised pulling from (absent: master)
        self.read_from: dict[MessageQueue, int] = {}

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of `topic` (raises TopicNotExist)."""
        return self.routes.get(topic).read_queues()

    def pull(self, mq: MessageQueue, offset: int, max_messages: int = 32, *,
             long_poll: float = 0.0, tag_expression: str = "*",
             max_bytes: int = 0, broadcasting: bool = False,
             expression_type: str = "TAG") -> PullResult:
        """Read up to `max_messages` from `offset`; hold up to `long_poll` s if none are there.

        `tag_expression` is a tag expression (`"*"`, `"A || B"`) or, with
        `expression_type="SQL92"`, a SQL92 filter over the message properties
        (`"amount > 5 AND region IN ('eu')"`, docs/filters.md) that the broker evaluates.

        `broadcasting` says the group consumes every queue in every member, so the broker can
        refuse it where the group's definition disallows broadcast consumption."""
        if offset < 0 or max_messages <= 0:
            raise errors.InvalidArgument("offset must be >= 0 and max_messages > 0")
        kind = checked_subscription(tag_expression, expression_type)
        request = broker_pb2.PullRequest(
            consumer_group=self.consumer_group, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=offset, max_messages=max_messages, max_bytes=max_bytes,
            suspend_timeout_ms=int(long_poll * 1000), tag_expression=tag_expression,
            broadcasting=broadcasting, expression_type=kind,
        )
        response = self._call(mq, "Pull", request, timeout=self.timeout + long_poll
                              + (RPC_MARGIN_S if long_poll else 0), idempotent=True,
                              prefer=self.read_from.get(mq))
        if response.HasField("suggested_broker_id"):  # far behind: a slave; caught up: master
            if response.suggested_broker_id == MASTER_ID:
                self.read_from.pop(mq, None)
            else:
                self.read_from[mq] = response.suggested_broker_id
        records = response.records  # each read of a bytes field is a fresh copy: read it once
        messages = decode_records(records, mq.broker_name) if records else []
        wanted = exact_tags(tag_expression) if kind == sqlfilter.TAG else None
        if wanted is not None and messages:
            messages = [m for m in messages if m.tags in wanted]
        record_receive(mq.topic, self.consumer_group, messages)
        return PullResult(PullStatus(response.status), messages, response.next_begin_offset,
                          response.min_offset, response.max_offset)

    def queue_offsets(self, topic: str, broker_name: str) -> dict[int, tuple[int, int]]:
        """{queue_id: (min_offset, max_offset)} for one broker group's queues of `topic`."""
        mq = MessageQueue(topic, broker_name, 0)
        response = self._call(mq, "GetQueueOffsets",
                              broker_pb2.GetQueueOffsetsRequest(topic=topic), idempotent=True)
        return {q.queue_id: (q.min_offset, q.max_offset) for q in response.queues}

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after `timestamp_ms`."""
        return self.search_timestamp(mq, timestamp_ms)[0]

    def search_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> tuple[int, int]:
        """(the first offset stored at or after `timestamp_ms`, when that message was stored
        in epoch ms); the time is 0 when none was (the offset is then the queue's end)."""
        response = self._call(mq, "SearchOffset", broker_pb2.SearchOffsetRequest(
            topic=mq.topic, queue_id=mq.queue_id, timestamp_ms=timestamp_ms), idempotent=True)
        return response.queue_offset, response.store_timestamp_ms

    def commit(self, mq: MessageQueue, offset: int, *, generation_id: int = -1,
               member_id: str = "", metadata: str = "") -> None:
        """Record that the group has consumed everything before `offset` in `mq`. With a
        `generation_id` (>= 0) and `member_id`, the broker takes it only from that member of
        the group's current generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
        REBALANCE_IN_PROGRESS otherwise); -1 is not checked. `metadata` (at most 4096 bytes,
        OFFSET_METADATA_TOO_LARGE past it) is kept with the offset: committed_with_metadata
        reads it back."""
        self._call(mq, "CommitOffsets", broker_pb2.CommitOffsetsRequest(
            consumer_group=self.consumer_group, generation_id=generation_id,
            member_id=member_id,
            offsets=[broker_pb2.QueueOffset(topic=mq.topic, queue_id=mq.queue_id, offset=offset,
                                            metadata=metadata)],
        ), idempotent=True)

    def committed(self, mq: MessageQueue) -> int | None:
        """The group's committed offset for `mq`, or None if it never committed one."""
        found = self.committed_with_metadata(mq)
        return None if found is None else found[0]

    def committed_with_metadata(self, mq: MessageQueue) -> tuple[int, str] | None:
        """(committed offset, its commit's metadata string) for `mq`, or None."""
        response = self._call(mq, "QueryOffsets", broker_pb2.QueryOffsetsRequest(
            consumer_group=self.consumer_group, topic=mq.topic), idempotent=True)
        for item in response.offsets:
            if item.topic == mq.topic and item.queue_id == mq.queue_id:
                return item.offset, item.metadata
        return None

    def close(self) -> None:
        """Nothing to release today (channels are pooled per process); kept for symmetry."""

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def master_addr(self, mq: MessageQueue) -> str:
        route: TopicRoute = self.routes.get(mq.topic)
        if mq.broker_name not in route.brokers:
            raise errors.NotFound(
                f"broker group {mq.broker_name!r} holds no queue of topic {mq.topic!r}",
                code="BROKER_NOT_FOUND",
            )
        return route.master_addr(mq.broker_name)

    def _call(self, mq: MessageQueue, method: str, request, *, timeout: float | None = None,
              idempotent: bool = False, prefer: int | None = None):
        """`prefer`: a registered broker id to try first (a replica's advice for pulls)."""
        addrs = (self._replica_addrs(mq, prefer) if method in REPLICA_READS
                 else [self.master_addr(mq)])
        *fallbacks_before, last = addrs
        for addr in fallbacks_before:
            try:
                return self.brokers.get(addr).call(method, request, timeout=timeout,
                                                   idempotent=idempotent)
            except errors.ServiceUnavailable:
                self.routes.invalidate(mq.topic)  # the next call re-reads the route
        try:
            return self.brokers.get(last).call(method, request, timeout=timeout,
                                               idempotent=idempotent)
        except errors.ServiceUnavailable:
            self.routes.invalidate(mq.topic)
            raise

    def _replica_addrs(self, mq: MessageQueue, prefer: int | None = None) -> list[str]:
        route: TopicRoute = self.routes.get(mq.topic)
        addrs = route.replica_addrs(mq.broker_name)
        if not addrs:
            raise errors.NotFound(
                f"broker group {mq.broker_name!r} holds no queue of topic {mq.topic!r}",
                code="BROKER_NOT_FOUND",
            )
        preferred = route.brokers[mq.broker_name].addrs.get(prefer) if prefer else None
        if preferred:  # gone from the route: the master (or whoever comes first) again
            addrs = [preferred, *(a for a in addrs if a != preferred)]
        return addrs
