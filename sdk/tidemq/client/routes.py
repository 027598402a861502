"""Topic routes from the name servers, cached (docs/routing.md: pull-only route discovery).

Any name server can answer; on a transport failure the next one is asked. Routes are
refreshed every 30 s (ref) and on demand after a send failure. An unknown topic surfaces as
TopicNotExist, straight from whichever name server answered.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidemq.client.message import MessageQueue
from tidemq.common import errors
from tidemq.common.channel import learn_route
from tidemq.common.rpc import BreakerSettings, RpcClient, forgive_endpoint
from tidemq.v1 import nameserver_pb2, nameserver_pb2_grpc

PERM_READ = 2
PERM_WRITE = 4
MASTER_ID = 0
ROUTE_REFRESH_S = 30.0  # docs/routing.md


def parse_addrs(addrs: str | Sequence[str]) -> list[str]:
    """'h:p;h:p' (the CLI/env form) or a list → list of addresses."""
    items = addrs.replace(",", ";").split(";") if isinstance(addrs, str) else list(addrs)
    result = [a.strip() for a in items if a and a.strip()]
    if not result:
        raise errors.InvalidArgument("at least one name server address (host:port) is required")
    return result


@dataclass(frozen=True)
class BrokerGroup:
    cluster: str
    broker_name: str
    addrs: dict[int, str]  # broker_id -> addr; 0 = master

    @property
    def master_addr(self) -> str:
        return self.addrs.get(MASTER_ID, "")


@dataclass(frozen=True)
class QueueLayout:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclass(frozen=True)
class TopicRoute:
    """Which broker groups hold a topic, how many queues each, and their addresses."""

    topic: str
    queues: tuple[QueueLayout, ...]
    brokers: dict[str, BrokerGroup]
    order_conf: str = ""

    @classmethod
    def from_proto(cls, topic: str, data: nameserver_pb2.TopicRouteData) -> TopicRoute:
        brokers = {
            b.broker_name: BrokerGroup(b.cluster, b.broker_name, dict(b.broker_addrs))
            for b in data.broker_datas
        }
        queues = tuple(sorted(
            (QueueLayout(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm)
             for q in data.queue_datas),
            key=lambda q: q.broker_name,
        ))
        return cls(topic, queues, brokers, data.order_topic_conf)

    def master_addr(self, broker_name: str) -> str:
        group = self.brokers.get(broker_name)
        if group is None or not group.master_addr:
            raise errors.ServiceUnavailable(
                f"broker group {broker_name!r} has no master in the route of {self.topic!r}"
            )
        return group.master_addr

    def replica_addrs(self, broker_name: str) -> list[str]:
        """Every registered replica of a group, master first: where reads may go (a slave
        serves pulls and committed offsets while its group has no reachable master)."""
        group = self.brokers.get(broker_name)
        if group is None:
            return []
        return [group.addrs[broker_id] for broker_id in sorted(group.addrs)]

    def write_queues(self) -> list[MessageQueue]:
        """Writable queues on every group that has a master, in a stable order."""
        return [
            MessageQueue(self.topic, q.broker_name, i)
            for q in self.queues
            if q.perm & PERM_WRITE and self._has_master(q.broker_name)
            for i in range(q.write_queue_nums)
        ]

    @functools.cached_property
    def write_brokers(self) -> tuple[str, ...]:
        """The groups `write_queues` spans, in its order (computed once: the coalescer asks
        on every asynchronous send)."""
        return tuple(dict.fromkeys(q.broker_name for q in self.queues
                                   if q.perm & PERM_WRITE and self._has_master(q.broker_name)))

    def group_queues(self) -> list[MessageQueue]:
        """Writable queues of every group in the route, with a master right now or not: what
        a message group hashes over, so its queue does not move while its broker group
        elects a new master (sends to it wait for the election instead)."""
        return [
            MessageQueue(self.topic, q.broker_name, i)
            for q in self.queues
            if q.perm & PERM_WRITE and q.broker_name in self.brokers
            for i in range(q.write_queue_nums)
        ]

    def read_queues(self) -> list[MessageQueue]:
        return [
            MessageQueue(self.topic, q.broker_name, i)
            for q in self.queues
            if q.perm & PERM_READ and q.broker_name in self.brokers
            for i in range(q.read_queue_nums)
        ]

    def _has_master(self, broker_name: str) -> bool:
        group = self.brokers.get(broker_name)
        return group is not None and bool(group.master_addr)


class NameServerClient:
    """Ask the name servers, failing over between them on transport errors."""

    def __init__(self, namesrv_addrs: str | Sequence[str], *, timeout: float = 3.0,
                 breaker: BreakerSettings | None = None) -> None:
        self.addrs = parse_addrs(namesrv_addrs)
        self._clients = [
            RpcClient(a, nameserver_pb2_grpc.NameServerServiceStub, timeout=timeout,
                      breaker=breaker, retries=0)
            for a in self.addrs
        ]
        self._next = itertools.count()

    def call(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        start = next(self._next)
        failures: list[str] = []
        for i in range(len(self._clients)):
            client = self._clients[(start + i) % len(self._clients)]
            try:
                return client.call(method, request, timeout=timeout, idempotent=True)
            except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
                failures.append(f"{client.addr}: {exc.message}")
        raise errors.ServiceUnavailable("no name server answered: " + "; ".join(failures))

    def route(self, topic: str, *, timeout: float | None = None) -> TopicRoute:
        data = self.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=topic),
                         timeout=timeout)
        learn_route(data)  # each broker's wire port: its first call needs no GetBrokerInfo
        return TopicRoute.from_proto(topic, data)

    def topics(self) -> list[str]:
        return sorted(self.call("GetAllTopics", nameserver_pb2.GetAllTopicsRequest()).topics)

    def cluster_info(self) -> nameserver_pb2.ClusterInfo:
        info = self.call("GetClusterInfo", nameserver_pb2.GetClusterInfoRequest())
        learn_route(info)
        return info


def _forgive_new_masters(before: TopicRoute, after: TopicRoute) -> None:
    """A group whose master changed: the new one registered moments ago, so failures recorded
    against its address before (it was killed, or a slave that refused writes) no longer hold."""
    for name, group in after.brokers.items():
        old = before.brokers.get(name)
        if group.master_addr and old is not None and old.master_addr != group.master_addr:
            forgive_endpoint(group.master_addr)


class RouteCache:
    """Cached topic routes; `get` refreshes a route older than `refresh_interval`.

    >>> routes = RouteCache("127.0.0.1:9876;127.0.0.1:9877")  # doctest: +SKIP
    >>> routes.get("orders").write_queues()                   # doctest: +SKIP
    """

    def __init__(self, namesrv: NameServerClient | str | Sequence[str], *,
                 refresh_interval: float = ROUTE_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.namesrv = namesrv if isinstance(namesrv, NameServerClient) else NameServerClient(namesrv)
        self.refresh_interval = refresh_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[float, TopicRoute]] = {}

    def get(self, topic: str) -> TopicRoute:
        with self._lock:
            cached = self._routes.get(topic)
        if cached and self._clock() - cached[0] < self.refresh_interval:
            return cached[1]
        try:
            return self.refresh(topic)
        except errors.ServiceUnavailable:
            if cached:  # name servers unreachable: a stale route beats no route
                return cached[1]
            raise

    def peek(self, topic: str) -> TopicRoute | None:
        """The cached route, however old, without asking a name server (None if none)."""
        with self._lock:
            cached = self._routes.get(topic)
        return cached[1] if cached else None

    def refresh(self, topic: str) -> TopicRoute:
        try:
            route = self.namesrv.route(topic)
        except errors.NotFound as exc:
            with self._lock:
                self._routes.pop(topic, None)
            raise errors.TopicNotExist(
                f"topic {topic!r} does not exist (no name server has a route for it)"
            ) from exc
        with self._lock:
            previous = self._routes.get(topic)
            self._routes[topic] = (self._clock(), route)
        if previous is not None:
            _forgive_new_masters(previous[1], route)
        return route

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._routes.pop(topic, None)
