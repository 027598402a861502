"""The `tidemq` Spark sink: `df.write.format("tidemq")` and `df.writeStream.format("tidemq")`.

    (df.selectExpr("region AS key", "to_json(struct(*)) AS value")
       .write.format("tidemq").option("namesrv", "127.0.0.1:9876")
       .option("topic", "revenue").mode("append").save())

Columns are named like the Kafka sink's: `value` (binary or string, required), `key` (the
message's KEYS, space-separated), `topic` (overrides the option per row), `tag`, `properties`
(map<string,string>, Kafka's headers), `queue` (a global queue index, Kafka's partition) and
`message_group` (FIFO: one queue per group). Other columns are ignored.

Each task batches its rows per target queue and sends them straight to the master of the
queue's broker group. A row goes to its `queue`, else its `message_group`'s queue, else the
task's own queue (partition id plus micro-batch id, modulo the topic's write queues), so a
partition's rows travel in few large batches and a stream's micro-batches take turns. Every row gets a unique id derived from (write id, batch id, partition,
row position): a replayed micro-batch (or a retried task) produces the same ids. With
`exactlyOnce=true` the sends are idempotent (docs/idempotence.md): the broker drops an id it
already stored, so replays store nothing twice.
"""

from __future__ import annotations

import hashlib
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from tidemq.analytics.brokers import fetch_route_data, parse_addrs
from tidemq.analytics.options import bool_option, int_option
from tidemq.common import errors, record

# The network modules are imported with the writer, not at its first send: a stream's first
# micro-batch, which often writes nothing, then loads them into the Python worker, and the
# first batch with messages does not wait for them (docs/analytics.md, Performance).
from tidemq.common.channel import BrokerChannel
from tidemq.v1 import broker_pb2, common_pb2

PERM_WRITE = 4
# Spark's local properties of a micro-batch's jobs (StreamExecution / MicroBatchExecution).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

COLUMN_TYPES = {"value": ("binary", "string"), "key": ("binary", "string"),
                "topic": ("string",), "tag": ("string",),
                "properties": ("map<string,string>",), "queue": ("int", "bigint"),
                "message_group": ("string",)}


@dataclass(frozen=True)
class WriteOptions:
    namesrv: tuple[str, ...]
    topic: str                 # "" = every row names its topic
    exactly_once: bool
    batch_size: int
    batch_bytes: int
    timeout: float

    @classmethod
    def parse(cls, options: dict[str, str]) -> WriteOptions:
        opts = {k.lower(): v for k, v in options.items()}
        return cls(
            namesrv=tuple(parse_addrs(opts.get("namesrv", ""))),
            topic=(opts.get("topic") or "").strip(),
            exactly_once=bool_option(opts, "exactlyOnce", False),
            batch_size=int_option(opts, "batchSize", 256, minimum=1),
            batch_bytes=int_option(opts, "batchBytes", 1 << 20, minimum=1024),
            timeout=float(int_option(opts, "timeoutSeconds", 10, minimum=1)),
        )


def check_columns(schema, opts: WriteOptions) -> None:
    """Driver side: refuse a frame the sink cannot write, before any task runs."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    if "value" not in types:
        raise errors.InvalidArgument("format 'tidemq' writes a column named value (binary or "
                                     f"string); the frame has {sorted(types)}")
    if "topic" not in types and not opts.topic:
        raise errors.InvalidArgument("format 'tidemq' needs the option topic or a topic column")
    for name, allowed in COLUMN_TYPES.items():
        if name in types and types[name] not in allowed:
            raise errors.InvalidArgument(f"column {name} must be {' or '.join(allowed)}, "
                                         f"not {types[name]}")


def row_unique_id(write_id: str, batch_id: int, partition: int, position: int) -> str:
    """The row's UNIQ_KEY: 32 hex digits (RocketMQ's shape), the same on every replay."""
    digest = hashlib.blake2b(f"{write_id}/{batch_id}/{partition}/{position}".encode(),
                             digest_size=16)
    return digest.hexdigest().upper()


@dataclass(frozen=True, slots=True)
class WriteQueue:
    broker: str
    addr: str          # the group's master: only masters take sends
    queue_id: int


def fetch_write_queues(namesrv: Sequence[str], topic: str, timeout: float) -> list[WriteQueue]:
    """The topic's writable queues, in a stable order (broker name, queue id)."""
    route = fetch_route_data(namesrv, topic, timeout)
    masters = {data.broker_name: data.broker_addrs.get(0, "") for data in route.broker_datas}
    queues = [WriteQueue(q.broker_name, masters[q.broker_name], i)
              for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
              if q.perm & PERM_WRITE and masters.get(q.broker_name)
              for i in range(q.write_queue_nums)]
    if not queues:
        raise errors.ServiceUnavailable(f"topic {topic!r} has no writable queue with a master")
    return queues


def choose_queue(queues: Sequence[WriteQueue], topic: str, own: int, queue: int | None,
                 group: str | None) -> WriteQueue:
    """A row's queue: its `queue` index, else its message group's queue (crc32, stable across
    processes), else the task's own (`own`: partition id + batch id, modulo the queue count)."""
    if queue is not None:
        if not 0 <= queue < len(queues):
            raise errors.InvalidArgument(f"queue {queue} is out of range: topic {topic!r} "
                                         f"has write queues 0..{len(queues) - 1}")
        return queues[queue]
    if group:
        return queues[zlib.crc32(group.encode()) % len(queues)]
    return queues[own % len(queues)]


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task did: the driver's commit sums them."""

    rows: int = 0
    stored: int = 0
    duplicates: int = 0
    batches: int = 0


@dataclass
class _Pending:
    records: list[bytes] = field(default_factory=list)
    size: int = 0


class PartitionWriter:
    """One task's rows → batched sends per (topic, queue). Executor side only."""

    def __init__(self, opts: WriteOptions, write_id: str, batch_id: int, partition: int) -> None:
        self.opts = opts
        self.write_id = write_id
        self.batch_id = batch_id
        self.partition = partition
        self.producer_id = f"spark-{write_id}-{partition}"
        self.report = WriteReport()
        self._routes: dict[str, list[WriteQueue]] = {}
        self._pending: dict[tuple[str, WriteQueue], _Pending] = {}
        self._clients: dict[str, BrokerChannel] = {}

    def _queues(self, topic: str) -> list[WriteQueue]:
        queues = self._routes.get(topic)
        if queues is None:
            queues = self._routes[topic] = fetch_write_queues(self.opts.namesrv, topic,
                                                              self.opts.timeout)
        return queues

    def _target(self, topic: str, queue: int | None, group: str | None) -> WriteQueue:
        # the batch id turns a stream's queues over from one micro-batch to the next (a small
        # micro-batch is one partition), the same on every replay of the batch
        return choose_queue(self._queues(topic), topic, self.partition + self.batch_id, queue,
                            group)

    def write_batches(self, batches) -> WriteReport:
        for batch in batches:
            self.write_columns({name: batch.column(name).to_pylist()
                                for name in batch.schema.names if name in COLUMN_TYPES},
                               batch.num_rows)
        for key in list(self._pending):
            self._flush(key)
        return self.report

    def write_columns(self, columns: dict[str, list], rows: int) -> None:
        none = [None] * rows
        values = columns["value"]
        topics, keys, tags = (columns.get(n, none) for n in ("topic", "key", "tag"))
        props, queues, groups = (columns.get(n, none)
                                 for n in ("properties", "queue", "message_group"))
        extra = {record.PROP_PRODUCER_ID: self.producer_id} if self.opts.exactly_once else None
        for i in range(rows):
            topic = topics[i] or self.opts.topic
            if not topic:
                raise errors.InvalidArgument("a row has no topic (null topic column and no "
                                             "topic option)")
            value, key = values[i], keys[i]
            body = value.encode() if isinstance(value, str) else (value or b"")
            if isinstance(key, bytes):
                try:
                    key = key.decode()
                except UnicodeDecodeError:
                    raise errors.InvalidArgument(
                        f"row {self.report.rows} of partition {self.partition}: a binary key "
                        "must be UTF-8 (it becomes the KEYS property)") from None
            message = record.OutgoingMessage(
                topic, body, tags=tags[i] or "", keys=key.split() if key else (),
                properties=dict(props[i]) if props[i] else {},
                unique_id=row_unique_id(self.write_id, self.batch_id, self.partition,
                                        self.report.rows),
                message_group=groups[i] or "")
            raw, _ = record.encode_message(message, extra_properties=extra)
            self.report.rows += 1
            target = (topic, self._target(topic, queues[i], groups[i]))
            pending = self._pending.get(target)
            if pending is None:
                pending = self._pending[target] = _Pending()
            pending.records.append(raw)
            pending.size += len(raw)
            if len(pending.records) >= self.opts.batch_size or \
                    pending.size >= self.opts.batch_bytes:
                self._flush(target)

    def _flush(self, target: tuple[str, WriteQueue]) -> None:
        pending = self._pending.pop(target, None)
        if pending is None or not pending.records:
            return
        topic, queue = target
        client = self._clients.get(queue.addr)
        if client is None:
            client = self._clients[queue.addr] = BrokerChannel(queue.addr,
                                                               timeout=self.opts.timeout)
        request = broker_pb2.SendRequest(
            topic=topic, queue_id=queue.queue_id,
            record_count=len(pending.records), idempotent=self.opts.exactly_once,
            producer_id=self.producer_id if self.opts.exactly_once else "")
        # an idempotent send may be retried: the broker drops what it already stored
        reply = client.call("Send", request, bulk=b"".join(pending.records),
                            idempotent=self.opts.exactly_once)
        if reply.status != common_pb2.SEND_OK:
            raise errors.ServiceUnavailable(
                f"send to {queue.broker}/{queue.queue_id} of {topic!r} answered "
                f"{common_pb2.SendStatus.Name(reply.status)}")
        self.report.batches += 1
        self.report.duplicates += reply.duplicates
        self.report.stored += len(pending.records) - reply.duplicates


def _task_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class TideMQBatchWriter(DataSourceArrowWriter):
    """df.write: one write id per job (driver side), so a retried task replays its ids."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator) -> WriteReport:
        writer = PartitionWriter(self.opts, self.write_id, 0, _task_partition())
        return writer.write_batches(iterator)

    def commit(self, messages) -> None:
        return None


class TideMQStreamWriter(DataSourceStreamArrowWriter):
    """df.writeStream: ids from the query id (kept in the checkpoint across restarts) and the
    micro-batch id, both read from the task's local properties that Spark sets."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator) -> WriteReport:
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        if not query_id or batch_id is None:
            raise errors.Internal("the stream writer ran outside a streaming query's batch "
                                  f"(no {QUERY_ID_PROPERTY}/{BATCH_ID_PROPERTY})")
        writer = PartitionWriter(self.opts, query_id, int(batch_id), context.partitionId())
        return writer.write_batches(iterator)

    def commit(self, messages, batchId: int) -> None:
        return None

    def abort(self, messages, batchId: int) -> None:
        return None   # sent messages stay; a replay of the batch sends the same ids again
