"""The channel's calls-by-transport metric as `make status` reads it from /metrics pages."""

from __future__ import annotations

import prometheus_client
from tidemq.common.channel import metrics


def page(wire: int, grpc: int) -> str:
    registry = prometheus_client.CollectorRegistry()
    counter = prometheus_client.Counter("tidemq_rpc_calls_total", "calls",
                                        ["method", "transport"], registry=registry)
    counter.labels("Pop", "wire").inc(wire)
    counter.labels("Ack", "wire").inc(wire)
    counter.labels("JoinGroup", "grpc").inc(grpc)
    return prometheus_client.generate_latest(registry).decode()


def test_calls_are_summed_by_transport():
    assert metrics.transport_totals(page(3, 4)) == {"wire": 6.0, "grpc": 4.0}
    assert metrics.transport_totals("# nothing here\n") == {}


def test_the_status_line_gives_the_wire_share_and_names_silent_processes(monkeypatch):
    pages = {"http://a/metrics": page(45, 10)}

    class Reply:
        def __init__(self, url):
            if url not in pages:
                raise OSError("refused")
            self.text = pages[url].encode()

        def __enter__(self):
            return self

        def __exit__(self, *_):
            return False

        def read(self):
            return self.text

    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: Reply(url))
    line = metrics.wire_share_line({"gateway-http": "http://a/metrics",
                                    "gateway-grpc": "http://b/metrics"})
    assert line == ("Broker calls from gateway-grpc, gateway-http: 90% over the wire protocol "
                    "(90 wire, 10 gRPC); no metrics from gateway-grpc")
    assert metrics.wire_share_line({}).endswith("none made yet")


def test_a_call_is_counted_under_its_method_and_transport():
    before = prometheus_client.REGISTRY.get_sample_value(
        "tidemq_rpc_calls_total", {"method": "Heartbeat", "transport": "grpc"}) or 0
    metrics.counted("Heartbeat", metrics.GRPC)
    metrics.counted("Heartbeat", metrics.GRPC)
    assert prometheus_client.REGISTRY.get_sample_value(
        "tidemq_rpc_calls_total", {"method": "Heartbeat", "transport": "grpc"}) == before + 2
