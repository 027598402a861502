"""Trace collector settings (every field is a documented flag / TIDEMQ_* variable)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting

OTLP_GRPC_PORT = 4317  # the OTLP/gRPC port every exporter defaults to
DASHBOARD_PORT = 16686  # Jaeger's query port, so muscle memory works


@dataclass
class TraceCollectorSettings(ServiceSettings):
    """OTLP/gRPC span receiver with a JSON query API and a tracing dashboard."""

    port: int = setting(OTLP_GRPC_PORT, "OTLP/gRPC receiver port (0 = pick a free port)")
    data_dir: str = setting("./.data/trace-collector", "directory holding spans.sqlite3")
    http_port: int = setting(
        DASHBOARD_PORT, "HTTP port of the query API and dashboard (0 = pick a free port)"
    )
    retention_spans: int = setting(
        1_000_000, "keep at most this many spans, oldest dropped first (0 = no count bound)"
    )
    retention_hours: float = setting(
        72.0, "drop spans received more than this many hours ago (0 = no age bound)"
    )
    retention_mb: float = setting(
        1024.0, "keep the database's pages in use under this many MiB, oldest spans dropped "
        "first (0 = no size bound)"
    )
    config_center: str = setting(
        "", "config-center host:port to follow retention_spans / retention_hours / retention_mb live from "
        "('' = off: the collector needs no other service)")
    cluster_name: str = setting("DefaultCluster", "config-center cluster scope of those settings")
    config_group: str = setting("trace-collector",
                                "config-center group scope (overrides cluster)")
    max_queued_spans: int = setting(
        200_000, "spans waiting for the disk before Export calls are refused (back-pressure)"
    )
