"""Offset ranges: which slice of every queue a batch read covers, and how it is split.

Pure planning logic, no Spark and no gRPC, so it is tested on its own. It mirrors Spark's
Kafka source: a start and an end position per queue, each given as "earliest", "latest" or
a JSON object of exact offsets; a read covers [start, end) of every readable queue.

JSON offsets name queues by broker and queue id, e.g. ``{"broker-a": {"0": 12, "1": -2}}``,
where -2 means earliest and -1 latest (Kafka's convention); a read of several topics
(`subscribe`, `subscribePattern`) adds the topic as the outer level, like Kafka's JSON:
``{"orders": {"broker-a": {"0": 12}}}``. Queues the JSON leaves out take the default:
earliest for the start, latest for the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument, PreconditionFailed

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """A queue: (topic, broker group name, queue id)."""

    topic: str
    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id}"


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """What the broker holds for a queue: offsets [min_offset, max_offset) are readable."""

    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets [start, end) of one queue; the unit a Spark partition reads."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed startingOffsets/endingOffsets option: a default plus per-queue overrides."""

    default: int  # EARLIEST or LATEST
    exact: Mapping[QueueKey, int]

    def for_queue(self, key: QueueKey) -> int:
        return self.exact.get(key, self.default)


def parse_offsets(option: str, text: str | None, default: int, topic: str | None) -> OffsetSpec:
    """Parse "earliest" | "latest" | JSON offsets; None = default. With `topic` (a read of one
    topic) the JSON is {"broker": {"queue_id": offset}}, else {"topic": {"broker": {...}}}."""
    if text is None or not text.strip():
        return OffsetSpec(default, {})
    value = text.strip()
    if value.lower() == "earliest":
        return OffsetSpec(EARLIEST, {})
    if value.lower() == "latest":
        return OffsetSpec(LATEST, {})
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{option} must be 'earliest', 'latest' or a JSON object such as "
            f'{{"broker-a": {{"0": 12}}}}; {value!r} is not valid JSON ({exc.msg} at '
            f"character {exc.pos})"
        ) from None
    if topic is not None:
        return OffsetSpec(default, _broker_offsets(option, topic, parsed))
    if not isinstance(parsed, dict):
        raise InvalidArgument(
            f"{option} JSON must be an object mapping topics to {{broker: {{queue id: offset}}}} "
            f"(several topics are read), not a {type(parsed).__name__}"
        )
    exact: dict[QueueKey, int] = {}
    for name, by_broker in parsed.items():
        exact.update(_broker_offsets(f"{option} of topic {name!r}", name, by_broker))
    return OffsetSpec(default, exact)


def _broker_offsets(option: str, topic: str, parsed: object) -> dict[QueueKey, int]:
    """{"broker": {"queue id": offset}} of one topic."""
    if not isinstance(parsed, dict):
        raise InvalidArgument(
            f"{option} JSON must be an object mapping broker names to {{queue id: offset}}, "
            f"not a {type(parsed).__name__}"
        )
    exact: dict[QueueKey, int] = {}
    for broker, queues in parsed.items():
        if not isinstance(queues, dict):
            raise InvalidArgument(
                f"{option}: broker {broker!r} must map to an object of {{queue id: offset}}, "
                f"not a {type(queues).__name__}"
            )
        for queue, offset in queues.items():
            try:
                queue_id = int(queue)
            except ValueError:
                raise InvalidArgument(
                    f"{option}: queue id {queue!r} of broker {broker!r} is not an integer"
                ) from None
            if queue_id < 0:
                raise InvalidArgument(f"{option}: queue id {queue_id} of broker {broker!r} < 0")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise InvalidArgument(
                    f"{option}: offset {offset!r} for broker {broker!r} queue {queue_id} must be "
                    f"an integer >= 0, or -2 (earliest) or -1 (latest)"
                )
            exact[QueueKey(topic, broker, queue_id)] = offset
    return exact


def resolve(offset: int, bounds: QueueBounds) -> int:
    if offset == EARLIEST:
        return bounds.min_offset
    if offset == LATEST:
        return bounds.max_offset
    return offset


def plan_ranges(
    queues: Mapping[QueueKey, QueueBounds],
    starting: OffsetSpec,
    ending: OffsetSpec,
    *,
    fail_on_data_loss: bool = True,
) -> list[OffsetRange]:
    """Resolve start/end for every queue; empty ranges are dropped. Raises on impossible specs.

    A start below the queue's min offset means those messages are gone (retention): an error
    when `fail_on_data_loss`, else the range starts at the min offset (Kafka's semantics).
    """
    for spec, option in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        unknown = sorted(set(spec.exact) - set(queues))
        if unknown:
            names = ", ".join(map(str, unknown))
            known = ", ".join(map(str, sorted(queues))) or "none"
            raise InvalidArgument(
                f"{option} names queues the read does not have: {names} (queues: {known})"
            )
    ranges = []
    for key in sorted(queues):
        bounds = queues[key]
        start = resolve(starting.for_queue(key), bounds)
        end = resolve(ending.for_queue(key), bounds)
        where = f"topic {key.topic!r} broker {key.broker!r} queue {key.queue_id}"
        if end > bounds.max_offset:
            raise InvalidArgument(
                f"endingOffsets for {where} is {end}, past the queue's end "
                f"{bounds.max_offset} (the next offset to be written)"
            )
        if start > end:
            raise InvalidArgument(
                f"startingOffsets for {where} is {start}, after its ending offset {end}"
            )
        if start < bounds.min_offset:
            if fail_on_data_loss:
                raise PreconditionFailed(
                    f"startingOffsets for {where} is {start} but offsets below "
                    f"{bounds.min_offset} were deleted; set failOnDataLoss=false to read "
                    f"from {bounds.min_offset}",
                    code="OFFSET_OUT_OF_RANGE",
                )
            start = min(bounds.min_offset, end)
        if end > start:
            ranges.append(OffsetRange(key.topic, key.broker, key.queue_id, start, end))
    return ranges


def split_ranges(ranges: Iterable[OffsetRange], max_per_partition: int) -> list[OffsetRange]:
    """Cut ranges into pieces of at most `max_per_partition` offsets (0 = never cut).

    Pieces of one range are near-equal in size, so a big queue becomes evenly sized tasks.
    """
    if max_per_partition < 0:
        raise InvalidArgument(
            f"maxRecordsPerPartition must be >= 0 (0 = never cut a queue range), "
            f"not {max_per_partition}"
        )
    pieces: list[OffsetRange] = []
    for rng in ranges:
        if max_per_partition == 0 or rng.size <= max_per_partition:
            pieces.append(rng)
            continue
        count = -(-rng.size // max_per_partition)
        for i in range(count):
            lo = rng.start + rng.size * i // count
            hi = rng.start + rng.size * (i + 1) // count
            pieces.append(OffsetRange(rng.topic, rng.broker, rng.queue_id, lo, hi))
    return pieces


def ensure_min_partitions(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    """Kafka's minPartitions: with fewer ranges than asked, cut each range into a share of
    the pieces proportional to its size (near-equal pieces, none over ceil(total / min)
    offsets), so there are at least min(min_partitions, total offsets) of them."""
    if min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    pieces: list[OffsetRange] = []
    for rng in ranges:
        count = max(1, min(rng.size, -(-rng.size * min_partitions // total)))
        for i in range(count):
            lo = rng.start + rng.size * i // count
            hi = rng.start + rng.size * (i + 1) // count
            pieces.append(OffsetRange(rng.topic, rng.broker, rng.queue_id, lo, hi))
    return pieces


def pack_ranges(ranges: list[OffsetRange], target: int) -> list[tuple[OffsetRange, ...]]:
    """Share ranges out over ceil(total offsets / target) partitions (never more than there
    are ranges; 0 = one partition per range), whole ranges only, largest first onto the
    lightest partition — how Spark's file sources pack small files into one task
    (spark.sql.files.openCostInBytes), since each task costs far more than a small range.
    Each partition lists its ranges in (topic, broker, queue, start) order."""
    if target < 0:
        raise InvalidArgument(f"targetRecordsPerPartition must be >= 0 (0 = one partition "
                              f"per queue range), not {target}")
    total = sum(r.size for r in ranges)
    count = len(ranges) if target == 0 else max(1, min(len(ranges), -(-total // target)))
    if count >= len(ranges):
        return [(r,) for r in ranges]
    bins: list[list[OffsetRange]] = [[] for _ in range(count)]
    loads = [0] * count
    for rng in sorted(ranges, key=lambda r: (-r.size, _place(r))):
        lightest = loads.index(min(loads))
        bins[lightest].append(rng)
        loads[lightest] += rng.size
    return sorted((tuple(sorted(b, key=_place)) for b in bins), key=lambda b: _place(b[0]))


def _place(rng: OffsetRange) -> tuple:
    return rng.topic, rng.broker, rng.queue_id, rng.start


@dataclass(frozen=True)
class TimestampSpec:
    """startingOffsetsByTimestamp: a timestamp (ms) for every queue and/or per queue."""

    default: int | None
    exact: Mapping[QueueKey, int]

    def for_queue(self, key: QueueKey) -> int | None:
        return self.exact.get(key, self.default)


def parse_timestamps(text: str | None, topic: str | None) -> TimestampSpec | None:
    """None | "1767225600000" (every queue) | JSON {"broker": {"queue id": ms}} (by topic
    first when several topics are read, as in `parse_offsets`)."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    if value.isdigit():
        return TimestampSpec(int(value), {})
    spec = parse_offsets("startingOffsetsByTimestamp", value, EARLIEST, topic)
    if any(ts < 0 for ts in spec.exact.values()):
        raise InvalidArgument("startingOffsetsByTimestamp: timestamps are epoch milliseconds "
                              ">= 0")
    return TimestampSpec(None, dict(spec.exact))


# --- streaming: offsets as Spark checkpoints them -------------------------------------------

# {"broker": {"queue id": next offset to read}}; by topic first when several topics are read
StreamOffsets = dict[str, dict]


def to_stream_offsets(positions: Mapping[QueueKey, int], topic: str | None) -> StreamOffsets:
    """Queue positions -> the JSON-ready dict Spark stores in its offset log (`topic`: the
    one topic read, so the topic level is left out)."""
    out: StreamOffsets = {}
    for key in sorted(positions):
        by_broker = out if topic is not None else out.setdefault(key.topic, {})
        by_broker.setdefault(key.broker, {})[str(key.queue_id)] = positions[key]
    return out


def from_stream_offsets(offsets: Mapping[str, Mapping], topic: str | None) -> dict[QueueKey, int]:
    by_topic = {topic: offsets} if topic is not None else offsets
    return {QueueKey(name, broker, int(queue)): int(offset)
            for name, by_broker in by_topic.items()
            for broker, queues in by_broker.items() for queue, offset in queues.items()}


def cap_positions(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int],
                  max_rows: int | None) -> dict[QueueKey, int]:
    """End positions of the next micro-batch: `latest`, or at most `max_rows` messages past
    `start` shared out in proportion to each queue's backlog (Kafka's maxOffsetsPerTrigger).

    Queues absent from `start` are new and start at 0; a queue never moves backwards.
    """
    begin = {key: start.get(key, 0) for key in latest}
    backlog = {key: max(latest[key] - begin[key], 0) for key in latest}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        ends = {key: begin[key] + backlog[key] for key in latest}
    else:
        shares = {key: max_rows * backlog[key] // total for key in latest}
        spare = max_rows - sum(shares.values())
        for key in sorted(latest, key=lambda k: (shares[k] - max_rows * backlog[k] / total, k)):
            if spare <= 0:
                break
            if shares[key] < backlog[key]:
                shares[key] += 1
                spare -= 1
        ends = {key: begin[key] + shares[key] for key in latest}
    for key, offset in start.items():  # queues gone from the route keep their position
        ends.setdefault(key, offset)
    return ends
