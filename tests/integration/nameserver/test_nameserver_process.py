"""A real name-server process over gRPC: register, route, unregister, expiry."""

from __future__ import annotations

import urllib.request

import pytest
from tidemq.common.errors import TopicNotExist
from tidemq.common.rpc import RpcClient
from tidemq.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

from tests.support.processes import wait_until


def _register(client, addr, version=1, topics=("orders",)):
    return client.call("RegisterBroker", nameserver_pb2.RegisterBrokerRequest(
        cluster_name="DefaultCluster", broker_name=f"b-{addr}", broker_id=0, broker_addr=addr,
        data_version=common_pb2.DataVersion(timestamp=1, counter=version),
        topics=[common_pb2.TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4,
                                       perm=6) for t in topics],
    ))


def _route_brokers(client, topic):
    try:
        route = client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=topic))
    except TopicNotExist:
        return set()
    return {b.broker_name for b in route.broker_datas}


def test_register_route_unregister_and_expiry(services):
    ns = services("tidemq.nameserver", ["--scan-interval-s", "0.2", "--broker-expiry-s", "1"])
    client = RpcClient(ns.addr, nameserver_pb2_grpc.NameServerServiceStub)
    with pytest.raises(TopicNotExist) as err:
        client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic="orders"))
    assert err.value.code == "TOPIC_NOT_EXIST"

    _register(client, "10.0.0.1:1")
    _register(client, "10.0.0.2:1")
    assert _route_brokers(client, "orders") == {"b-10.0.0.1:1", "b-10.0.0.2:1"}
    topics = client.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest())
    assert list(topics.topics) == ["orders"]
    info = client.call("GetClusterInfo", nameserver_pb2.GetClusterInfoRequest())
    assert set(info.cluster_addr_table["DefaultCluster"].broker_names) == {
        "b-10.0.0.1:1", "b-10.0.0.2:1"
    }
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{ns.metrics_port}/metrics").read()
    assert b"tidemq_nameserver_live_brokers 2.0" in metrics

    client.call("UnregisterBroker", nameserver_pb2.UnregisterBrokerRequest(
        cluster_name="DefaultCluster", broker_name="b-10.0.0.1:1", broker_id=0,
        broker_addr="10.0.0.1:1"))
    assert _route_brokers(client, "orders") == {"b-10.0.0.2:1"}

    # The remaining broker stops heartbeating: the scanner removes it, and the topic with it.
    wait_until(lambda: not _route_brokers(client, "orders"), timeout=15,
               message="silent broker to expire")
    info = client.call("GetClusterInfo", nameserver_pb2.GetClusterInfoRequest())
    assert not info.live_brokers and not info.cluster_addr_table
    assert ns.stop() == 0
