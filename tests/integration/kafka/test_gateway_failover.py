"""No single gateway-kafka (#40): two instances registered in the config center under a lease,
both listed by Metadata, partition leaders and group coordinators spread over them; one
SIGKILLed under an idempotent `acks=all` producer and a consumer group (confluent-kafka), both
carry on through the other within the lease: every acknowledged record is stored exactly once
and consumed."""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from tidemq.gatewaykafka.codec import build

from tests.integration.kafka.harness import KafkaLoad, read_frame
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC, GROUP = "kfo-orders", "kfo-group"
TTL_S = 5                  # the instances' registration lease
BEFORE_KILL, AFTER_KILL = 300, 300   # acknowledged records before and after the kill


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("kfailover")) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 2)

        def start():
            return cluster.start("tidemq.gatewaykafka", [
                "--namesrv-addrs", cluster.namesrv_addrs,
                "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1",
                "--registration-ttl-s", str(TTL_S)])

        gateways = [start(), start()]
        yield cluster, gateways


def test_partitions_added_through_one_instance_are_served_by_the_other(two_gateways):
    """CreatePartitions on one instance; the other, which had the old map cached, serves a
    produce to the new partition at once (its cache follows the definitions, and a partition
    past the cached map reads the map again)."""
    _, gateways = two_gateways
    topic = "kfo-grown"
    first, other = (AdminClient({"bootstrap.servers": g.addr}) for g in gateways)
    wait_for(first.create_topics([NewTopic(topic, 1)]))
    wait_until(lambda: topic in other.list_topics(timeout=20).topics, 30,
               message="the topic in the other instance's Metadata")   # cached there now
    have = len(other.list_topics(topic, timeout=20).topics[topic].partitions)
    wait_for(first.create_partitions([NewPartitions(topic, have + 1)]))
    host, port = gateways[1].addr.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"grown", headers=[])
        request = build(ProduceRequest, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": have, "records": bytes(builder.build())}]}]}, 8)
        request.with_header(correlation_id=1, client_id="kfo-grown")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        answer = ProduceResponse.decode(read_frame(sock), version=8, header=True)
    assert answer.responses[0].partition_responses[0].error_code == 0


def wait_for(futures: dict) -> None:
    for future in futures.values():
        future.result(60)


def _brokers(bootstrap: str) -> dict[int, str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def test_metadata_lists_every_instance_and_spreads_leaders(two_gateways):
    _, gateways = two_gateways
    addrs = {g.addr for g in gateways}
    for gateway in gateways:
        wait_until(lambda g=gateway: set(_brokers(g.addr).values()) == addrs, 30,
                   message="both instances in each one's Metadata")
    metadata = AdminClient({"bootstrap.servers": gateways[0].addr}).list_topics(TOPIC, timeout=20)
    leaders = {p.leader for p in metadata.topics[TOPIC].partitions.values()}
    assert len(leaders) == 2   # two partitions, one on each instance
    other = AdminClient({"bootstrap.servers": gateways[1].addr}).list_topics(TOPIC, timeout=20)
    assert {i: p.leader for i, p in other.topics[TOPIC].partitions.items()} == \
        {i: p.leader for i, p in metadata.topics[TOPIC].partitions.items()}


def test_sigkilled_instance_loses_and_duplicates_nothing(two_gateways):
    _, gateways = two_gateways
    addrs = {g.addr for g in gateways}
    wait_until(lambda: set(_brokers(gateways[1].addr).values()) == addrs, 30,
               message="both instances registered")
    load = KafkaLoad(",".join(g.addr for g in gateways), TOPIC, GROUP).start()
    try:
        load.wait_acked(BEFORE_KILL, 90)
        load.wait_consumed(BEFORE_KILL // 2, 90)
        load.mark_fault()
        gateways[0].kill()   # SIGKILL: no deregistration, its lease has to expire
        acked_at_kill = len(load.acked)
        survivor = gateways[1].addr
        wait_until(lambda: set(_brokers(survivor).values()) == {survivor}, TTL_S + 30,
                   interval=0.2, message="the survivor to drop the killed instance")
        dropped_after = time.monotonic() - load.fault_at
        load.wait_acked(acked_at_kill + AFTER_KILL, 120)
    finally:
        verdict = load.finish(audit_bootstrap=gateways[1].addr)
        gateways[0].restart()   # same port, same node id: the module's other tests need it
    print(f"\n{verdict.line('gateway-kafka SIGKILL')}; the survivor dropped the killed "
          f"instance from Metadata after {dropped_after:.1f} s (lease {TTL_S} s)")
    assert not verdict.lost and not verdict.duplicated, (verdict.lost[:5],
                                                         verdict.duplicated[:5])
    assert not verdict.failures, verdict.failures[:5]
    assert verdict.outage_s < TTL_S + 30
