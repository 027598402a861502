"""GroupMember against a real coordinator behind gRPC on loopback (no name server needed:
the coordinator address is given): leader assignment, rejoin codes, cancellable shutdown."""

from __future__ import annotations

import pytest
from tidemq.client.group import DirectClients, GroupMember
from tidemq.client.message import MessageQueue

from tests.support.coordinator import coordinator_servers
from tests.support.processes import wait_until


class _Routes:
    """The two topics' readable queues, as the leader would get them from the name server."""

    def refresh(self, topic):
        class Route:
            def read_queues(self):
                return [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b")
                        for q in range(2)]
        return Route()


@pytest.fixture
def coordinator_addr():
    with coordinator_servers(shutdown_grace_s=0.2) as serve:
        yield serve


def member(addr, assigned, revoked, **kwargs):
    m = GroupMember(None, _Routes(), DirectClients(), "g", ["t"],
                    on_assigned=assigned.append, on_revoked=revoked.append,
                    session_timeout_ms=2000, heartbeat_interval_ms=100, **kwargs)
    m.coordinator_addr = addr
    return m


def test_two_members_split_the_queues_and_the_survivor_takes_all_after_leave(coordinator_addr):
    rpc, addr = coordinator_addr(200)
    assigned_a, revoked_a, assigned_b, revoked_b = [], [], [], []
    a = member(addr, assigned_a, revoked_a).start()
    b = member(addr, assigned_b, revoked_b).start()
    try:
        wait_until(lambda: a.assignment and b.assignment
                   and len(a.assignment) + len(b.assignment) == 4, 20,
                   message="both members assigned")
        assert not set(a.assignment) & set(b.assignment)
        b.stop()  # revokes (callback) and leaves: a rebalances at once, not after a session
        assert revoked_b and set(revoked_b[-1]) == set(assigned_b[-1])
        wait_until(lambda: len(a.assignment) == 4, 20, message="the survivor to take all")
        assert revoked_a  # eager: a gave everything up before rejoining
    finally:
        a.stop()
        b.stop()


def test_stop_cancels_a_join_parked_in_a_rebalance(coordinator_addr):
    rpc, addr = coordinator_addr(60_000)  # the first rebalance would wait a minute
    m = member(addr, [], []).start()
    wait_until(lambda: rpc.coordinator.list_groups(), 10, message="the join to arrive")
    m.stop(leave=False)
    assert not m._thread.is_alive()
    assert m.last_error_code == "CONSUMER_STOPPING"  # cancelled, not timed out
    assert m.assignment == []


def test_sticky_leader_keeps_previous_queues_when_a_member_joins(coordinator_addr):
    _, addr = coordinator_addr(100)
    members = [member(addr, [], [], strategy="sticky") for _ in range(3)]
    try:
        for m in members[:2]:
            m.start()
        wait_until(lambda: all(len(m.assignment) == 2 for m in members[:2]), 20,
                   message="two members with two queues each")
        before = [set(m.assignment) for m in members[:2]]
        members[2].start()
        wait_until(lambda: all(m.assignment for m in members)
                   and sum(len(m.assignment) for m in members) == 4, 20,
                   message="three members sharing the four queues")
        for m, old in zip(members[:2], before, strict=True):
            assert set(m.assignment) <= old  # only moves to the newcomer
    finally:
        for m in members:
            m.stop()
