"""Structured Streaming for format("tidemq"): micro-batches of per-queue offset ranges.

Spark keeps the offsets in its checkpoint (offset log) as {"broker": {"queue id": offset}}
(by topic first with subscribe / subscribePattern), exactly like the Kafka source keeps
topic-partition offsets: a restarted query resumes where its last committed batch ended, and
the broker never stores anything for it. Each trigger asks the routes and the brokers' queue
max offsets (`latestOffset`; a pattern is matched again, so new topics join from offset 0); a
batch's partitions pull [previous end, new end) of every queue that grew, with the batch
reads' partition reader (`reading`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from tidemq.analytics import brokers, offsets
from tidemq.analytics.reading import (
    PackedPartition,
    QueueRangePartition,
    ReadOptions,
    read_partition,
    starting_spec,
    survey,
    to_partitions,
)
from tidemq.common.errors import InvalidArgument


class TideMQStreamReader(DataSourceStreamReader):
    """Stateless across restarts: everything it needs is in the offsets Spark hands back."""

    def __init__(self, opts: ReadOptions, projected: str = "") -> None:
        if opts.ending is not None:
            raise InvalidArgument("endingOffsets is for batch reads; a stream has no end")
        self.opts, self.projected = opts, projected
        self._addrs: dict[str, tuple[str, ...]] = {}

    def _bounds(self) -> dict[offsets.QueueKey, offsets.QueueBounds]:
        return self._survey().bounds

    def _survey(self):
        found = survey(self.opts)
        self._addrs = found.addrs
        return found

    def _to_json(self, positions: dict[offsets.QueueKey, int]) -> dict:
        return offsets.to_stream_offsets(positions, self.opts.single_topic)

    def _from_json(self, stored: dict) -> dict[offsets.QueueKey, int]:
        return offsets.from_stream_offsets(stored, self.opts.single_topic)

    def initialOffset(self) -> dict:
        """startingOffsets resolved now (default "latest": only messages sent from now on)."""
        found = self._survey()
        ranges = offsets.plan_ranges(
            found.bounds,
            starting_spec(self.opts, found, offsets.LATEST),
            offsets.OffsetSpec(offsets.LATEST, {}),
            fail_on_data_loss=self.opts.fail_on_data_loss,
        )
        positions = {key: bound.max_offset for key, bound in found.bounds.items()}
        positions.update({offsets.QueueKey(r.topic, r.broker, r.queue_id): r.start
                          for r in ranges})
        return self._to_json(positions)

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        bounds = self._bounds()
        latest = {key: bound.max_offset for key, bound in bounds.items()}
        begin = self._from_json(start if start is not None else self.initialOffset())
        new = {key: bound.min_offset for key, bound in bounds.items() if key not in begin}
        max_rows = getattr(limit, "max_rows", None)
        return self._to_json(offsets.cap_positions({**new, **begin}, latest, max_rows))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stops = self._from_json(start), self._from_json(end)
        if any(key not in begin for key in stops):
            # a queue that appeared since `start` (a topic created, a broker group added) is
            # read from its first stored offset, as Kafka reads a new partition from earliest
            floors = {key: bound.min_offset for key, bound in self._bounds().items()}
            begin.update({key: floors.get(key, 0) for key in stops if key not in begin})
        ranges = [
            offsets.OffsetRange(key.topic, key.broker, key.queue_id, begin[key], stop)
            for key, stop in sorted(stops.items()) if stop > begin[key]
        ]
        if any(r.broker not in self._addrs for r in ranges):
            self._bounds()  # a broker group appeared since the last trigger: refresh addresses
        # Nothing to read (a query's first micro-batch from "latest"): still one task, which
        # reads nothing, so that first batch starts the Python workers of the read and the
        # write; the first batch with messages then finds them running instead of waiting
        # seconds for their interpreters and imports (docs/analytics.md, Performance).
        return to_partitions(ranges, self._addrs, self.opts) or [InputPartition(None)]

    def read(self, partition: InputPartition):
        if not isinstance(partition, QueueRangePartition | PackedPartition):
            return iter(())
        return read_partition(self.opts, partition, self.projected)

    def commit(self, end: dict) -> None:
        """Progress lives in Spark's checkpoint. With `progressGroup` the finished batch's end
        offsets are also committed to that consumer group, only so that its lag
        (`tidemq group describe`) shows how far behind the query is: advisory, never read
        back, and a broker that cannot take them does not stop the query."""
        if self.opts.progress_group:
            commit_progress(self.opts, self._addrs, self._from_json(end))


def commit_progress(opts: ReadOptions, addrs: dict[str, tuple[str, ...]],
                    positions: dict[offsets.QueueKey, int]) -> list[str]:
    """CommitOffsets per broker group; the groups that could not take them."""
    from tidemq.common.errors import TideMQError
    from tidemq.v1 import broker_pb2

    by_broker: dict[str, list] = {}
    for key, offset in sorted(positions.items()):
        by_broker.setdefault(key.broker, []).append(
            broker_pb2.QueueOffset(topic=key.topic, queue_id=key.queue_id, offset=offset))
    failed = []
    for broker, entries in by_broker.items():
        if broker not in addrs:
            failed.append(broker)
            continue
        try:
            brokers.call_any(addrs[broker], "CommitOffsets", broker_pb2.CommitOffsetsRequest(
                consumer_group=opts.progress_group, offsets=entries, generation_id=-1),
                opts.timeout)
        except TideMQError:
            failed.append(broker)
    return failed
