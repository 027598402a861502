"""The collector as a real process: real OTel SDK exporters send spans over OTLP/gRPC, the
trace is read back through the HTTP API and the dashboard pages."""

from __future__ import annotations

import grpc
import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support.processes import free_port, wait_until

COLLECTOR = "tidemq.tracecollector"


@pytest.fixture
def collector(services):
    port = free_port()
    # Its own OTLP endpoint points at itself: it must still not trace itself (no loop).
    process = services(COLLECTOR, ["--port", str(port), "--http-port", "0",
                                   "--otlp-endpoint", f"127.0.0.1:{port}"])
    process.http = f"http://127.0.0.1:{process.info['http_port']}"
    return process


def _provider(service_name: str, collector_addr: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=collector_addr, insecure=True, timeout=5))
    )
    return provider


def _export_cross_service_trace(collector_addr: str) -> tuple[str, str, set[str]]:
    """gateway root span → two broker child spans; returns (trace id, root id, child ids)."""
    gateway = _provider("it-gateway", collector_addr)
    broker = _provider("it-broker", collector_addr)
    try:
        with gateway.get_tracer("it").start_as_current_span(
            "POST /topics/orders/messages", kind=trace.SpanKind.SERVER
        ) as root:
            context = trace.set_span_in_context(root)
            children = set()
            for name in ("SendMessage", "CommitLog.append"):
                with broker.get_tracer("it").start_as_current_span(
                    name, context=context, attributes={"messaging.destination": "orders"}
                ) as child:
                    children.add(format(child.get_span_context().span_id, "016x"))
        assert broker.force_flush(10_000) and gateway.force_flush(10_000)
    finally:
        broker.shutdown()
        gateway.shutdown()
    root_context = root.get_span_context()
    return (format(root_context.trace_id, "032x"), format(root_context.span_id, "016x"),
            children)


def _get_json(url: str, **params):
    response = requests.get(url, params=params, timeout=5)
    response.raise_for_status()
    return response.json()


def _trace_with_spans(http: str, trace_id: str, count: int):
    listing = _get_json(f"{http}/api/traces", service="it-broker", limit=50)["traces"]
    summary = next((t for t in listing if t["trace_id"] == trace_id), None)
    return summary if summary and summary["span_count"] == count else None


def test_sdk_spans_from_two_services_become_one_trace(collector):
    trace_id, root_id, child_ids = _export_cross_service_trace(collector.addr)
    summary = wait_until(lambda: _trace_with_spans(collector.http, trace_id, 3), timeout=30,
                         message="the exported trace to be queryable")
    assert summary["root_name"] == "POST /topics/orders/messages"
    assert summary["root_service"] == "it-gateway"
    assert summary["services"] == ["it-broker", "it-gateway"]

    spans = _get_json(f"{collector.http}/api/traces/{trace_id}")["spans"]
    by_id = {span["span_id"]: span for span in spans}
    assert set(by_id) == {root_id, *child_ids}
    assert by_id[root_id]["parent_span_id"] is None
    assert by_id[root_id]["kind"] == "SERVER"
    for child_id in child_ids:
        assert by_id[child_id]["parent_span_id"] == root_id
        assert by_id[child_id]["service"] == "it-broker"
        assert by_id[child_id]["attributes"] == {"messaging.destination": "orders"}

    # Nothing but the two exporting services: the collector did not trace its own Export calls.
    assert _get_json(f"{collector.http}/api/services") == {"services": ["it-broker", "it-gateway"]}
    metrics = requests.get(f"{collector.http}/metrics", timeout=5).text
    received = next(line for line in metrics.splitlines()
                    if line.startswith("tidemq_tracecollector_spans_received_total "))
    assert float(received.split()[1]) == 3.0
    assert requests.get(f"{collector.http}/healthz", timeout=5).json() == {"status": "ok"}
    assert collector.stop() == 0


def test_dashboard_pages_show_the_trace_and_its_spans(collector):
    trace_id, root_id, child_ids = _export_cross_service_trace(collector.addr)
    wait_until(lambda: _trace_with_spans(collector.http, trace_id, 3), timeout=30,
               message="the exported trace to be queryable")
    index = requests.get(f"{collector.http}/", timeout=5)
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert trace_id in index.text and "POST /topics/orders/messages" in index.text
    page = requests.get(f"{collector.http}/trace/{trace_id}", timeout=5)
    assert page.status_code == 200
    for span_id in (root_id, *child_ids):
        assert f'data-span-id="{span_id}"' in page.text
    assert "SendMessage" in page.text and "CommitLog.append" in page.text
    assert "it-gateway" in page.text and "it-broker" in page.text
    css = requests.get(f"{collector.http}/static/dashboard.css", timeout=5)
    assert css.status_code == 200 and ".wf-bar" in css.text


def test_malformed_spans_are_reported_as_partial_success(collector):
    good = trace_pb2.Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="ok")
    bad = trace_pb2.Span(trace_id=b"\x01\x02", span_id=bytes(range(1, 9)), name="bad")
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=[good, bad])])
    ])
    with grpc.insecure_channel(collector.addr) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        response = stub.Export(request, timeout=5)
    assert response.partial_success.rejected_spans == 1
    assert "'bad'" in response.partial_success.error_message
    trace_id = bytes(range(1, 17)).hex()
    found = wait_until(
        lambda: requests.get(f"{collector.http}/api/traces/{trace_id}", timeout=5),
        timeout=30, message="the well-formed span to be stored",
    )
    [span] = found.json()["spans"]
    assert (span["name"], span["service"]) == ("ok", "unknown_service")


def test_spans_accepted_before_sigterm_survive_a_restart(collector):
    """Export only queues spans; a graceful stop must commit the queue before exiting."""
    spans = [trace_pb2.Span(trace_id=bytes(range(2, 18)), span_id=(i + 1).to_bytes(8, "big"),
                            name=f"op{i}") for i in range(200)]
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=spans)])
    ])
    with grpc.insecure_channel(collector.addr) as channel:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=5)
    assert collector.stop() == 0
    collector.restart()
    http = f"http://127.0.0.1:{collector.info['http_port']}"
    stored = _get_json(f"{http}/api/traces/{bytes(range(2, 18)).hex()}")["spans"]
    assert sorted(span["name"] for span in stored) == sorted(f"op{i}" for i in range(200))
