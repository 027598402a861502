"""Broker Prometheus metrics; counted per batch, never per message, to keep the hot path cheap."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from tidemq.broker.store.disk import disk_usage
from tidemq.common.errors import TideMQError

MESSAGES_IN = Counter("tidemq_broker_messages_in_total", "Records appended, by topic", ["topic"])
BYTES_IN = Counter("tidemq_broker_bytes_in_total", "Record bytes appended")
PULL_REQUESTS = Counter("tidemq_broker_pull_requests_total", "Pull requests received")
PUT_LATENCY = Histogram(
    "tidemq_broker_put_latency_seconds", "Time to append one send batch (incl. sync flush)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
MESSAGES_OUT = Counter("tidemq_broker_messages_out_total",
                       "Records returned by pulls (counted per pull answer), by topic", ["topic"])
# What the console's "out" charts draw (GetBrokerInfo hands these to the gateway, summed per
# topic): every record a pull or pop answer hands to a consumer, whoever asked (SDK pull and
# push consumers, the HTTP gateway's fetch and pop, gateway-grpc's RocketMQ 5 clients).
MESSAGES_CONSUMED = Counter("tidemq_broker_messages_consumed_total",
                            "Records handed to consumers (counted per pull or pop answer), by "
                            "topic and how (pull, pop)", ["topic", "via"])
SEND_ERRORS = Counter("tidemq_broker_send_errors_total", "Send batches refused, by error code",
                      ["code"])
for _code in ("NO_PERMISSION", "NOT_MASTER", "NOT_ENOUGH_REPLICAS", "TOPIC_NOT_EXIST",
              "INVALID_ARGUMENT", "MESSAGE_TOO_LARGE", "SERVICE_UNAVAILABLE", "STORAGE_FULL"):
    SEND_ERRORS.labels(_code)  # zero-valued series exist, so error panels show 0, not "no data"
GROUP_REBALANCES = Counter(
    "tidemq_broker_group_rebalances_total",
    "Rebalances started by this broker's group coordinator, by reason: member_joined, "
    "leader_rejoined, metadata_changed, member_left, session_expired, sync_expired",
    ["reason"])
HELD_PULLS = Gauge("tidemq_broker_held_pulls", "Pulls currently held by long polling")
TRANSACTIONS = Counter(
    "tidemq_broker_transactions_total",
    "Transactional messages by event: prepared, committed, rolled_back, checked, discarded",
    ["event"])
OPEN_TRANSACTIONS = Gauge("tidemq_broker_open_transactions",
                          "Half messages neither committed, rolled back nor discarded")


def consumed_by_topic() -> dict[str, int]:
    """MESSAGES_CONSUMED summed per topic (pull + pop), since this process started."""
    totals: dict[str, int] = {}
    for family in MESSAGES_CONSUMED.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                topic = sample.labels["topic"]
                totals[topic] = totals.get(topic, 0) + int(sample.value)
    return totals


def counts_send_errors(send):
    """Count a refused send batch by its error code (the error path only)."""

    @functools.wraps(send)
    async def counted(*args, **kwargs):
        try:
            return await send(*args, **kwargs)
        except TideMQError as exc:
            SEND_ERRORS.labels(exc.code).inc()
            raise

    return counted


_MESSAGES_IN_BY_TOPIC: dict[str, Any] = {}  # labels() builds a key and takes a lock per call


def record_put(topic: str, record_count: int, size: int, seconds: float) -> None:
    counter = _MESSAGES_IN_BY_TOPIC.get(topic)
    if counter is None:
        counter = _MESSAGES_IN_BY_TOPIC[topic] = MESSAGES_IN.labels(topic)
    counter.inc(record_count)
    BYTES_IN.inc(size)
    PUT_LATENCY.observe(seconds)


class FlushCollector(Collector):
    """The store's fsync and group-commit counts, read at scrape time (no hot-path work):
    appends / rounds is how many sends one SYNC_FLUSH fsync acknowledged on average."""

    def __init__(self, flusher) -> None:
        self.flusher = flusher

    def collect(self):
        flusher = self.flusher
        yield CounterMetricFamily("tidemq_broker_commitlog_fsyncs", "CommitLog fdatasync calls",
                                  value=flusher.fsyncs)
        yield CounterMetricFamily("tidemq_broker_group_commit_rounds",
                                  "SYNC_FLUSH group-commit rounds (one write + one fsync each)",
                                  value=flusher.rounds)
        yield CounterMetricFamily("tidemq_broker_group_commit_appends",
                                  "Send batches acknowledged by group-commit fsyncs",
                                  value=flusher.round_requests)


def watch_flusher(flusher) -> None:
    REGISTRY.register(FlushCollector(flusher))


class CompactionCollector(Collector):
    """What the master's compactor did (store/compaction.py), read at scrape time."""

    def __init__(self, compactor) -> None:
        self.compactor = compactor

    def collect(self):
        yield CounterMetricFamily("tidemq_broker_compaction_read_bytes",
                                  "Bytes of records compaction passes read (header and "
                                  "properties of each; its I/O budget bounds the rate)",
                                  value=self.compactor.bytes_read)
        yield CounterMetricFamily("tidemq_broker_compaction_removed_records",
                                  "Records compaction removed (superseded ones and expired "
                                  "tombstones), as this replica decided them as master",
                                  value=self.compactor.records_removed)
        yield CounterMetricFamily("tidemq_broker_compaction_queue_passes",
                                  "Compaction passes over one queue (each reads the records "
                                  "that became eligible since, or expires tombstones)",
                                  value=self.compactor.queue_passes)
        relocator = self.compactor.relocator
        if relocator is not None:
            yield CounterMetricFamily("tidemq_broker_compaction_relocated_bytes",
                                      "Bytes of compacted queues' live records copied forward "
                                      "out of segments retention wanted gone",
                                      value=relocator.bytes_relocated)
            yield CounterMetricFamily("tidemq_broker_compaction_relocated_records",
                                      "Compacted queues' live records copied forward",
                                      value=relocator.records_relocated)
            yield CounterMetricFamily("tidemq_broker_compaction_relocated_segments",
                                      "CommitLog segments emptied of compacted records by "
                                      "copy-forward (retention then deletes them)",
                                      value=relocator.segments_relocated)


def watch_compaction(compactor) -> None:
    REGISTRY.register(CompactionCollector(compactor))


class ReplicationCollector(Collector):
    """Replication gauges read at scrape time: the replica's epoch always; while it is master
    (`server` set to its HAServer by the role layer) each slave's lag in bytes and the size
    of the in-sync set."""

    def __init__(self, store) -> None:
        self.store = store
        self.server = None   # the HAServer while this replica is master

    def collect(self):
        yield GaugeMetricFamily("tidemq_broker_epoch", "The replica group's master epoch as "
                                "this replica knows it", value=self.store.epochs.last_epoch)
        server = self.server
        lag = GaugeMetricFamily("tidemq_broker_replication_lag_bytes",
                                "CommitLog bytes a slave lacks behind this master", labels=["replica"])
        in_sync = GaugeMetricFamily("tidemq_broker_in_sync_replicas",
                                    "Replicas in the in-sync set, the master included", labels=[])
        if server is not None:  # a slave announces both families without samples
            for replica, lag_bytes in sorted(server.lag_bytes().items()):
                lag.add_metric([str(replica)], lag_bytes)
            in_sync.add_metric([], len(server.tracker.in_sync))
        yield lag
        yield in_sync


def watch_replication(store) -> ReplicationCollector:
    """Register the replication gauges; the role layer sets `.server` while master."""
    collector = ReplicationCollector(store)
    REGISTRY.register(collector)
    return collector


class ScheduleCollector(Collector):
    """The timer's figures, read at scrape time from the deliverer (nothing per message)."""

    def __init__(self, deliverer) -> None:
        self.deliverer = deliverer

    def collect(self):
        yield CounterMetricFamily("tidemq_broker_scheduled_delivered",
                                  "Scheduled messages the timer moved to their real topic",
                                  value=self.deliverer.delivered)
        yield GaugeMetricFamily("tidemq_broker_scheduled_waiting",
                                "Records in SCHEDULE_TOPIC_XXXX past the timer's cursors "
                                "(on the master)", value=self.deliverer.waiting())


def watch_schedule(deliverer) -> None:
    REGISTRY.register(ScheduleCollector(deliverer))


class ConsumerLagCollector(Collector):
    """Consumer lag per group and topic, computed at scrape time from the committed offsets and
    the queues' max offsets (nothing on the pull or commit path). Pop groups commit nothing:
    their lag is what the pop book has not handed out plus what it handed out and is not acked
    yet (`pop_progress`). Only the group's master reports it (`is_master`), so a replica
    group's lag is not counted once per replica."""

    def __init__(self, offsets, store, is_master: Callable[[], bool],
                 pop_progress: Callable[[], dict] = dict) -> None:
        self.offsets, self.store, self.is_master = offsets, store, is_master
        self.pop_progress = pop_progress

    def collect(self):
        lag = GaugeMetricFamily("tidemq_broker_consumer_lag_messages",
                                "Messages stored but not yet consumed by the group (committed, "
                                "or acked for pop consumers), summed over the topic's queues on "
                                "this broker", labels=["group", "topic"])
        if self.is_master():
            per_queue: dict[tuple[str, str, int], int] = {}
            for group, entries in self.offsets.snapshot().items():
                for topic, queue_id, offset in entries:
                    behind = max(0, self.store.max_offset(topic, queue_id) - offset)
                    per_queue[(group, topic, queue_id)] = behind
            for (group, topic, queue_id), (cursor, unacked) in self.pop_progress().items():
                behind = max(0, self.store.max_offset(topic, queue_id) - cursor) + unacked
                per_queue[(group, topic, queue_id)] = behind
            totals: dict[tuple[str, str], int] = {}
            for (group, topic, _), behind in per_queue.items():
                totals[(group, topic)] = totals.get((group, topic), 0) + behind
            for (group, topic), behind in sorted(totals.items()):
                lag.add_metric([group, topic], behind)
        yield lag


class DiskCollector(Collector):
    """How full the file system holding the store is, read at scrape time (alert: disk use),
    and the store's disk state as its guard last saw it (store/disk.py): 0 OK, 1 WARN (at
    `disk_warn_ratio`), 2 FULL (sends refused with STORAGE_FULL)."""

    def __init__(self, data_dir: Path, guard=None) -> None:
        self.data_dir = data_dir
        self.guard = guard

    def collect(self):
        usage = disk_usage(self.data_dir)
        yield GaugeMetricFamily("tidemq_broker_disk_used_ratio",
                                "Used fraction of the file system holding the broker's data "
                                "(used / (used + free to the broker))",
                                value=usage.used_ratio)
        yield GaugeMetricFamily("tidemq_broker_disk_free_bytes",
                                "Free bytes on the file system holding the broker's data",
                                value=usage.free_bytes)
        guard = self.guard
        if guard is not None:
            yield GaugeMetricFamily("tidemq_broker_disk_state",
                                    "The store's disk state: 0 OK, 1 WARN (disk_warn_ratio "
                                    "reached), 2 FULL (sends refused with STORAGE_FULL)",
                                    value=int(guard.state))
            for name, ratio in (("warn", guard.config.disk_warn_ratio),
                                ("full", guard.config.disk_full_ratio)):
                yield GaugeMetricFamily(f"tidemq_broker_disk_{name}_ratio",
                                        f"The configured disk_{name}_ratio", value=ratio)


class PopStateCollector(Collector):
    """The pop book's size, read at scrape time (what `make soak` watches stay flat): handles in
    flight, expired handles still remembered (an ack of one answers EXPIRED), and revive-log
    records past the latest snapshot (what a restart replays)."""

    def __init__(self, stats: Callable[[], dict]) -> None:
        self.stats = stats

    def collect(self):
        stats = self.stats()
        handles = GaugeMetricFamily("tidemq_broker_pop_handles", "Pop receipt handles the "
                                    "broker's pop state holds, by state", labels=["state"])
        for state in ("in_flight", "expired"):
            handles.add_metric([state], stats[state])
        yield handles
        yield GaugeMetricFamily("tidemq_broker_pop_revive_tail_records",
                                "Revive-log records after the latest pop snapshot (replayed "
                                "at start)", value=stats["revive_tail"])


def watch_pop(stats: Callable[[], dict]) -> None:
    REGISTRY.register(PopStateCollector(stats))


def watch_consumers(offsets, store, is_master: Callable[[], bool], data_dir: Path,
                    pop_progress: Callable[[], dict] = dict) -> None:
    REGISTRY.register(ConsumerLagCollector(offsets, store, is_master, pop_progress))
    REGISTRY.register(DiskCollector(data_dir, getattr(store, "disk", None)))
