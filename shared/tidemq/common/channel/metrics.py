"""The channel's one metric: calls by method and by the transport that carried them, in every
process that calls brokers (SDK users, both gateways, the Spark source and sink). Under
gunicorn (PROMETHEUS_MULTIPROC_DIR set) each worker writes its own samples and the gateway's
/metrics sums them."""

from __future__ import annotations

from prometheus_client import Counter

CALLS = Counter("tidemq_rpc_calls_total",
                "broker calls made by this process, by method and transport (wire | grpc)",
                ["method", "transport"])
WIRE, GRPC = "wire", "grpc"

_children: dict[tuple[str, str], object] = {}  # labels() takes a lock and builds a tuple


def counted(method: str, transport: str) -> None:
    child = _children.get((method, transport))
    if child is None:
        child = _children[method, transport] = CALLS.labels(method, transport)
    child.inc()
