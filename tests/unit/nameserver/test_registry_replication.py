"""RouteRegistry and replica groups: role changes move an address's broker id, routes follow
the new master, and a deposed master of an older epoch cannot take the route back."""

from __future__ import annotations

import dataclasses

import pytest
from tidemq.common.errors import PreconditionFailed
from tidemq.nameserver.registry import DataVersion, Registration, RouteRegistry, TopicConfig

A, B, C = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def replica(addr: str, replica_id: int, *, master: bool, epoch: int, version: int = 1,
            topics=(("orders", 4),)) -> Registration:
    return Registration("c1", "broker-a", 0 if master else replica_id + 1, addr, "",
                        DataVersion(0, version), tuple(TopicConfig(t, n, n) for t, n in topics),
                        replica_id=replica_id, role="MASTER" if master else "SLAVE", epoch=epoch)


@pytest.fixture
def registry():
    return RouteRegistry(lambda: 1_000)


def addrs(registry: RouteRegistry) -> dict[int, str]:
    return registry.cluster_info().broker_addr_table["broker-a"].broker_addrs


def test_group_of_three_is_one_broker_data_keyed_by_registered_id(registry):
    registry.register(replica(A, 0, master=True, epoch=1))
    registry.register(replica(B, 1, master=False, epoch=1))
    registry.register(replica(C, 2, master=False, epoch=1))
    assert addrs(registry) == {0: A, 2: B, 3: C}
    live = registry.cluster_info().live_brokers
    assert (live[B].replica_id, live[B].role, live[B].epoch) == (1, "SLAVE", 1)


def test_promoted_slave_takes_id_zero_and_routes_follow_its_topics(registry):
    registry.register(replica(A, 0, master=True, epoch=1))
    registry.register(replica(B, 1, master=False, epoch=1))
    # A died; B is elected in epoch 2 and re-registers as master with its own topic table.
    registry.register(replica(B, 1, master=True, epoch=2, version=7,
                              topics=(("orders", 4), ("audit", 2))))
    assert addrs(registry) == {0: B}
    assert registry.topics() == ["audit", "orders"]
    assert registry.route("audit").broker_datas[0].broker_addrs == {0: B}
    # A comes back as a slave of epoch 2.
    registry.register(replica(A, 0, master=False, epoch=2))
    assert addrs(registry) == {0: B, 1: A}
    assert registry.cluster_info().live_brokers[A].role == "SLAVE"


def test_deposed_master_of_older_epoch_cannot_take_the_route_back(registry):
    registry.register(replica(A, 0, master=True, epoch=1))
    registry.register(replica(B, 1, master=True, epoch=2))
    with pytest.raises(PreconditionFailed) as err:
        registry.register(replica(A, 0, master=True, epoch=1))  # a late heartbeat
    assert err.value.code == "STALE_EPOCH"
    assert addrs(registry) == {0: B}


def test_master_of_newer_epoch_replaces_the_old_one(registry):
    registry.register(replica(A, 0, master=True, epoch=1))
    registry.register(replica(B, 1, master=True, epoch=2))
    registry.register(replica(A, 0, master=True, epoch=3))
    assert addrs(registry) == {0: A}
    assert B not in registry.cluster_info().live_brokers


def test_slave_keeps_the_group_routable_while_it_has_no_master(registry):
    registry.register(replica(A, 0, master=True, epoch=1))
    registry.register(replica(B, 1, master=False, epoch=1))
    registry.register(replica(A, 0, master=False, epoch=1))  # A stepped down (lease lost)
    assert addrs(registry) == {1: A, 2: B}
    route = registry.route("orders")
    assert route.broker_datas[0].broker_addrs == {1: A, 2: B}


def test_brokers_without_replication_register_as_before(registry):
    plain = dataclasses.replace(replica(A, 0, master=True, epoch=0), role="")
    registry.register(plain)
    registry.register(plain)  # epoch 0 never counts as stale
    assert addrs(registry) == {0: A}
