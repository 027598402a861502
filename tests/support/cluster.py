"""A whole TideMQ topology as real processes for integration and end-to-end tests.

etcd → config-center → two name servers → broker groups (one master each) → optional
gateway-http under gunicorn, optional trace collector. Everything on 127.0.0.1 with
ephemeral ports and temporary data dirs; readiness is observed through ready files.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.etcd import EtcdCluster, start_etcd
from tests.support.processes import RedisServer, ServiceProcess, start_redis, wait_until

_ids = itertools.count()
# Export spans every 200 ms instead of 5 s so trace assertions do not wait.
TRACING_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "200"}

# Small store files so brokers start fast and use little disk in tests.
BROKER_TEST_FLAGS = [
    "--segment-size-mib", "16", "--index-slots", "1024", "--index-entries", "4096",
    "--consume-queue-units-per-file", "10000", "--register-interval-s", "5",
    "--wire-port", "0",  # a restart keeps the gRPC port; port + 2 may be taken by then
]


@dataclass
class Cluster:
    etcd: EtcdCluster   # the config center's store
    redis: RedisServer  # the gateways' shared circuit-breaker state
    config_center: ServiceProcess
    namesrvs: list[ServiceProcess]
    brokers: dict[str, ServiceProcess]
    start: Callable[..., ServiceProcess]
    otlp_endpoint: str = ""
    gateway: ServiceProcess | None = None
    extra: dict = field(default_factory=dict)

    @property
    def namesrv_addrs(self) -> str:
        return ";".join(n.addr for n in self.namesrvs)

    def tracing_flags(self) -> list[str]:
        return ["--otlp-endpoint", self.otlp_endpoint] if self.otlp_endpoint else []

    def start_gateway(self, workers: int = 2, extra: list[str] | None = None) -> ServiceProcess:
        self.gateway = self.start("tidemq.gateway", [
            "--namesrv-addrs", self.namesrv_addrs, "--config-center", self.config_center.addr,
            "--redis-url", self.redis.url, "--workers", str(workers),
            "--topic-visible-timeout-s", "15", *self.tracing_flags(), *(extra or []),
        ], env=TRACING_ENV if self.otlp_endpoint else None)
        return self.gateway

    @property
    def gateway_url(self) -> str:
        assert self.gateway is not None
        return f"http://127.0.0.1:{self.gateway.port}"


def start_cluster(start: Callable[..., ServiceProcess], etcd: EtcdCluster, redis: RedisServer, *,
                  broker_names: tuple[str, ...] = ("broker-a", "broker-b"),
                  otlp_endpoint: str = "", controller: bool = False) -> Cluster:
    """`controller`: the name servers follow the config center and run the replication
    controller (replica groups need it); otherwise they need no other service."""
    tracing = ["--otlp-endpoint", otlp_endpoint] if otlp_endpoint else []
    if otlp_endpoint:
        start = functools.partial(start, env=TRACING_ENV)
    # Independent processes start side by side: Python start-up dominates, not the services.
    with ThreadPoolExecutor(4) as pool:
        config_future = pool.submit(start, "tidemq.configcenter",
                                    ["--etcd-endpoints", etcd.endpoints, *tracing])
        namesrv_args = list(tracing)
        if controller:  # the controller needs the config center's address
            namesrv_args += ["--config-center", config_future.result().addr,
                             *CONTROLLER_TEST_FLAGS]
        namesrv_futures = [pool.submit(start, "tidemq.nameserver", namesrv_args)
                           for _ in range(2)]
        config_center = config_future.result()
        namesrvs = [f.result() for f in namesrv_futures]
        addrs = ";".join(n.addr for n in namesrvs)
        broker_futures = {
            name: pool.submit(start, "tidemq.broker", [
                "--cluster-name", "TestCluster", "--broker-name", name, "--broker-id", "0",
                "--namesrv-addrs", addrs, "--config-center", config_center.addr,
                *BROKER_TEST_FLAGS, *tracing,
            ])
            for name in broker_names
        }
        brokers = {name: f.result() for name, f in broker_futures.items()}
    return Cluster(etcd, redis, config_center, namesrvs, brokers, start, otlp_endpoint)


# Replica groups with test timings: a 2 s live-key lease (a dead master is replaced within
# ~2-3 s), 0.2 s refreshes, the HA stream on a free port, a 1 s wait for slaves.
REPLICATION_TEST_FLAGS = [
    "--replication-enabled", "true", "--broker-lease-ttl-s", "2",
    "--replica-refresh-interval-s", "0.2", "--ha-port", "0",
]
CONTROLLER_TEST_FLAGS = ["--controller-lease-ttl-s", "3"]


@dataclass
class ReplicaGroup:
    """The brokers of one broker name; `replicas[r]` is replica id r (restart keeps its port
    and data directory)."""

    broker_name: str
    replicas: list[ServiceProcess]

    def commitlog_dir(self, replica: int) -> Path:
        return self.replicas[replica].workdir / "data" / "store" / "commitlog"

    def broker_info(self, replica: int, timeout: float = 2.0):
        """GetBrokerInfo of one replica (its role, epoch, log end), or None if it is down."""
        from tidemq.common.errors import TideMQError
        from tidemq.common.rpc import RpcClient
        from tidemq.v1 import broker_pb2, broker_pb2_grpc

        process = self.replicas[replica]
        if process.proc is None or process.proc.poll() is not None:
            return None
        try:
            return RpcClient(process.addr, broker_pb2_grpc.BrokerServiceStub, timeout=timeout,
                             retries=0).call("GetBrokerInfo", broker_pb2.GetBrokerInfoRequest())
        except TideMQError:
            return None

    def master(self, alive: tuple[int, ...] | None = None) -> int | None:
        """The replica that says it is master (of the highest epoch), among `alive`."""
        best = None
        for replica in alive if alive is not None else range(len(self.replicas)):
            info = self.broker_info(replica)
            if info is not None and info.role == "MASTER" and (
                    best is None or info.epoch > best[1]):
                best = (replica, info.epoch)
        return best[0] if best else None

    def wait_master(self, alive: tuple[int, ...] | None = None, timeout: float = 30.0) -> int:
        found: list[int] = []

        def master_known() -> bool:
            replica = self.master(alive)
            if replica is not None:
                found.append(replica)
            return replica is not None  # replica 0 is a master too

        wait_until(master_known, timeout, interval=0.1, message=f"a master of {self.broker_name}")
        return found[-1]


def start_replica_group(start: Callable[..., ServiceProcess], cluster: Cluster,
                        broker_name: str = "broker-r", *, replicas: int = 3,
                        broker_role: str = "SYNC_MASTER", min_in_sync: int = 2,
                        extra: list[str] | None = None,
                        per_replica: dict[int, list[str]] | None = None) -> ReplicaGroup:
    """`replicas` brokers of one broker name, side by side; replica 0 is the initial master.
    `per_replica`: more flags for one replica (after the others: a repeated flag wins)."""
    args = [
        "--cluster-name", "TestCluster", "--broker-name", broker_name,
        "--namesrv-addrs", cluster.namesrv_addrs, "--config-center", cluster.config_center.addr,
        "--broker-role", broker_role, "--min-in-sync-replicas", str(min_in_sync),
        *BROKER_TEST_FLAGS, *REPLICATION_TEST_FLAGS, *(extra or []),
    ]
    with ThreadPoolExecutor(replicas) as pool:
        futures = [pool.submit(start, "tidemq.broker",
                               [*args, "--broker-id", str(replica),
                                *(per_replica or {}).get(replica, [])])
                   for replica in range(replicas)]
        group = ReplicaGroup(broker_name, [f.result() for f in futures])
    cluster.extra.setdefault("replica_groups", {})[broker_name] = group
    return group


@contextmanager
def process_group(tmp_path: Path):
    """A `start(module, args)` whose processes are all killed on exit (module-scope use)."""
    started: list[ServiceProcess] = []
    lock = threading.Lock()

    def start(module: str, args: list[str] | None = None, **kwargs) -> ServiceProcess:
        workdir = Path(tmp_path) / f"{module.rsplit('.', 1)[-1]}-{next(_ids)}"
        process = ServiceProcess(module, list(args or []), workdir, kwargs.get("env"))
        with lock:
            started.append(process)
        return process.start()

    try:
        yield start
    finally:
        for process in reversed(started):
            process.kill()


@contextmanager
def running_cluster(tmp_path: Path, *, env: dict[str, str] | None = None, etcd_members: int = 1,
                    **cluster_options) -> Iterator[Cluster]:
    """etcd (`etcd_members` of them), Redis plus `start_cluster` in `tmp_path`; every process
    is killed on exit.

    For module-scoped fixtures: `with running_cluster(tmp) as cluster: yield cluster`.
    `env` is given to every service process (e.g. shrunk coordinator timings)."""
    etcd, redis = start_etcd(tmp_path, etcd_members), start_redis(tmp_path)
    try:
        with process_group(tmp_path) as start:
            if env:
                start = functools.partial(start, env=env)
            yield start_cluster(start, etcd, redis, **cluster_options)
    finally:
        redis.kill()
        etcd.kill()


@contextmanager
def traced_cluster(tmp_path: Path, *, extra_env: dict[str, str] | None = None,
                   **cluster_options) -> Iterator[Cluster]:
    """`running_cluster` plus a trace collector every service exports to: its dashboard URL in
    `cluster.extra["collector_url"]`, its OTLP address in `cluster.otlp_endpoint`. `extra_env`
    is added to every service process's environment (tracing's own variables kept)."""
    etcd, redis = start_etcd(tmp_path), start_redis(tmp_path)
    try:
        with process_group(tmp_path) as start:
            collector = start("tidemq.tracecollector", ["--http-port", "0"])

            def start_service(module, args=None, env=None, **kwargs):
                return start(module, args, env={**(extra_env or {}), **(env or {})}, **kwargs)

            cluster = start_cluster(start_service, etcd, redis, otlp_endpoint=collector.addr,
                                    **cluster_options)
            cluster.extra["collector_url"] = f"http://127.0.0.1:{ready_http_port(collector)}"
            yield cluster
    finally:
        redis.kill()
        etcd.kill()


def create_topic_in_config_center(cluster: Cluster, name: str, queues: int) -> None:
    """Define a topic the way admins do (CAS create of its definition), without the gateway."""
    from tidemq.configclient.client import ConfigClient
    from tidemq.configclient.topics import TopicDefinitions

    with ConfigClient(cluster.config_center.addr) as config:
        TopicDefinitions(config).create(name, queues)


def wait_for_route(cluster: Cluster, topic: str, broker_count: int, timeout: float = 60.0):
    """Poll every name server until `topic` is served by `broker_count` broker groups. The
    deadline bounds a hang: a route took over 30 s once, at a load average of 47 on 2 cores."""
    from tidemq.client.routes import NameServerClient
    from tidemq.common.errors import TideMQError

    clients = [NameServerClient(n.addr) for n in cluster.namesrvs]

    def complete():
        try:
            routes = [c.route(topic) for c in clients]
        except TideMQError:
            return False
        return all(len({q.broker_name for q in r.queues}) >= broker_count for r in routes)

    wait_until(complete, timeout, interval=0.05, message=f"route of {topic} on every name server")


def ready_http_port(process: ServiceProcess) -> int:
    info = json.loads(Path(process.ready_file).read_text())
    return info.get("http_port") or info["port"]


def monotonic_deadline(seconds: float) -> float:
    return time.monotonic() + seconds


def held_pulls(broker: ServiceProcess) -> float:
    """The broker's pulls and pops held waiting for messages (its metrics endpoint)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics").read()
    for line in text.decode().splitlines():
        if line.startswith("tidemq_broker_held_pulls "):
            return float(line.split()[1])
    return 0.0
