"""A route refresh that names a new master of a group closes that address's breaker (the new
master registered moments ago), and only then: an unchanged or first-seen master keeps the
failures recorded against it. A broker killed and promoted again within the breaker's reset
timeout was refused for the rest of it (found by bench/failover: +2 s on some failovers)."""

from __future__ import annotations

import itertools

import pytest
from tidemq.client.routes import BrokerGroup, QueueLayout, RouteCache, TopicRoute
from tidemq.common.rpc import BreakerSettings, breaker_for, is_endpoint_open

_ports = itertools.count(41000)


def route(master: str) -> TopicRoute:
    return TopicRoute("t", (QueueLayout("broker-a", 2, 2, 6),),
                      {"broker-a": BrokerGroup("c", "broker-a", {0: master})})


class NameServer:
    """Stands in for the name servers' GetRouteInfo (another process)."""

    def __init__(self, *routes: TopicRoute) -> None:
        self.routes = list(routes)

    def route(self, topic, timeout=None):
        return self.routes.pop(0)


def cache_of(*routes: TopicRoute) -> RouteCache:
    cache = RouteCache("127.0.0.1:1")
    cache.namesrv = NameServer(*routes)
    return cache


@pytest.fixture
def addrs():
    old, new = (f"192.0.2.1:{next(_ports)}" for _ in range(2))
    for addr in (old, new):
        breaker_for(addr, BreakerSettings()).open()
    return old, new


def test_a_new_master_is_forgiven(addrs):
    old, new = addrs
    cache = cache_of(route(old), route(new))
    cache.refresh("t")
    cache.refresh("t")
    assert not is_endpoint_open(new)
    assert is_endpoint_open(old)


def test_an_unchanged_or_first_seen_master_is_not(addrs):
    old, _ = addrs
    cache = cache_of(route(old), route(old))
    cache.refresh("t")
    assert is_endpoint_open(old)
    cache.refresh("t")
    assert is_endpoint_open(old)
