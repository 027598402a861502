"""Batch reads of the `tidemq` Spark data source (`source.TideMQDataSource`; Structured
Streaming in `streaming` plans with the same pieces).

    spark.dataSource.register(TideMQDataSource)
    df = (spark.read.format("tidemq").option("namesrv", "127.0.0.1:9876")
          .option("topic", "orders").load())

Like Spark's Kafka source, the driver plans per-queue offset ranges (asking a
name server for the route and each broker for its queues' min/max offsets), packs small
ones into one partition, and every task pulls its ranges straight from the brokers that own
the queues. Partitions carry only names,
addresses and offsets; gRPC channels are opened inside `read()` on the executor.

Options (case-insensitive):
  namesrv                 name servers, "host:port;host:port" (required)
  topic                   the topic to read; or, as in Kafka, one of
  subscribe               a comma-separated list of topics, or
  subscribePattern        a regular expression (Python `re`, whole name) over the topics the
                          name servers route, the brokers' system topics left out; a stream
                          picks up matching topics created later (from their first offset)
  startingOffsets         "earliest" (default) | "latest" | JSON {"broker": {"queue": offset}}
                          ({"topic": {"broker": {...}}} with subscribe / subscribePattern)
  endingOffsets           "latest" (default) | "earliest" | JSON, exclusive
  maxMessagesPerPull      messages asked per Pull call (default 5000; the broker caps a reply
                          at its max pull bytes, 4 MiB by default)
  maxRecordsPerPartition  split a queue range into pieces of at most this many offsets
                          (default 0 = never cut)
  failOnDataLoss          "true" (default): fail if planned offsets were deleted
  timeoutSeconds          deadline of each RPC (default 10)
  maxOffsetsPerTrigger    streaming only: at most this many messages per micro-batch, shared
                          by backlog over the queues (default 0 = everything available)
  consumerGroup           group name sent with pulls (default "tidemq-spark"); the source
                          never commits offsets: a batch read is defined by its offsets alone
  startingOffsetsByTimestamp  epoch ms for every queue, or JSON {"broker": {"queue": ms}}:
                          start at the first message stored at or after it (beats
                          startingOffsets for the queues it covers)
  minPartitions           at least this many partitions: ranges cut evenly (default 0)
  targetRecordsPerPartition  pack queue ranges into ceil(offsets / this) partitions, whole
                          ranges each (default 20000; 0 = one partition per queue range);
                          off when maxRecordsPerPartition or minPartitions shape them
  includeHeaders          accepted for Kafka parity; properties are always in the rows
  progressGroup           streaming only: commit each finished batch's end offsets to this
                          consumer group (e.g. spark-<query>), so its lag shows progress
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSourceReader, InputPartition
from tidemq.analytics import offsets
from tidemq.analytics.decode import arrow_schema, decode_reply  # imported with the reader
from tidemq.analytics.options import bool_option, int_option
from tidemq.common.errors import InvalidArgument, TopicNotExist

# Messages asked per Pull: each reply costs a round trip, a decode call and an Arrow batch
# handed to the JVM, whatever its size; 5000 took 13-35 % off the CPU of a read of 20 000
# small messages against 1000 (docs/analytics.md, Performance).
DEFAULT_PULL = 5000


@dataclass(frozen=True)
class ReadOptions:
    """Validated options; small and picklable (sent to every task inside the reader)."""

    namesrv: tuple[str, ...]
    topic: str  # "" when subscribing to several topics
    starting: str | None
    ending: str | None
    max_messages_per_pull: int
    max_records_per_partition: int
    fail_on_data_loss: bool
    timeout: float
    consumer_group: str = "tidemq-spark"
    max_offsets_per_trigger: int = 0
    starting_by_timestamp: str | None = None
    min_partitions: int = 0
    target_records_per_partition: int = 20_000
    include_headers: bool = True
    progress_group: str = ""
    otlp_endpoint: str = ""
    subscribe: tuple[str, ...] = field(default=())
    subscribe_pattern: str = ""

    @property
    def single_topic(self) -> str | None:
        """The one topic read (offsets JSON without a topic level); None with subscribe /
        subscribePattern, whose offsets are keyed by topic first."""
        return self.topic or None

    @classmethod
    def parse(cls, options: dict[str, str]) -> ReadOptions:
        from tidemq.analytics.brokers import parse_addrs

        opts = {k.lower(): v for k, v in options.items()}
        topic = (opts.get("topic") or "").strip()
        subscribe = tuple(t.strip() for t in (opts.get("subscribe") or "").split(",")
                          if t.strip())
        pattern = (opts.get("subscribepattern") or "").strip()
        given = [name for name, value in (("topic", topic), ("subscribe", subscribe),
                                          ("subscribePattern", pattern)) if value]
        if len(given) != 1:
            raise InvalidArgument(
                "format 'tidemq' reads exactly one of the options topic, subscribe (a "
                "comma-separated list) or subscribePattern (a regular expression); "
                + (f"got {' and '.join(given)}" if given else "none was given"))
        if pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InvalidArgument(
                    f"subscribePattern {pattern!r} is not a valid regular expression: {exc}"
                ) from None
        return cls(
            namesrv=tuple(parse_addrs(opts.get("namesrv", ""))),
            topic=topic,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            starting=opts.get("startingoffsets"),
            ending=opts.get("endingoffsets"),
            max_messages_per_pull=int_option(opts, "maxMessagesPerPull", DEFAULT_PULL,
                                                 minimum=1),
            max_records_per_partition=int_option(opts, "maxRecordsPerPartition", 0, minimum=0),
            fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
            timeout=float(int_option(opts, "timeoutSeconds", 10, minimum=1)),
            consumer_group=(opts.get("consumergroup") or "tidemq-spark").strip(),
            max_offsets_per_trigger=int_option(opts, "maxOffsetsPerTrigger", 0, minimum=0),
            starting_by_timestamp=opts.get("startingoffsetsbytimestamp"),
            min_partitions=int_option(opts, "minPartitions", 0, minimum=0),
            target_records_per_partition=int_option(opts, "targetRecordsPerPartition",
                                                    20_000, minimum=0),
            include_headers=bool_option(opts, "includeHeaders", True),
            progress_group=(opts.get("progressgroup") or "").strip(),
            otlp_endpoint=(opts.get("otlpendpoint") or "").strip(),
        )


class QueueRangePartition(InputPartition):
    """Offsets [start, end) of one queue plus where to pull them from (master first)."""

    def __init__(self, topic: str, broker: str, addrs: tuple[str, ...], queue_id: int,
                 start: int, end: int) -> None:
        super().__init__((topic, broker, queue_id, start, end))
        self.topic = topic
        self.broker = broker
        self.addrs = addrs
        self.queue_id = queue_id
        self.start = start
        self.end = end

    @property
    def ranges(self) -> tuple[QueueRangePartition, ...]:
        return (self,)

    def __repr__(self) -> str:
        return (f"QueueRangePartition({self.topic}/{self.broker}/{self.queue_id} "
                f"[{self.start}, {self.end}))")


class PackedPartition(InputPartition):
    """Several small queue ranges read one after the other by one task (`pack_ranges`)."""

    def __init__(self, ranges: tuple[QueueRangePartition, ...]) -> None:
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"PackedPartition({', '.join(map(repr, self.ranges))})"


def to_partitions(ranges, addrs: dict[str, tuple[str, ...]],
                  opts: ReadOptions) -> list[QueueRangePartition | PackedPartition]:
    """Ranges cut by maxRecordsPerPartition / minPartitions, or else packed by
    targetRecordsPerPartition; a partition of one range is a QueueRangePartition."""
    pieces = offsets.ensure_min_partitions(
        offsets.split_ranges(ranges, opts.max_records_per_partition), opts.min_partitions)
    shaped = opts.max_records_per_partition or opts.min_partitions
    groups = offsets.pack_ranges(pieces, 0 if shaped else opts.target_records_per_partition)
    partitions = [tuple(QueueRangePartition(r.topic, r.broker, addrs[r.broker], r.queue_id,
                                            r.start, r.end) for r in group)
                  for group in groups]
    return [group[0] if len(group) == 1 else PackedPartition(group) for group in partitions]


@dataclass
class Survey:
    """What the brokers hold now for the topics a read covers."""

    bounds: dict[offsets.QueueKey, offsets.QueueBounds]
    addrs: dict[str, tuple[str, ...]]  # broker group -> addresses, master first


def selected_topics(opts: ReadOptions) -> list[str]:
    """`topic`, the `subscribe` list, or the routed topics `subscribePattern` matches."""
    from tidemq.analytics import brokers
    from tidemq.common.system_topics import is_system_topic

    if not opts.subscribe_pattern:
        return [opts.topic] if opts.topic else list(opts.subscribe)
    pattern = re.compile(opts.subscribe_pattern)
    return [name for name in brokers.list_topics(opts.namesrv, opts.timeout)
            if not is_system_topic(name) and pattern.fullmatch(name)]


def survey(opts: ReadOptions) -> Survey:
    """Route and queue bounds of every selected topic (a topic the pattern matched that is
    deleted meanwhile is left out; a named one that does not exist is TOPIC_NOT_EXIST)."""
    from tidemq.analytics import brokers

    found = Survey({}, {})
    for topic in selected_topics(opts):
        try:
            groups = brokers.fetch_route(opts.namesrv, topic, opts.timeout)
        except TopicNotExist:
            if not opts.subscribe_pattern:
                raise
            continue
        found.bounds.update(brokers.fetch_bounds(groups, topic, opts.timeout))
        found.addrs.update({group.name: group.addrs for group in groups})
    return found


def starting_spec(opts: ReadOptions, found: Survey, default: int) -> offsets.OffsetSpec:
    """startingOffsets, with the queues startingOffsetsByTimestamp names (or all, for a bare
    timestamp) replaced by the offsets their brokers find for the timestamps."""
    from tidemq.analytics import brokers

    spec = offsets.parse_offsets("startingOffsets", opts.starting, default, opts.single_topic)
    by_time = offsets.parse_timestamps(opts.starting_by_timestamp, opts.single_topic)
    if by_time is None:
        return spec
    unknown = sorted(set(by_time.exact) - set(found.bounds))
    if unknown:
        raise InvalidArgument("startingOffsetsByTimestamp names queues the read does not "
                              f"have: {', '.join(map(str, unknown))}")
    at_times = brokers.search_offsets(found.addrs, found.bounds.keys(), by_time, opts.timeout)
    return offsets.OffsetSpec(spec.default, {**spec.exact, **at_times})


def plan_partitions(opts: ReadOptions) -> list[QueueRangePartition | PackedPartition]:
    """Driver side: routes + queue bounds -> offset ranges -> partitions."""
    found = survey(opts)
    ranges = offsets.plan_ranges(
        found.bounds,
        starting_spec(opts, found, offsets.EARLIEST),
        offsets.parse_offsets("endingOffsets", opts.ending, offsets.LATEST, opts.single_topic),
        fail_on_data_loss=opts.fail_on_data_loss,
    )
    return to_partitions(ranges, found.addrs, opts)


def read_partition(opts: ReadOptions, partition: QueueRangePartition | PackedPartition,
                   projected: str = ""):
    """Executor side: pull each range of the partition and yield one Arrow batch per pull
    reply, of the columns `projected` names (decode.projection; one span per range read)."""
    from tidemq.analytics import brokers
    from tidemq.analytics.spans import partition_read_span

    schema = arrow_schema(projected)
    for piece in partition.ranges:
        with partition_read_span(opts.otlp_endpoint, piece) as counts:
            for records in read_ahead(brokers.pull_range(
                piece.addrs, piece.topic, piece.queue_id, piece.start, piece.end,
                max_messages=opts.max_messages_per_pull, timeout=opts.timeout,
                fail_on_data_loss=opts.fail_on_data_loss, consumer_group=opts.consumer_group,
            )):
                batch = decode_reply(records, piece.broker, piece.start, piece.end, schema)
                if batch.num_rows:
                    counts["rows"] += batch.num_rows
                    yield batch


def read_ahead(replies: Iterator[bytes]) -> Iterator[bytes]:
    """The next pull is in flight while the caller decodes the last reply (gRPC waits
    without the GIL), so the broker's answer time is hidden behind decoding. Pulls stay one
    at a time and in order; an error of a pull is raised where its reply was expected."""
    with ThreadPoolExecutor(1, thread_name_prefix="tidemq-pull") as pool:
        pending = pool.submit(next, replies, None)
        while (reply := pending.result()) is not None:
            pending = pool.submit(next, replies, None)
            yield reply


class TideMQBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, projected: str = "") -> None:
        self.opts, self.projected = opts, projected

    def partitions(self) -> list[InputPartition]:
        return plan_partitions(self.opts)

    def read(self, partition: InputPartition):
        if not isinstance(partition, QueueRangePartition | PackedPartition):
            return iter(())  # Spark substitutes InputPartition(None) when nothing is planned
        return read_partition(self.opts, partition, self.projected)
