"""Broker Prometheus metrics; counted per batch, never per message, to keep the hot path cheap."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
