"""The channel's metrics: calls by method and by the transport that carried them, in every
process that calls brokers (SDK users, both gateways, the Spark source and sink). Under
gunicorn (PROMETHEUS_MULTIPROC_DIR set) each worker writes its own samples and the gateway's
/metrics sums them. And the time spent waiting out brokers' throttle times (quotas)."""

from __future__ import annotations

from prometheus_client import Counter

CALLS = Counter("tidemq_rpc_calls_total",
                "broker calls made by this process, by method and transport (wire | grpc)",
                ["method", "transport"])
WIRE, GRPC = "wire", "grpc"
THROTTLE_WAIT = Counter("tidemq_rpc_quota_throttle_wait_seconds",
                        "time this process waited before a Send, Pull or Pop because the "
                        "broker answered a throttle time (client quotas, docs/quotas.md)")

_children: dict[tuple[str, str], object] = {}  # labels() takes a lock and builds a tuple


def counted(method: str, transport: str) -> None:
    child = _children.get((method, transport))
    if child is None:
        child = _children[method, transport] = CALLS.labels(method, transport)
    child.inc()


def throttled(seconds: float) -> None:
    THROTTLE_WAIT.inc(seconds)


def transport_totals(exposition: str) -> dict[str, float]:
    """Calls by transport in a /metrics page (Prometheus text), every method summed."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name != "tidemq_rpc_calls":
            continue
        for sample in family.samples:
            if sample.name == "tidemq_rpc_calls_total":
                transport = sample.labels.get("transport", "")
                totals[transport] = totals.get(transport, 0.0) + sample.value
    return totals


def wire_share_line(metrics_urls: dict[str, str], timeout_s: float = 1.0) -> str:
    """One line for `make status`: the share of broker calls the wire carried, summed over
    the processes whose /metrics pages are `metrics_urls` (by name); those not answering are
    named."""
    import urllib.request

    totals: dict[str, float] = {}
    silent = []
    for name, url in metrics_urls.items():
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as reply:  # noqa: S310 - ours
                page = reply.read().decode()
        except OSError:
            silent.append(name)
            continue
        for transport, count in transport_totals(page).items():
            totals[transport] = totals.get(transport, 0.0) + count
    total = sum(totals.values())
    share = (f"{totals.get(WIRE, 0) / total:.0%} over the wire protocol "
             f"({totals.get(WIRE, 0):,.0f} wire, {totals.get(GRPC, 0):,.0f} gRPC)"
             if total else "none made yet")
    return f"Broker calls from {', '.join(sorted(metrics_urls))}: {share}" + (
        f"; no metrics from {', '.join(silent)}" if silent else "")
