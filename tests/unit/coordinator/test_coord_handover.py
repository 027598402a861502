"""Coordinator handover (coordinator/handover.py): a replica that takes over from the groups a
master handed it answers the members as the master would have (same generation, leader and
assignments, heartbeats accepted, sessions restarted), and a replica that is not master
answers NOT_COORDINATOR. Property: handover -> proto -> take_over is lossless for any mix of
Stable groups."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.broker.coordinator import CoordinatorError, GroupState
from tidemq.broker.group_rpc import handovers_from_pb, handovers_pb

from tests.unit.coordinator.coord_harness import GROUP, SESSION_MS, Harness


def handed_over(source: Harness) -> Harness:
    target = Harness()
    target.clock.now = source.clock.now + 123_456   # another process, another clock
    target.coordinator.take_over(handovers_from_pb(handovers_pb(
        source.coordinator.handovers())))
    return target


def test_the_new_coordinator_carries_the_generation_on():
    old = Harness()
    members = old.form_stable_group("a", "b", "c")
    new = handed_over(old)
    assert new.coordinator.describe_group(GROUP) == old.coordinator.describe_group(GROUP)
    assert sorted(m.client_software for m in new.coordinator.describe_group(GROUP).members) \
        == ["a 1.0", "b 1.0", "c 1.0"]
    for result in members.values():
        new.coordinator.heartbeat(GROUP, result.member_id, result.generation_id)
    assert new.state() is GroupState.STABLE
    assert new.transitions == []   # restored, not replayed


def test_members_get_a_fresh_session_and_the_silent_ones_expire():
    old = Harness()
    members = old.form_stable_group("a", "b")
    old.advance(SESSION_MS - 1_000)   # nearly expired on the old coordinator
    new = handed_over(old)
    a = members["a"]
    new.advance(SESSION_MS // 2)
    new.coordinator.heartbeat(GROUP, a.member_id, a.generation_id)
    assert new.state() is GroupState.STABLE
    new.advance(SESSION_MS // 2 + 1)   # b never found the new coordinator
    assert new.state() is GroupState.PREPARING_REBALANCE
    assert [m.member_id for m in new.coordinator.describe_group(GROUP).members] == [a.member_id]


def test_a_group_in_a_rebalance_is_not_handed_over():
    old = Harness()
    old.join(client_id="a")
    assert old.coordinator.handovers() == []


def test_a_replica_that_is_not_master_does_not_coordinate():
    old = Harness()
    members = old.form_stable_group("a")
    old.coordinator.hand_off()
    with pytest.raises(CoordinatorError) as refused:
        old.coordinator.heartbeat(GROUP, members["a"].member_id, members["a"].generation_id)
    assert refused.value.code == "NOT_COORDINATOR"
    joining = old.join(client_id="late")
    assert joining.exception(timeout=0).code == "NOT_COORDINATOR"


@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4))
def test_handover_is_lossless(member_counts):
    old = Harness()
    joining = {f"group-{index}": [old.join(client_id=f"c{i}", group=f"group-{index}")
                                  for i in range(count)]
               for index, count in enumerate(member_counts)}
    old.advance_until_done(*(f for futures in joining.values() for f in futures))
    for group, futures in joining.items():
        joined = [f.result(timeout=0) for f in futures]
        plan = {r.member_id: f"{group}/{r.member_id}".encode() for r in joined}
        for r in joined:
            old.coordinator.sync_group(group, r.member_id, r.generation_id,
                                       plan if r.is_leader else {})
    new = handed_over(old)
    for index in range(len(member_counts)):
        group = f"group-{index}"
        assert new.coordinator.describe_group(group) == old.coordinator.describe_group(group)
        assert new.state(group) is GroupState.STABLE
