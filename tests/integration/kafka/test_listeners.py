"""Two listeners per gateway-kafka (docs/kafka.md#listeners), as Kafka's `listeners` /
`advertised.listeners`: two instances, each listening on an internal and an external port, are
one cluster whichever listener a client comes in on, and a client is only ever told the
addresses of the listener it came in on — in Metadata, in FindCoordinator, and so in every
connection librdkafka opens (its statistics list each broker it knows). An instance without an
external listener is listed with its internal address on the external listener too."""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from tidemq.gatewaykafka.codec import build

from tests.integration.kafka.harness import read_frame
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import free_port, wait_until

pytestmark = pytest.mark.slow

TOPIC = "kl-orders"   # one queue per broker group: two partitions, one led by each instance
LISTENERS = ("internal", "external")


@pytest.fixture(scope="module")
def gateways(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("klisteners")) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 2)
        claimed = free_port()
        common = ["--namesrv-addrs", cluster.namesrv_addrs,
                  "--config-center", cluster.config_center.addr,
                  "--advertised-host", "127.0.0.1", "--registration-ttl-s", "5"]
        # one with its external address given, one advertising advertised_host and the port
        first = cluster.start("tidemq.gatewaykafka", [
            *common, "--external-port", str(claimed),
            "--external-advertised-addr", f"127.0.0.1:{claimed}"])
        second = cluster.start("tidemq.gatewaykafka", [*common, "--external-port", "0"])
        assert first.info["external_port"] == claimed
        yield cluster, [first, second]


def _addresses(gateway, listener: str) -> str:
    port = gateway.port if listener == "internal" else gateway.info["external_port"]
    return f"127.0.0.1:{port}"


def _exchange(addr: str, request, response_class, version: int):
    request.with_header(correlation_id=7, client_id="kl-listeners")
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        return response_class.decode(read_frame(sock), version=version, header=True)


def _metadata_brokers(addr: str) -> dict[int, str]:
    answer = _exchange(addr, build(MetadataRequest, {"topics": None}, 1), MetadataResponse, 1)
    return {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}


def _coordinator(addr: str, group: str) -> tuple[int, str]:
    answer = _exchange(addr, build(FindCoordinatorRequest, {"key": group, "key_type": 0}, 1),
                       FindCoordinatorResponse, 1)
    assert answer.error_code == 0, answer
    return answer.node_id, f"{answer.host}:{answer.port}"


def test_each_listener_lists_every_instance_by_its_own_addresses(gateways):
    _, instances = gateways
    by_listener = {}
    for listener in LISTENERS:
        expected = {_addresses(g, listener) for g in instances}
        for gateway in instances:
            addr = _addresses(gateway, listener)
            wait_until(lambda a=addr, e=expected: set(_metadata_brokers(a).values()) == e, 30,
                       message=f"both instances' {listener} addresses in {addr}'s Metadata")
        by_listener[listener] = _metadata_brokers(_addresses(instances[0], listener))
    # the same node ids on both listeners: one cluster, leaders the same whichever way in
    assert by_listener["internal"].keys() == by_listener["external"].keys()
    assert set(by_listener["internal"].values()).isdisjoint(by_listener["external"].values())
    for listener in LISTENERS:
        for gateway in instances:
            for group in ("kl-a", "kl-b", "kl-c", "kl-d"):
                node_id, where = _coordinator(_addresses(gateway, listener), group)
                assert where == by_listener[listener][node_id], (listener, group)


@pytest.mark.parametrize("listener", LISTENERS)
def test_a_client_on_either_listener_round_trips_and_meets_only_its_addresses(gateways,
                                                                             listener):
    """The producer bootstraps on the first instance, the group consumer on the second; both
    partitions (one led by each instance) are written and read."""
    _, instances = gateways
    allowed = {_addresses(g, listener) for g in instances}
    wait_until(lambda: set(_metadata_brokers(_addresses(instances[1], listener)).values())
               == allowed, 30, message="both instances registered")
    seen: set[str] = set()

    def statistics(raw: str) -> None:   # every broker librdkafka knows, by "host:port"
        seen.update(b["nodename"] for b in json.loads(raw)["brokers"].values() if b["nodename"])

    marker = uuid.uuid4().hex[:8]
    producer = Producer({"bootstrap.servers": _addresses(instances[0], listener),
                         "statistics.interval.ms": 200, "stats_cb": statistics,
                         "enable.idempotence": True})
    sent = {(partition, f"{listener}-{marker}-{i}".encode())
            for partition in (0, 1) for i in range(10)}
    failures = []
    for partition, value in sorted(sent):
        producer.produce(TOPIC, value=value, partition=partition,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0 and not failures

    consumer = Consumer({"bootstrap.servers": _addresses(instances[1], listener),
                         "group.id": f"kl-{listener}-{marker}", "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 200, "stats_cb": statistics})
    consumer.subscribe([TOPIC])
    got = set()
    deadline = time.monotonic() + 60
    while not sent <= got and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.add((message.partition(), message.value()))
    stats_deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < stats_deadline:   # the next statistics
        producer.poll(0.2)
        consumer.poll(0.2)
    consumer.close()
    assert sent <= got, sorted(sent - got)[:5]
    assert seen == allowed, f"{listener} clients met {sorted(seen)}, expected {sorted(allowed)}"


def test_an_instance_without_an_external_listener_is_listed_by_its_internal_address(gateways):
    cluster, instances = gateways
    plain = cluster.start("tidemq.gatewaykafka", [
        "--namesrv-addrs", cluster.namesrv_addrs, "--config-center", cluster.config_center.addr,
        "--advertised-host", "127.0.0.1", "--registration-ttl-s", "5"])
    try:
        assert plain.info["external_port"] == 0
        external = {_addresses(g, "external") for g in instances} | {plain.addr}
        addr = _addresses(instances[0], "external")
        wait_until(lambda: set(_metadata_brokers(addr).values()) == external, 30,
                   message="the third instance, by its internal address, on the external one")
        internal = {_addresses(g, "internal") for g in instances} | {plain.addr}
        assert set(_metadata_brokers(plain.addr).values()) == internal
    finally:
        plain.stop()
    wait_until(lambda: len(_metadata_brokers(addr)) == 2, 30,
               message="the third instance gone on SIGTERM")
