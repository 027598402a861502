"""A real name server following the config center: broker_expiry_s and scan_interval_s change
live (a silent broker that the static 120 s would keep is expired once they shrink), bad
values are refused when written, and a name server without --config-center needs nothing."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument
from tidemq.common.rpc import RpcClient
from tidemq.configclient.client import ConfigClient
from tidemq.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

from tests.support.processes import wait_until

CLUSTER_EXPIRY = "/tidemq/config/cluster/C1/broker_expiry_s"
GROUP_EXPIRY = "/tidemq/config/group/name-server/broker_expiry_s"
GROUP_SCAN = "/tidemq/config/group/name-server/scan_interval_s"


def register(client: RpcClient, addr: str) -> None:
    client.call("RegisterBroker", nameserver_pb2.RegisterBrokerRequest(
        cluster_name="C1", broker_name=f"b-{addr}", broker_id=0, broker_addr=addr,
        data_version=common_pb2.DataVersion(timestamp=1, counter=1),
        topics=[common_pb2.TopicConfig(topic_name="orders", read_queue_nums=1,
                                       write_queue_nums=1, perm=6)]))


def live_brokers(client: RpcClient) -> set[str]:
    info = client.call("GetClusterInfo", nameserver_pb2.GetClusterInfoRequest())
    return {b.broker_addr for b in info.live_brokers}


def test_expiry_settings_apply_live_and_bad_values_are_refused(etcd_server, services):
    center = services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])
    ns = services("tidemq.nameserver", ["--config-center", center.addr, "--cluster-name", "C1",
                                        "--scan-interval-s", "3600"])
    client = RpcClient(ns.addr, nameserver_pb2_grpc.NameServerServiceStub)
    with ConfigClient(center.addr) as config:
        with pytest.raises(InvalidArgument) as refused:  # refused when written
            config.put(GROUP_EXPIRY, b"soon")
        assert refused.value.code == "INVALID_SETTING"
        assert "broker_expiry_s" in str(refused.value) and "seconds in [1, 86400]" in str(
            refused.value)
        assert config.get(GROUP_EXPIRY) is None

        config.put(GROUP_EXPIRY, b"120")
        register(client, "10.0.0.1:1")
        config.put(CLUSTER_EXPIRY, b"1")  # the group value shadows it
        config.put(GROUP_SCAN, b"0.2")    # the hour-long wait is cut short
        wait_until(lambda: "setting=scan_interval_s" in ns.log.read_text(), 15,
                   message="the scan interval to apply")
        assert live_brokers(client) == {"10.0.0.1:1"}

        config.delete(GROUP_EXPIRY)  # now the cluster's 1 s applies: the broker expires
        wait_until(lambda: not live_brokers(client), 15, message="the silent broker to expire")
        applied = [line for line in ns.log.read_text().splitlines()
                   if "applied dynamic setting" in line and "broker_expiry_s" in line]
        assert applied and "new=1.0" in applied[-1] and "old=120.0" in applied[-1]
