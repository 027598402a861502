"""Tracing never chooses the transport (issue #37): a traced send through the HTTP gateway
goes to the broker over the wire protocol (its `tidemq_rpc_calls_total{method="Send"}` counts
it under `transport="wire"`), and its trace is the very trace the same send makes over gRPC
(a second gateway on the same cluster with `TIDEMQ_WIRE=0`): the same spans by service, name
and kind in the same tree — the HTTP request, the publish span, the client's
`/tidemq.v1.BrokerService/Send` and the broker's under it — with the same attributes (the
`rpc.*` ones with the same values, the server span's `rpc.user_agent` naming the framing)."""

from __future__ import annotations

import urllib.request
import uuid

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import TRACING_ENV, traced_cluster
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow  # the whole topology, the collector and two gateways (~30 s)
TOPIC = "WireTraced"
SEND = "/tidemq.v1.BrokerService/Send"
VARYING = {"net.peer.port", "rpc.user_agent"}  # per connection, per framing


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("wire-traces"),
                        broker_names=("broker-a",)) as cluster:
        wire_gateway = cluster.start_gateway(workers=1)
        grpc_gateway = cluster.start("tidemq.gateway", [
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, "--redis-url", cluster.redis.url,
            "--workers", "1", *cluster.tracing_flags(),
        ], env={**TRACING_ENV, "TIDEMQ_WIRE": "0"})
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 1}, timeout=30)
        assert created.status_code == 201, created.text
        yield cluster, {"wire": wire_gateway, "grpc": grpc_gateway}


def url(gateway) -> str:
    return f"http://127.0.0.1:{gateway.port}"


def send(gateway, key: str) -> None:
    response = requests.post(f"{url(gateway)}/v1/topics/{TOPIC}/messages",
                             json={"messages": [{"body": f"order {key}", "key": key}]},
                             timeout=30)
    assert response.status_code == 201, response.text


def sends_by_transport(gateway) -> dict[str, float]:
    page = urllib.request.urlopen(  # noqa: S310 - the test's own gateway
        f"http://127.0.0.1:{gateway.info['metrics_port']}/metrics", timeout=10).read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == "tidemq_rpc_calls_total" and sample.labels["method"] == "Send":
                counts[sample.labels["transport"]] = sample.value
    return counts


def trace_of(cluster, key: str) -> list[dict]:
    """The spans of the trace whose publish span names `key`, once every hop has arrived."""
    collector = cluster.extra["collector_url"]
    last: list = []

    def complete():
        found = requests.get(f"{collector}/api/traces", params={"key": key},
                             timeout=10).json()["traces"]
        if len(found) != 1:
            return None
        spans = requests.get(f"{collector}/api/traces/{found[0]['trace_id']}",
                             timeout=10).json()["spans"]
        stable = len(spans) == len(last) and any(s["name"] == SEND and s["kind"] == "SERVER"
                                                 for s in spans)
        last[:] = spans
        return spans if stable else None

    return wait_until(complete, 30, interval=0.5, message=f"the whole trace of {key}")


def tree(spans: list[dict]) -> list[tuple]:
    """Each span as (depth, service, name, kind, attribute names, rpc.* values), in tree
    order: what must not depend on the transport."""
    children: dict[str | None, list[dict]] = {}
    ids = {span["span_id"] for span in spans}
    for span in spans:
        parent = span["parent_span_id"] if span["parent_span_id"] in ids else None
        children.setdefault(parent, []).append(span)
    rows: list[tuple] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s["name"], s["kind"])):
            attributes = span["attributes"]
            rows.append((depth, span["service"], span["name"], span["kind"],
                         tuple(sorted(set(attributes) - VARYING)),
                         tuple(sorted((k, str(v)) for k, v in attributes.items()
                                      if k.startswith("rpc.") and k not in VARYING))))
            walk(span["span_id"], depth + 1)
    walk(None, 0)
    return rows


def test_a_traced_http_send_takes_the_wire_with_the_trace_grpc_gives_it(stack):
    cluster, gateways = stack
    for gateway in gateways.values():  # routes learnt, connections made: not in the traces
        send(gateway, f"warm-{uuid.uuid4().hex[:8]}")
    before = {name: sends_by_transport(gateway) for name, gateway in gateways.items()}
    keys = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in gateways}
    for name, gateway in gateways.items():
        send(gateway, keys[name])

    after = {name: sends_by_transport(gateway) for name, gateway in gateways.items()}
    assert after["wire"].get("wire", 0) - before["wire"].get("wire", 0) == 1
    assert after["wire"].get("grpc", 0) == 0  # traced, and never on gRPC
    assert after["grpc"].get("grpc", 0) - before["grpc"].get("grpc", 0) == 1

    traces = {name: trace_of(cluster, keys[name]) for name in gateways}
    assert tree(traces["wire"]) == tree(traces["grpc"])
    spans = traces["wire"]
    [client] = [s for s in spans if s["name"] == SEND and s["kind"] == "CLIENT"]
    [server] = [s for s in spans if s["name"] == SEND and s["kind"] == "SERVER"]
    [publish] = [s for s in spans if s["kind"] == "PRODUCER"]
    assert client["service"] == "gateway-http" and server["service"] == "broker"
    assert client["parent_span_id"] == publish["span_id"]
    assert server["parent_span_id"] == client["span_id"]  # the context crossed in the frame
    assert server["attributes"]["rpc.user_agent"] == "tidemq-wire/1"
    assert server["attributes"]["tidemq.queue_offset"] >= 0  # the servicer's, on this span
