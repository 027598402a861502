"""Prometheus metrics for the gateway, correct under several gunicorn workers.

With PROMETHEUS_MULTIPROC_DIR set (the gunicorn launcher sets it before any worker starts),
each worker writes its samples to files there and /metrics aggregates all workers, so a
scrape sees the whole gateway whichever worker answers. Without it (Flask test client, a
single process) the default registry is used.
"""

from __future__ import annotations

import os

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess

REQUESTS = Counter("tidemq_gateway_http_requests_total", "HTTP requests answered",
                   ["method", "endpoint", "status"])
LATENCY = Histogram("tidemq_gateway_http_request_duration_seconds", "HTTP request latency",
                    ["method", "endpoint"])
MESSAGES_SENT = Counter("tidemq_gateway_http_messages_sent_total", "messages stored via the gateway")
MESSAGES_FETCHED = Counter("tidemq_gateway_http_messages_fetched_total",
                           "messages returned by the fetch endpoint")


def exposition() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = prometheus_client.REGISTRY
    return prometheus_client.generate_latest(registry), prometheus_client.CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
