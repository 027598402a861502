"""gateway-kafka's per-request spans, on a traced cluster (the trace collector every service
exports to): a Kafka produce is a trace rooted at the gateway's SERVER span `kafka/Produce`
(its API, topic and partition count as attributes) with the broker's Send under it, found by
the record's key; a consumer group's Fetch long polls and Heartbeats are not roots on the
dashboard (quiet by default, as Pull and Pop), while a Fetch that found the record leaves its
`<topic> receive` span."""

from __future__ import annotations

import uuid

import pytest
import requests
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from tidemq.common.sampling import is_quiet

from tests.support.cluster import (
    TRACING_ENV,
    create_topic_in_config_center,
    traced_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "k-traced"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("kafka-traces"),
                        broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 1)
        gateway = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs, "--config-center",
            cluster.config_center.addr, "--advertised-host", "127.0.0.1",
            *cluster.tracing_flags()], env=TRACING_ENV)
        cluster.extra["bootstrap"] = gateway.addr
        yield cluster


def _api(stack, path: str, **params) -> dict:
    response = requests.get(f"{stack.extra['collector_url']}{path}", params=params, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_kafka_produce_is_a_gateway_span_with_the_brokers_send_under_it(stack):
    key = f"traced-{uuid.uuid4().hex[:10]}"
    producer = KafkaProducer(bootstrap_servers=stack.extra["bootstrap"], acks="all",
                             request_timeout_ms=15000)
    producer.send(TOPIC, key=key.encode(), value=b"hello", partition=0).get(15)
    producer.close()

    def stored():
        traces = _api(stack, "/api/traces", key=key)["traces"]
        found = next((t for t in traces if {"gateway-kafka", "broker"} <= set(t["services"])),
                     None)
        spans = found and _api(stack, f"/api/traces/{found['trace_id']}")["spans"]
        # the gateway's request span ends after its children: it may be exported a batch later
        return spans if spans and any(s["name"] == "kafka/Produce" for s in spans) else None

    spans = wait_until(stored, 30, interval=0.2, message="the Kafka produce's trace")
    by_id = {s["span_id"]: s for s in spans}
    [produce] = [s for s in spans if s["name"] == "kafka/Produce"]
    assert produce["service"] == "gateway-kafka" and produce["parent_span_id"] in (None, "")
    assert "SERVER" in str(produce["kind"]).upper()
    assert produce["status"]["code"] != "ERROR" and produce["status"]["code"] != 2
    attributes = produce["attributes"]
    assert (attributes["kafka.api"], attributes["kafka.api_key"]) == ("Produce", 0)
    assert attributes["messaging.destination.name"] == TOPIC
    assert attributes["kafka.partition_count"] == 1
    # the broker's Send descends from it (through the SDK's publish span and the gRPC call)
    [send] = [s for s in spans if s["service"] == "broker" and s["name"].endswith("/Send")]
    span = send
    while span["span_id"] != produce["span_id"] and span.get("parent_span_id") in by_id:
        span = by_id[span["parent_span_id"]]
    assert span["span_id"] == produce["span_id"], spans


def test_a_produce_span_links_to_each_records_traceparent(stack):
    """A Produce carries records of many traces (an instrumented client's PRODUCER span per
    record, in its `traceparent` header): the gateway's span links to each record's context,
    naming the record's partition and offset; a record without one, or with a malformed one,
    adds no link; the records keep their headers byte for byte."""
    key = f"linked-{uuid.uuid4().hex[:10]}"
    parents = [(uuid.uuid4().hex, uuid.uuid4().hex[:16]) for _ in range(3)]
    headers = [[("traceparent", f"00-{t}-{s}-01".encode())] for t, s in parents]
    headers += [[], [("traceparent", b"00-not-a-context")]]
    producer = KafkaProducer(bootstrap_servers=stack.extra["bootstrap"], acks="all",
                             linger_ms=500, request_timeout_ms=15000)
    futures = [producer.send(TOPIC, key=key.encode(), value=b"v%d" % i, headers=h, partition=0)
               for i, h in enumerate(headers)]
    offsets = [f.get(15).offset for f in futures]
    producer.close()
    assert offsets == list(range(offsets[0], offsets[0] + 5))   # one batch, one request

    def linked():
        traces = _api(stack, "/api/traces", key=key)["traces"]
        found = next((t for t in traces if "gateway-kafka" in t["services"]), None)
        spans = found and _api(stack, f"/api/traces/{found['trace_id']}")["spans"]
        return spans and [s for s in spans if s["name"] == "kafka/Produce"]

    [produce] = wait_until(linked, 30, interval=0.2, message="the Produce span")
    assert [(link["trace_id"], link["span_id"]) for link in produce["links"]] == parents
    assert [link["attributes"]["messaging.kafka.offset"] for link in produce["links"]] == \
        offsets[:3]
    assert {link["attributes"]["messaging.destination.partition.id"]
            for link in produce["links"]} == {"0"}
    assert produce["trace_id"] not in {t for t, _ in parents}   # links, not a parent

    consumer = KafkaConsumer(bootstrap_servers=stack.extra["bootstrap"],
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek(TopicPartition(TOPIC, 0), offsets[0])
    got = []
    wait_until(lambda: got.extend(r for b in consumer.poll(timeout_ms=300).values() for r in b)
               or len(got) >= 5, 30, interval=0, message="the linked records read back")
    consumer.close()
    assert [list(r.headers) for r in got[:5]] == headers


def test_fetch_polls_and_heartbeats_are_not_traced_but_what_they_read_is(stack):
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=stack.extra["bootstrap"],
                             group_id="k-traced-group", auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=200,
                             heartbeat_interval_ms=300)
    got = []
    wait_until(lambda: got.extend(r for b in consumer.poll(timeout_ms=300).values() for r in b)
               or got, 30, interval=0, message="the record read through the group")
    for _ in range(10):   # more empty long polls and heartbeats
        consumer.poll(timeout_ms=300)
    consumer.close()

    def received():
        return [t for t in _api(stack, "/api/traces", topic=TOPIC, limit=200)["traces"]
                if t["root_name"] == f"{TOPIC} receive"]
    assert wait_until(received, 30, interval=0.2, message="the Fetch's receive span")

    roots = [t["root_name"] or "" for t in
             _api(stack, "/api/traces", limit=500, internal="true")["traces"]]
    assert "kafka/JoinGroup" in roots    # the group's other requests are traced
    assert not [r for r in roots if is_quiet(r, frozenset({"Fetch", "Heartbeat"}))], roots
