"""Kafka clients across a broker master failover (#40): a 3-replica SYNC_MASTER group (min 2 in
sync) behind gateway-kafka, confluent-kafka's idempotent `acks=all` producer and a consumer
group running while the master is SIGKILLed, and while the next master is SIGSTOPped (frozen:
its lease lapses, the controller elects another, and the frozen one, resumed, finds itself
fenced); and the control-plane store's (etcd's) leader SIGKILLed under two gateway-kafka
instances, whose registrations live in it. Every acknowledged record is stored once and
consumed; the figures are printed."""

from __future__ import annotations

import os
import signal

import pytest

from tests.integration.kafka.harness import KafkaLoad
from tests.support.cluster import (
    create_topic_in_config_center,
    running_cluster,
    start_replica_group,
    wait_for_route,
)
from tests.support.processes import freeze

pytestmark = pytest.mark.slow

GROUP_NAME, TOPIC = "broker-r", "kbf-orders"
PER_PHASE = 200   # acknowledged records between faults


@pytest.fixture
def replicated(tmp_path):
    with running_cluster(tmp_path, broker_names=(), controller=True) as cluster:
        group = start_replica_group(cluster.start, cluster, GROUP_NAME)
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        group.wait_master()
        gateway = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs, "--config-center",
            cluster.config_center.addr, "--advertised-host", "127.0.0.1",
            "--send-timeout-s", "10"])
        yield cluster, group, gateway


@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
def test_master_failover_loses_and_duplicates_nothing(replicated, fault):
    cluster, group, gateway = replicated
    load = KafkaLoad(gateway.addr, TOPIC, f"kbf-{fault}").start()
    process = None
    try:
        load.wait_acked(PER_PHASE, 120)
        load.wait_consumed(PER_PHASE // 2, 120)
        master = group.wait_master()
        process = group.replicas[master]
        load.mark_fault()
        if fault == "sigkill":
            process.kill()
        else:
            freeze(process.pid)
        alive = tuple(r for r in range(3) if r != master)
        group.wait_master(alive, timeout=60)
        acked_at = len(load.acked)
        load.wait_acked(acked_at + PER_PHASE, 120)
        if fault == "sigstop":
            os.kill(process.pid, signal.SIGCONT)   # the old master returns, fenced
            load.wait_acked(len(load.acked) + PER_PHASE, 120)
    finally:
        if fault == "sigstop" and process is not None and process.proc.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
        verdict = load.finish()
    print(f"\n{verdict.line(f'broker master {fault.upper()}')}")
    assert not verdict.lost and not verdict.duplicated, (verdict.lost[:5],
                                                         verdict.duplicated[:5])
    assert not verdict.failures, verdict.failures[:5]


def test_etcd_leader_kill_loses_and_duplicates_nothing(tmp_path):
    with running_cluster(tmp_path, etcd_members=3) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 2)
        gateways = [cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs, "--config-center",
            cluster.config_center.addr, "--advertised-host", "127.0.0.1"]) for _ in range(2)]
        load = KafkaLoad(",".join(g.addr for g in gateways), TOPIC, "kbf-etcd").start()
        try:
            load.wait_acked(PER_PHASE, 120)
            load.wait_consumed(PER_PHASE // 2, 120)
            leader = cluster.etcd.wait_leader()
            load.mark_fault()
            leader.kill()
            cluster.etcd.wait_leader(60)
            load.wait_acked(len(load.acked) + PER_PHASE, 120)
        finally:
            verdict = load.finish()
        print(f"\n{verdict.line('etcd leader SIGKILL')}")
        assert not verdict.lost and not verdict.duplicated
        assert not verdict.failures, verdict.failures[:5]
        for gateway in gateways:   # both instances still registered and serving
            assert gateway.proc.poll() is None
