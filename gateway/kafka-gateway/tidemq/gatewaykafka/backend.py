"""What gateway-kafka does, over TideMQ's client library: no Kafka type here.

Partitions: a topic's partition map in the config center (tidemq.configclient.topics) names
partition i's (broker group, queue id); it is only ever extended, so a partition keeps its
queue even while its group is out of the route. A topic created here is created with one; a
topic without one (created natively, or before maps) gets one from its routed queues, sorted,
the first time the gateway sees it, and a queue that shows up later in the route (a new broker
group) is appended (docs/kafka.md). Sends go through one Producer (a batch per
partition: all stored or none, on that queue); reads and queue offsets through one
PullConsumer; committed offsets through a PullConsumer of the consumer group; topics through
Admin; group membership through the group coordinator (coordination.py); producer ids from a
config-center counter.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from tidemq.client import (
    Message,
    MessageExt,
    MessageQueue,
    NameServerClient,
    Producer,
    ProducerSequence,
    PullConsumer,
    PullStatus,
    RouteCache,
    SendStatus,
)
from tidemq.client.admin import Admin
from tidemq.common import errors
from tidemq.common.system_topics import is_system_topic
from tidemq.configclient import topic_settings
from tidemq.configclient.follow import Follower
from tidemq.configclient.topics import (
    TOPIC_PREFIX,
    TopicDefinitionError,
    TopicDefinitions,
    spread,
)

GATEWAY_GROUP = "tidemq-gateway-kafka"   # the gateway's producer group and its reads' group
PRODUCER_ID_KEY = "/tidemq/kafka/next-producer-id"
PRODUCER_ID_BLOCK = 1000                 # ids taken from the config center per write
MAX_CACHED_MAPS = 10_000                 # topics whose partition maps are kept
MAX_GROUP_READERS = 1024                 # PullConsumers kept for committed offsets
ROUTE_REFRESH_S = 5.0                    # a new topic's partitions show within this
GAP_READS = 16   # pulls one Fetch makes past gaps of a compacted queue (16 000 units each)
MAP_REFRESH_S = 5.0                      # a partition map is read again after this
CREATE_WAIT_S = 30.0                     # a created topic's queues are routed within this
FETCH_MAX_RECORDS = 1024                 # per partition and Fetch; the client's bytes bound it


# A send stored but not confirmed, as the Kafka error its producer retries (possibly stored)
UNCONFIRMED = {SendStatus.FLUSH_DISK_TIMEOUT: "REQUEST_TIMED_OUT"}


@dataclass(frozen=True, slots=True)
class FetchedQueue:
    messages: list[MessageExt]
    high_watermark: int    # the queue's max offset: the next offset to be written
    log_start: int         # its min offset
    out_of_range: bool


class KafkaBackend:
    def __init__(self, namesrv_addrs: str, config_center: str, *, send_timeout_s: float = 3.0,
                 rpc_timeout_s: float = 3.0) -> None:
        self.namesrv_addrs = namesrv_addrs
        self.rpc_timeout_s = rpc_timeout_s
        self.namesrv = NameServerClient(namesrv_addrs, timeout=rpc_timeout_s)
        self.routes = RouteCache(self.namesrv, refresh_interval=ROUTE_REFRESH_S)
        self.producer = Producer(namesrv_addrs, producer_group=GATEWAY_GROUP,
                                 send_timeout=send_timeout_s)
        self.reader = PullConsumer(namesrv_addrs, consumer_group=GATEWAY_GROUP,
                                   timeout=rpc_timeout_s)
        self.admin = Admin(namesrv_addrs, config_center=config_center, timeout=rpc_timeout_s)
        self._group_readers: OrderedDict[str, PullConsumer] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = range(0)
        # topic -> (until, partition map, the settings its definition sets): one read of it
        self._maps: dict[str, tuple[float, list[MessageQueue], dict]] = {}
        self._follower: Follower | None = None

    # -- topics and partitions -----------------------------------------------------------------

    def topics(self) -> list[str]:
        """Every routed topic a Kafka client may see (the brokers' own are hidden)."""
        return [t for t in self.namesrv.topics() if not is_system_topic(t)]

    def partitions(self, topic: str) -> list[MessageQueue]:
        """Partition i = the i-th entry of the topic's partition map."""
        return self._definition(topic)[0]

    def log_append_time(self, topic: str) -> bool:
        """True when the topic's records carry the time they were stored (LogAppendTime)."""
        return topic_settings.value(self._definition(topic)[1],
                                    "message.timestamp.type") == "LogAppendTime"

    def _definition(self, topic: str) -> tuple[list[MessageQueue], dict]:
        """The topic's partition map and settings, read again after MAP_REFRESH_S (or when
        its definition changes: follow_definitions)."""
        now = time.monotonic()
        with self._lock:
            cached = self._maps.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        queues, settings = self._read_map(topic)
        with self._lock:
            self._maps[topic] = (now + MAP_REFRESH_S, queues, settings)
            if len(self._maps) > MAX_CACHED_MAPS:
                self._maps.pop(next(iter(self._maps)))
        return queues, settings

    def _read_map(self, topic: str) -> tuple[list[MessageQueue], dict]:
        definitions = TopicDefinitions(self.admin.config)
        try:
            routed = self.routes.get(topic).read_queues()
        except errors.NotFound:
            routed = []
        pairs = sorted((mq.broker_name, mq.queue_id) for mq in routed)
        settings: dict = {}
        try:
            definition, current = definitions.partition_map(topic)
            settings = dict(definition.config)
            if current is None or not set(pairs) <= set(current):
                # first sight of a topic without a map, or a queue the map lacks: appended
                current = definitions.extend_partitions(topic, lambda _, cur: [
                    p for p in pairs if p not in set(cur or [])])
        except errors.TopicNotExist:
            if not routed:
                raise
            current = pairs     # routed but not defined in the config center: not kept
        except TopicDefinitionError as exc:
            raise errors.InvalidArgument(str(exc), code="INVALID_TOPIC") from None
        if not current:
            raise errors.ServiceUnavailable(f"topic {topic!r} is defined but no broker serves "
                                            "it yet", code="SERVICE_UNAVAILABLE")
        return [MessageQueue(topic, group, queue) for group, queue in current], settings

    def follow_definitions(self) -> None:
        """Forget a topic's cached partition map and route when its definition changes, so
        partitions another gateway instance added (CreatePartitions there) show here within
        the watch's latency, not MAP_REFRESH_S."""
        def forget_all() -> int:
            with self._lock:
                self._maps.clear()
            return self.admin.config.range(TOPIC_PREFIX, limit=1).revision

        self._follower = Follower(self.admin.config, TOPIC_PREFIX, read=forget_all,
                                  on_event=lambda e: self._forget(e.kv.key[len(TOPIC_PREFIX):]),
                                  name="kafka-topic-definitions").start()

    def partition(self, topic: str, index: int) -> MessageQueue:
        queues = self.partitions(topic)
        if index >= len(queues):   # a partition added since the map was cached?
            self._forget(topic)
            queues = self.partitions(topic)
        if not 0 <= index < len(queues):
            raise errors.NotFound(f"topic {topic!r} has no partition {index}",
                                  code="UNKNOWN_TOPIC_OR_PARTITION")
        return queues[index]

    def alter_topic(self, topic: str, changes: dict) -> dict[str, dict]:
        """Change per-topic settings (None: back to the default)."""
        return self.admin.alter_topic(topic, changes)

    def topic_config(self, topic: str) -> dict[str, dict]:
        """Every per-topic setting's value and source (docs/topics.md)."""
        return self.admin.topic_config(topic)

    def broker_groups(self) -> list[str]:
        info = self.namesrv.cluster_info()
        return sorted(name for name, data in info.broker_addr_table.items() if data.broker_addrs)

    def create_topic(self, name: str, partitions: int, config: dict | None = None) -> None:
        """A topic of `partitions` partitions spread over the broker groups (each partition
        to the group with the fewest so far), its partition map and per-topic settings written
        with it; returns once the name servers route every queue."""
        pairs = spread(self.broker_groups(), partitions)
        self.admin.create_topic(name, partitions=pairs, wait=False, config=config)
        self._forget(name)
        self._wait_routed(name, pairs)

    def create_partitions(self, name: str, count: int) -> None:
        """Extend the topic to `count` partitions: new queues on the groups holding the fewest,
        appended to its partition map (the existing partitions keep their queues)."""
        have = len(self.partitions(name))
        if count <= have:
            raise errors.InvalidArgument(
                f"topic {name!r} has {have} partitions: partitions can only be added, ask for "
                f"more than {have}", code="INVALID_PARTITIONS")
        groups = self.broker_groups()

        def extend(definition, current):
            current = current or []
            if len(current) >= count:
                return []
            start = {g: definition.queues_on(g) for g in groups}
            return spread(groups, count - len(current), start)

        pairs = TopicDefinitions(self.admin.config).extend_partitions(name, extend)
        self._forget(name)
        self._wait_routed(name, pairs)

    def _wait_routed(self, name: str, pairs: list[tuple[str, int]]) -> None:
        deadline = time.monotonic() + CREATE_WAIT_S
        while True:
            self.routes.invalidate(name)
            try:
                routed = {(mq.broker_name, mq.queue_id)
                          for mq in self.routes.get(name).read_queues()}
            except errors.NotFound:
                routed = set()
            if set(pairs) <= routed:
                return
            if time.monotonic() > deadline:
                raise errors.DeadlineExceeded(
                    f"topic {name!r}: the brokers did not serve its new queues within "
                    f"{CREATE_WAIT_S:.0f} s", code="DEADLINE_EXCEEDED")
            time.sleep(0.1)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._maps.pop(name, None)
        self.routes.invalidate(name)

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topic(name, wait=True)
        self._forget(name)

    # -- produce and fetch ---------------------------------------------------------------------

    def produce(self, mq: MessageQueue, messages: Sequence[Message],
                sequence: ProducerSequence | None = None) -> tuple[int, int]:
        """Store the messages on `mq`, all or none; (the queue offset of the first, when the
        broker stored them in epoch ms, 0 if it did not say). With an idempotent producer's
        `sequence` the broker stores a repeat once (answered with the first offsets and
        time) and refuses gaps, fenced epochs and producers it lost."""
        results = self.producer.send_batch(messages, queue=mq, sequence=sequence)
        status = results[0].status
        if status is not SendStatus.SEND_OK:
            # stored on the master, not confirmed (its replicas or its disk did not answer in
            # time): no acknowledgement, as Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND. The
            # client retries; a sequenced repeat is stored once and answered once confirmed.
            raise errors.PreconditionFailed(
                f"the batch was stored on the master of {mq.broker_name!r} but not confirmed "
                f"({status.name}): not acknowledged; retry it",
                code=UNCONFIRMED.get(status, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"))
        return results[0].queue_offset, results[0].store_timestamp

    def fetch(self, mq: MessageQueue, offset: int, max_bytes: int) -> FetchedQueue:
        result = self.reader.pull(mq, offset, max_messages=FETCH_MAX_RECORDS, max_bytes=max_bytes)
        for _ in range(GAP_READS):   # a compacted queue's long run of gaps: read past it
            if (result.status is not PullStatus.NO_MATCHED_MSG
                    or not offset < result.next_offset < result.max_offset):
                break
            offset = result.next_offset
            result = self.reader.pull(mq, offset, max_messages=FETCH_MAX_RECORDS,
                                      max_bytes=max_bytes)
        # the broker's word: past the end of a slave's copy, or between the confirmed offset
        # and the log's end, it answers "nothing new" (Kafka: an empty fetch), and a Kafka
        # client told OFFSET_OUT_OF_RANGE would reset its group to the earliest offset
        out_of_range = result.status is PullStatus.OFFSET_ILLEGAL
        messages = [] if out_of_range else list(result.messages)
        return FetchedQueue(messages, result.max_offset, result.min_offset, out_of_range)

    def wait_for_data(self, mq: MessageQueue, offset: int, timeout_s: float) -> bool:
        """Hold on the broker's long poll until `mq` has a message at or after `offset` or
        `timeout_s` passes; True when there is one (the caller reads it with `fetch`)."""
        result = self.reader.pull(mq, offset, max_messages=1, max_bytes=1,
                                  long_poll=timeout_s)
        return bool(result.messages) or result.max_offset > offset

    def offsets(self, mq: MessageQueue) -> tuple[int, int]:
        """(log start, high watermark) of a partition."""
        return self.reader.queue_offsets(mq.topic, mq.broker_name).get(mq.queue_id, (0, 0))

    def offset_for_time(self, mq: MessageQueue, timestamp_ms: int) -> tuple[int, int]:
        """(the first offset the broker stored at or after `timestamp_ms`, from its time
        index, and that message's store time; 0 when there is none)."""
        return self.reader.search_timestamp(mq, timestamp_ms)

    # -- committed offsets -------------------------------------------------------------------

    def group_reader(self, group: str) -> PullConsumer:
        with self._lock:
            reader = self._group_readers.get(group)
            if reader is None:
                reader = PullConsumer(self.namesrv_addrs, consumer_group=group,
                                      timeout=self.rpc_timeout_s)
                self._group_readers[group] = reader
                if len(self._group_readers) > MAX_GROUP_READERS:
                    self._group_readers.popitem(last=False)
            else:
                self._group_readers.move_to_end(group)
            return reader

    def commit(self, group: str, mq: MessageQueue, offset: int, generation_id: int = -1,
               member_id: str = "", metadata: str = "") -> None:
        """Commit on the queue's broker, fenced there by generation and member (>= 0), with
        the commit's metadata string (kept with the offset, at most 4096 bytes)."""
        self.group_reader(group).commit(mq, offset, generation_id=generation_id,
                                        member_id=member_id, metadata=metadata)

    def committed(self, group: str, mq: MessageQueue) -> tuple[int, str] | None:
        """(committed offset, its metadata string), or None if the group never committed."""
        return self.group_reader(group).committed_with_metadata(mq)

    # -- groups (DescribeGroups, ListGroups) ---------------------------------------------------

    def groups(self) -> list[tuple[str, str, str]]:
        """(group id, coordinator state, coordinator protocol name) of every group that
        consumed anywhere: joined a coordinator, popped, or committed offsets (what `tidemq
        group list` shows; state and protocol are "" for a group that never joined)."""
        return [(g.group_id, g.state, g.protocol_name) for g in self.admin.group_list()
                if g.group_id != GATEWAY_GROUP]

    def has_offsets(self, group: str) -> bool:
        """True when some broker holds an offset the group committed (or a pop cursor)."""
        return any(o.committed is not None for o in self.admin.group_offsets(group))

    # -- producer ids --------------------------------------------------------------------------

    def next_producer_id(self) -> int:
        """A producer id no other InitProducerId got, from blocks the config center hands out
        (a compare-and-set on one counter), so gateways never hand out the same one."""
        with self._lock:
            if not self._ids:
                start = self._take_block()
                self._ids = range(start, start + PRODUCER_ID_BLOCK)
            producer_id, self._ids = self._ids[0], self._ids[1:]
            return producer_id

    def _take_block(self) -> int:
        taken = []

        def advance(current) -> str:
            start = int(current.text) if current is not None else 0
            taken[:] = [start]
            return str(start + PRODUCER_ID_BLOCK)

        self.admin.config.update(PRODUCER_ID_KEY, advance)
        return taken[0]

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
        self.producer.close()
        self.admin.close()
