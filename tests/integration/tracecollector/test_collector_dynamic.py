"""A real trace collector following the config center: retention_spans / retention_hours
change live (a tighter count bound drops the oldest spans at once), bad values are refused and
logged, deleting the key falls back to the static flag."""

from __future__ import annotations

import grpc
import pytest
import requests
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2
from tidemq.common.errors import InvalidArgument
from tidemq.configclient.client import ConfigClient

from tests.support.processes import wait_until

GROUP_SPANS = "/tidemq/config/group/trace-collector/retention_spans"
CLUSTER_HOURS = "/tidemq/config/cluster/C1/retention_hours"


def _export(addr: str, first: int, count: int) -> None:
    spans = [trace_pb2.Span(trace_id=i.to_bytes(16, "big"), span_id=i.to_bytes(8, "big"),
                            name=f"span-{i}") for i in range(first, first + count)]
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=spans)])])
    with grpc.insecure_channel(addr) as channel:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=5)


def _trace_names(http: str) -> set[str]:
    response = requests.get(f"{http}/api/traces", params={"limit": 100}, timeout=5)
    response.raise_for_status()
    return {t["root_name"] for t in response.json()["traces"]}


def _logged(process, *needles: str) -> list[str]:
    return [line for line in process.log.read_text().splitlines()
            if all(needle in line for needle in needles)]


def test_retention_follows_the_config_center_live(etcd_server, services):
    center = services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])
    collector = services("tidemq.tracecollector", [
        "--http-port", "0", "--config-center", center.addr, "--cluster-name", "C1"])
    http = f"http://127.0.0.1:{collector.info['http_port']}"
    _export(collector.addr, 1, 5)
    wait_until(lambda: len(_trace_names(http)) == 5, 30, message="five stored traces")
    with ConfigClient(center.addr) as config:
        with pytest.raises(InvalidArgument) as refused:  # refused: the static bound stays
            config.put(GROUP_SPANS, b"many")
        assert refused.value.code == "INVALID_SETTING"
        assert len(_trace_names(http)) == 5

        config.put(GROUP_SPANS, b"2")  # applied at once: only the two newest spans stay
        wait_until(lambda: _trace_names(http) == {"span-4", "span-5"}, 15,
                   message="the tighter count bound to drop the oldest spans")
        _export(collector.addr, 6, 1)
        wait_until(lambda: _trace_names(http) == {"span-5", "span-6"}, 15,
                   message="the bound to hold for new spans")

        config.put(CLUSTER_HOURS, b"24")
        wait_until(lambda: _logged(collector, "applied dynamic setting", "retention_hours",
                                   "old=72.0", "new=24.0"), 15,
                   message="retention_hours to apply")

        config.delete(GROUP_SPANS)  # back to the static --retention-spans
        wait_until(lambda: _logged(collector, "applied dynamic setting", "retention_spans",
                                   "old=2", "new=1000000"), 15,
                   message="the static bound to come back")
    _export(collector.addr, 7, 3)
    wait_until(lambda: len(_trace_names(http)) == 5, 15, message="five traces kept again")

