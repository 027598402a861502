"""One 3-replica group "broker-r" serving topic "replicated", and what the replica-group tests
ask of it: the controller's recorded state, the in-sync set, a direct broker call."""

from __future__ import annotations

import json

from tidemq.common.rpc import RpcClient
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key
from tidemq.v1 import broker_pb2_grpc

from tests.support.cluster import (
    ReplicaGroup,
    create_topic_in_config_center,
    start_replica_group,
    wait_for_route,
)
from tests.support.processes import wait_until

TOPIC = "replicated"
GROUP = "broker-r"


def group_state(cluster) -> dict | None:
    with ConfigClient(cluster.config_center.addr) as client:
        kv = client.get(group_key(GROUP))
    return json.loads(kv.value) if kv else None


def start_group(cluster, **options) -> ReplicaGroup:
    group = start_replica_group(cluster.start, cluster, GROUP, **options)
    create_topic_in_config_center(cluster, TOPIC, 2)
    wait_for_route(cluster, TOPIC, 1)
    group.wait_master()
    return group


def wait_in_sync(cluster, members: set[int], timeout: float = 30.0) -> None:
    wait_until(lambda: (state := group_state(cluster)) is not None
               and set(state["in_sync"]) == members, timeout, interval=0.1,
               message=f"in-sync set {sorted(members)}")


def broker_call(addr: str, method: str, request):
    return RpcClient(addr, broker_pb2_grpc.BrokerServiceStub, timeout=5, retries=0).call(
        method, request)
