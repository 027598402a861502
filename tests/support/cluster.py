"""A whole TideMQ topology as real processes for integration and end-to-end tests.

redis → config-center → two name servers → broker groups (one master each) → optional
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

from tests.support.processes import RedisServer, ServiceProcess, start_redis, wait_until

_ids = itertools.count()
# Export spans every 200 ms instead of 5 s so trace assertions do not wait.
TRACING_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "200"}

# Small store files so brokers start fast and use little disk in tests.
BROKER_TEST_FLAGS = [
    "--segment-size-mib", "16", "--index-slots", "1024", "--index-entries", "4096",
    "--consume-queue-units-per-file", "10000", "--register-interval-s", "5",
]


@dataclass
class Cluster:
    redis: RedisServer
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


def start_cluster(start: Callable[..., ServiceProcess], redis: RedisServer, *,
                  broker_names: tuple[str, ...] = ("broker-a", "broker-b"),
                  otlp_endpoint: str = "") -> Cluster:
    tracing = ["--otlp-endpoint", otlp_endpoint] if otlp_endpoint else []
    if otlp_endpoint:
        start = functools.partial(start, env=TRACING_ENV)
    # Independent processes start side by side: Python start-up dominates, not the services.
    with ThreadPoolExecutor(4) as pool:
        config_future = pool.submit(start, "tidemq.configcenter", ["--redis-url", redis.url,
                                                                    *tracing])
        namesrv_futures = [pool.submit(start, "tidemq.nameserver", tracing) for _ in range(2)]
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
    return Cluster(redis, config_center, namesrvs, brokers, start, otlp_endpoint)


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
def running_cluster(tmp_path: Path, *, env: dict[str, str] | None = None,
                    **cluster_options) -> Iterator[Cluster]:
    """Redis plus `start_cluster` in `tmp_path`; every process is killed on exit.

    For module-scoped fixtures: `with running_cluster(tmp) as cluster: yield cluster`.
    `env` is given to every service process (e.g. shrunk coordinator timings)."""
    redis = start_redis(tmp_path)
    try:
        with process_group(tmp_path) as start:
            if env:
                start = functools.partial(start, env=env)
            yield start_cluster(start, redis, **cluster_options)
    finally:
        redis.kill()


def create_topic_in_config_center(cluster: Cluster, name: str, queues: int) -> None:
    """Define a topic the way admins do (CAS create of its definition), without the gateway."""
    from tidemq.configclient.client import ConfigClient
    from tidemq.configclient.topics import TopicDefinitions

    with ConfigClient(cluster.config_center.addr) as config:
        TopicDefinitions(config).create(name, queues)


def wait_for_route(cluster: Cluster, topic: str, broker_count: int, timeout: float = 30.0):
    """Poll every name server until `topic` is served by `broker_count` broker groups."""
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
