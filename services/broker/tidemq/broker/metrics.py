"""Broker Prometheus metrics; counted per batch, never per message, to keep the hot path cheap."""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

MESSAGES_IN = Counter("tidemq_broker_messages_in_total", "Records appended, by topic", ["topic"])
BYTES_IN = Counter("tidemq_broker_bytes_in_total", "Record bytes appended")
PULL_REQUESTS = Counter("tidemq_broker_pull_requests_total", "Pull requests received")
PUT_LATENCY = Histogram(
    "tidemq_broker_put_latency_seconds", "Time to append one send batch (incl. sync flush)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
HELD_PULLS = Gauge("tidemq_broker_held_pulls", "Pulls currently held by long polling")


def record_put(topic: str, record_count: int, size: int, seconds: float) -> None:
    MESSAGES_IN.labels(topic).inc(record_count)
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
                                  "Send batches acknowledged by group-commit rounds",
                                  value=flusher.round_requests)


def watch_flusher(flusher) -> None:
    REGISTRY.register(FlushCollector(flusher))
