"""A small real cluster: Redis, config-center, two name servers and brokers on demand."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import grpc
import pytest
from tidemq.common import errors
from tidemq.common.errors import TopicNotExist
from tidemq.common.rpc import GRPC_OPTIONS, RpcClient
from tidemq.v1 import (
    broker_pb2_grpc,
    config_pb2,
    config_pb2_grpc,
    nameserver_pb2,
    nameserver_pb2_grpc,
)

from tests.support.etcd import start_etcd
from tests.support.processes import ServiceProcess, start_service, wait_until


@dataclass
class Cluster:
    start: object
    config_center: ServiceProcess
    name_servers: list[ServiceProcess]
    brokers: list[ServiceProcess] = field(default_factory=list)

    @property
    def namesrv_addrs(self) -> str:
        return ";".join(ns.addr for ns in self.name_servers)

    def config(self) -> RpcClient:
        return RpcClient(self.config_center.addr, config_pb2_grpc.ConfigServiceStub)

    def put_topic(self, name: str, queues: int = 4, perm: int = 6, order: bool = False) -> None:
        doc = {"name": name, "queues": queues, "perm": perm, "order": order}
        self.config().call("Put", config_pb2.PutRequest(key=f"/tidemq/topics/{name}",
                                                       value=json.dumps(doc).encode()))

    def delete_topic(self, name: str) -> None:
        self.config().call("Delete", config_pb2.DeleteRequest(key=f"/tidemq/topics/{name}"))

    def start_broker(self, name: str = "broker-a", *extra: str, **kwargs) -> ServiceProcess:
        args = ["--broker-name", name, "--namesrv-addrs", self.namesrv_addrs,
                "--config-center", self.config_center.addr, "--segment-size-mib", "1",
                "--index-slots", "1024", "--index-entries", "4096",
                "--consume-queue-units-per-file", "1000", "--register-interval-s", "0.5",
                "--shutdown-grace-s", "2", "--wire-port", "0", *extra]
        broker = self.start("tidemq.broker", args, name=name, **kwargs)
        self.brokers.append(broker)
        return broker


class DirectClient:
    """A plain stub with TideMQError mapping and no breaker: these tests kill and restart
    brokers on purpose and must see each call's real outcome, never a fail-fast CIRCUIT_OPEN."""

    def __init__(self, addr: str, stub_class, timeout: float = 20.0) -> None:
        self._channel = grpc.insecure_channel(addr, options=GRPC_OPTIONS)
        self.stub = stub_class(self._channel)
        self.timeout = timeout

    def call(self, method: str, request, timeout: float | None = None):
        try:
            return getattr(self.stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None


def broker_client(broker: ServiceProcess) -> DirectClient:
    return DirectClient(broker.addr, broker_pb2_grpc.BrokerServiceStub)


def route_brokers(name_server: ServiceProcess, topic: str) -> dict[str, dict[int, str]]:
    """broker_name -> {broker_id: addr} of the topic's route ({} if there is none)."""
    client = DirectClient(name_server.addr, nameserver_pb2_grpc.NameServerServiceStub, 5)
    try:
        route = client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=topic))
    except TopicNotExist:
        return {}
    return {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}


def _route_is(name_server: ServiceProcess, topic: str, expected: set[str]) -> bool:
    try:
        return set(route_brokers(name_server, topic)) == expected
    except errors.ServiceUnavailable:
        return False  # a name server that is (re)starting


def wait_route(cluster: Cluster, topic: str, expected: set[str], timeout: float = 20) -> None:
    for ns in cluster.name_servers:
        wait_until(lambda ns=ns: _route_is(ns, topic, expected), timeout,
                   message=f"route of {topic!r} on {ns.addr} to be {sorted(expected)}")


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster and one broker for a whole module whose tests use distinct topics."""
    tmp = tmp_path_factory.mktemp("shared-cluster")
    etcd = start_etcd(tmp)
    started: list[ServiceProcess] = []

    def start(module: str, args: list[str] | None = None, **kwargs) -> ServiceProcess:
        process = start_service(module, args or [], tmp, **kwargs)
        started.append(process)
        return process

    try:
        config_center = start("tidemq.configcenter", ["--etcd-endpoints", etcd.endpoints])
        name_servers = [start("tidemq.nameserver", ["--scan-interval-s", "0.2"])
                        for _ in range(2)]
        cluster = Cluster(start, config_center, name_servers)
        cluster.start_broker("broker-a", "--max-message-size", "2048",
                             "--group-initial-rebalance-delay-ms", "300")
        yield cluster
    finally:
        for process in reversed(started):
            process.kill()
        etcd.kill()


@pytest.fixture
def cluster(request, etcd_server, services) -> Cluster:
    """Name servers expire silent brokers after 2 s unless parametrized with another expiry."""
    expiry_s = getattr(request, "param", {}).get("expiry_s", 2)
    config_center = services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])
    name_servers = [
        services("tidemq.nameserver",
                 ["--scan-interval-s", "0.2", "--broker-expiry-s", str(expiry_s)])
        for _ in range(2)
    ]
    return Cluster(services, config_center, name_servers)
