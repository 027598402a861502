"""RouteRegistry behaviour with a fake clock: registration, routes, unregister, expiry."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument, TopicNotExist
from tidemq.nameserver.registry import DataVersion, Registration, RouteRegistry, TopicConfig

from tests.support.clock import FakeClock


def reg(addr="10.0.0.1:10911", name="broker-a", broker_id=0, cluster="c1", version=1,
        topics=(("orders", 4),), ha="") -> Registration:
    return Registration(cluster, name, broker_id, addr, ha, DataVersion(0, version),
                        tuple(TopicConfig(t, n, n) for t, n in topics))


@pytest.fixture
def clock():
    return FakeClock(1_000_000)


@pytest.fixture
def registry(clock):
    return RouteRegistry(clock)


def test_master_registration_publishes_its_topics(registry):
    registry.register(reg())
    route = registry.route("orders")
    assert [(q.broker_name, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 6)
    ]
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert registry.topics() == ["orders"]
    assert registry.cluster_info().cluster_addr_table == {"c1": {"broker-a"}}


def test_unknown_topic_is_topic_not_exist(registry):
    registry.register(reg())
    with pytest.raises(TopicNotExist) as err:
        registry.route("nope")
    assert err.value.code == "TOPIC_NOT_EXIST"


def test_routes_rebuilt_only_when_data_version_changes(registry):
    registry.register(reg(version=1, topics=(("orders", 4),)))
    # Same version, different topics: a heartbeat of an unchanged broker is not re-read.
    registry.register(reg(version=1, topics=(("orders", 8),)))
    assert registry.route("orders").queue_datas[0].write_queue_nums == 4
    registry.register(reg(version=2, topics=(("orders", 8), ("audit", 1))))
    assert registry.route("orders").queue_datas[0].write_queue_nums == 8
    assert registry.topics() == ["audit", "orders"]
    registry.register(reg(version=3, topics=(("audit", 1),)))
    assert registry.topics() == ["audit"]  # a deleted topic leaves the route


def test_slave_gets_master_address_and_does_not_change_routes(registry):
    registry.register(reg(ha="10.0.0.1:10912"))
    answer = registry.register(
        reg(addr="10.0.0.2:10911", broker_id=1, version=9, topics=(("other", 2),))
    )
    assert (answer.master_addr, answer.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    assert registry.topics() == ["orders"]
    assert registry.route("orders").broker_datas[0].broker_addrs == {
        0: "10.0.0.1:10911", 1: "10.0.0.2:10911"
    }


def test_slave_without_master_gets_empty_master(registry):
    answer = registry.register(reg(addr="10.0.0.2:10911", broker_id=1))
    assert answer.master_addr == ""
    with pytest.raises(TopicNotExist):
        registry.route("orders")


def test_unregister_cascades(registry):
    registry.register(reg())
    registry.register(reg(addr="10.0.0.3:10911", name="broker-b", cluster="c2"))
    assert registry.unregister("c1", "broker-a", 0, "10.0.0.1:10911")
    route = registry.route("orders")
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    info = registry.cluster_info()
    assert info.cluster_addr_table == {"c2": {"broker-b"}}
    assert set(info.broker_addr_table) == {"broker-b"}
    assert registry.unregister("c2", "broker-b", 0, "10.0.0.3:10911")
    with pytest.raises(TopicNotExist):
        registry.route("orders")
    assert registry.topics() == []
    assert not registry.unregister("c2", "broker-b", 0, "10.0.0.3:10911")


def test_master_removed_slave_keeps_route(registry):
    registry.register(reg())
    registry.register(reg(addr="10.0.0.2:10911", broker_id=1))
    registry.unregister("c1", "broker-a", 0, "10.0.0.1:10911")
    route = registry.route("orders")
    assert route.broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}


def test_expiry_removes_only_silent_brokers(registry, clock):
    registry.register(reg())
    clock.now += 60_000
    registry.register(reg(addr="10.0.0.3:10911", name="broker-b"))
    clock.now += 60_001
    assert registry.expire_silent(120_000) == ["10.0.0.1:10911"]
    assert [q.broker_name for q in registry.route("orders").queue_datas] == ["broker-b"]
    clock.now += 60_000
    assert registry.expire_silent(120_000) == ["10.0.0.3:10911"]
    assert registry.topics() == []


def test_heartbeat_keeps_broker_alive(registry, clock):
    registry.register(reg())
    for _ in range(10):
        clock.now += 30_000
        registry.register(reg())
        assert registry.expire_silent(120_000) == []


def test_slave_promoted_to_master_on_same_address(registry):
    registry.register(reg())
    registry.register(reg(addr="10.0.0.2:10911", broker_id=1))
    registry.unregister("c1", "broker-a", 0, "10.0.0.1:10911")
    registry.register(reg(addr="10.0.0.2:10911", broker_id=0, version=5))
    assert registry.route("orders").broker_datas[0].broker_addrs == {0: "10.0.0.2:10911"}


def test_order_topic_conf(registry):
    registry.register(Registration("c1", "broker-a", 0, "a:1", "", DataVersion(0, 1),
                                   (TopicConfig("fifo", 4, 4, 6, 0, True),)))
    assert registry.route("fifo").order_topic_conf == "broker-a:4"


@pytest.mark.parametrize("bad", [
    Registration("", "b", 0, "a:1"), Registration("c", "", 0, "a:1"),
    Registration("c", "b", 0, ""), Registration("c", "b", -1, "a:1"),
])
def test_invalid_registration(registry, bad):
    with pytest.raises(InvalidArgument):
        registry.register(bad)
