"""BrokerRegistrar against a real name-server process plus an address where nothing listens."""

from __future__ import annotations

import grpc
from tidemq.broker.registration import BrokerIdentity, BrokerRegistrar
from tidemq.broker.store import MetadataFile
from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.v1 import nameserver_pb2, nameserver_pb2_grpc

from tests.support.processes import dead_endpoint, wait_until


def cluster_info(addr: str) -> nameserver_pb2.ClusterInfo:
    stub = nameserver_pb2_grpc.NameServerServiceStub(grpc.insecure_channel(addr))
    return stub.GetClusterInfo(nameserver_pb2.GetClusterInfoRequest(), timeout=5)


def all_topics(addr: str) -> list[str]:
    stub = nameserver_pb2_grpc.NameServerServiceStub(grpc.insecure_channel(addr))
    return list(stub.GetAllTopics(nameserver_pb2.GetAllTopicsRequest(), timeout=5).topics)


def test_register_trigger_unregister_with_one_name_server_down(services, tmp_path):
    ns = services("tidemq.nameserver", [])
    dead = dead_endpoint()
    topics = TopicTable(MetadataFile(tmp_path / "topics.json"))
    topics.apply([TopicConfig("a", 2)], [], 1)
    registrar = BrokerRegistrar(BrokerIdentity("c1", "broker-x", 0, "10.1.1.1:10911"),
                                [dead, ns.addr], topics, interval_s=3600, call_timeout_s=2)
    registrar.start()
    try:
        info = cluster_info(ns.addr)
        assert [b.broker_addr for b in info.live_brokers] == ["10.1.1.1:10911"]
        assert all_topics(ns.addr) == ["a"]
        # The hour-long period never elapses here: only the trigger can publish topic "b".
        topics.apply([TopicConfig("a", 2), TopicConfig("b", 1)], [], 2)
        registrar.trigger()
        wait_until(lambda: all_topics(ns.addr) == ["a", "b"], 10, message="triggered update")
        assert registrar.register_all() == 1  # the dead name server is skipped, not waited on
    finally:
        registrar.stop(unregister=True)
    assert not cluster_info(ns.addr).live_brokers
    assert all_topics(ns.addr) == []


def test_announce_moves_the_registered_id_with_the_role(services, tmp_path):
    ns = services("tidemq.nameserver", [])
    topics = TopicTable(MetadataFile(tmp_path / "topics.json"))
    topics.apply([TopicConfig("a", 2)], [], 1)
    master = BrokerRegistrar(BrokerIdentity("c1", "broker-x", 0, "10.1.1.1:10911"),
                             [ns.addr], topics, interval_s=3600, call_timeout_s=2)
    slave = BrokerRegistrar(BrokerIdentity("c1", "broker-x", 1, "10.1.1.2:10911"),
                            [ns.addr], topics, interval_s=3600, call_timeout_s=2)
    try:
        assert master.announce("MASTER", 1) == 1
        assert slave.announce("SLAVE", 1) == 1
        info = cluster_info(ns.addr)
        assert dict(info.broker_addr_table["broker-x"].broker_addrs) == {
            0: "10.1.1.1:10911", 2: "10.1.1.2:10911"}
        roles = {b.broker_addr: (b.replica_id, b.role, b.epoch) for b in info.live_brokers}
        assert roles["10.1.1.2:10911"] == (1, nameserver_pb2.REPLICA_SLAVE, 1)
        # Failover: replica 1 is master in epoch 2; the old master's late claim is refused.
        assert slave.announce("MASTER", 2) == 1
        assert master.register_all() == 0
        assert master.announce("SLAVE", 2) == 1
        info = cluster_info(ns.addr)
        assert dict(info.broker_addr_table["broker-x"].broker_addrs) == {
            0: "10.1.1.2:10911", 1: "10.1.1.1:10911"}
    finally:
        master.stop(unregister=True)
        slave.stop(unregister=True)
    assert not cluster_info(ns.addr).live_brokers
