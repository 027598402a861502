"""Prometheus metrics of the collector (default registry: served on /metrics of both ports)."""

from __future__ import annotations

from prometheus_client import Counter

SPANS_RECEIVED = Counter(
    "tidemq_tracecollector_spans_received_total", "Spans accepted from OTLP Export calls"
)
SPANS_REJECTED = Counter(
    "tidemq_tracecollector_spans_rejected_total", "Spans refused as malformed (bad ids)"
)
SPANS_DROPPED = Counter(
    "tidemq_tracecollector_spans_dropped_total",
    "Spans refused because the write queue was full (the exporter retries them)",
)
SPANS_STORED = Counter(
    "tidemq_tracecollector_spans_stored_total", "Spans committed to SQLite (duplicates excluded)"
)
