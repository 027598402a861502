"""The controller's config-center parts driven directly against a real config center: the
leadership lease (lost at once when revoked or when the config center is gone past its TTL,
taken over only when free) and the group key's compare-and-set (a conflicting write makes the
controller decide again on what is stored; endless conflicts end in CONFLICT)."""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key, live_key
from tidemq.nameserver.controller.lease import LEADER_KEY, Leadership
from tidemq.nameserver.controller.state import GroupState, initial
from tidemq.nameserver.controller.store import ReplicationStore

from tests.support.processes import wait_until


@pytest.fixture
def center(etcd_server, services):
    return services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])


@pytest.fixture
def config(center):
    with ConfigClient(center.addr, timeout=1.0) as client:
        yield client


def test_only_one_leader_and_a_revoked_lease_ends_leadership_at_once(config):
    lost = []
    first = Leadership(config, "ns-1:9876", 3, on_lost=lambda: lost.append("ns-1"))
    second = Leadership(config, "ns-2:9876", 3)
    assert first.try_acquire() and first.held()
    assert not second.try_acquire() and not second.held()
    assert second.leader_addr() == "ns-1:9876"

    lease = config.get(LEADER_KEY).lease
    config.lease_revoke(lease)  # e.g. an operator, or the store expiring it
    wait_until(lambda: lost == ["ns-1"], 10, message="the holder to notice")
    assert not first.held()
    assert second.try_acquire() and second.leader_addr() == "ns-2:9876"
    second.release()
    assert config.get(LEADER_KEY) is None  # a clean stop frees the key at once


def test_a_controller_cut_off_from_the_config_center_stops_acting_within_its_ttl(config, center):
    leadership = Leadership(config, "ns-1:9876", 2)
    assert leadership.try_acquire()
    center.kill()
    wait_until(lambda: not leadership.held(), 10,
               message="leadership to end once the lease cannot be proven")


def test_group_write_decides_again_on_a_conflict_and_gives_up_when_it_never_ends(config):
    store = ReplicationStore(config, cas_attempts=3)
    config.put(live_key("g", 0), {"addr": "a", "ha_addr": "b", "epoch": 0, "log_end": 0})
    first = store.write_group("g", None, lambda current: initial([0]))
    assert first.state == GroupState(0, 1, frozenset({0}))

    config.put(group_key("g"), GroupState(0, 1, frozenset({0, 1})).to_json())  # a rival write
    seen = []

    def widen(current):
        seen.append(current.state.in_sync)
        return GroupState(0, 1, current.state.in_sync | {2})

    written = store.write_group("g", first, widen)
    assert seen == [{0}, {0, 1}]  # decided again on what was really stored
    assert written.state.in_sync == {0, 1, 2}
    assert store.read_group("g") == written

    def rival(current):
        config.put(group_key("g"), GroupState(0, 1, frozenset({0})).to_json())
        return GroupState(0, 1, frozenset({0, 3}))

    with pytest.raises(errors.Conflict):
        store.write_group("g", written, rival)


def test_a_deposed_controller_cannot_write_a_group(config):
    """Every group write compares the election key's create revision: a controller whose claim
    ended (here its key deleted and taken by another, while its own clock still says held)
    writes nothing, and the new controller's writes go through."""
    store = ReplicationStore(config)
    old, new = Leadership(config, "ns-1:9876", 30), Leadership(config, "ns-2:9876", 30)
    assert old.try_acquire()
    written = store.write_group("g", None, lambda current: initial([0]), old.fence)
    config.delete(LEADER_KEY)  # deposed behind its back: the store decides, not its clock
    assert new.try_acquire()
    assert old.held()  # it still believes it leads
    with pytest.raises(errors.Conflict, match="claim on /tidemq/controller/leader"):
        store.write_group("g", written, lambda current: GroupState(0, 2, frozenset({0})),
                          old.fence)
    assert store.read_group("g") == written  # nothing written
    after = store.write_group("g", written, lambda current: GroupState(0, 2, frozenset({0})),
                              new.fence)
    assert after.state.epoch == 2
    old.release()
    new.release()
