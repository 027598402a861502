"""The role rules of a replica (tidemq.broker.replication.roles): examples and a hypothesis
run over histories of group states, as a watch may deliver them (late repeats included)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tidemq.broker.replication.roles import (
    MASTER,
    NO_MASTER,
    SLAVE,
    BecomeMaster,
    BecomeSlave,
    GroupState,
    LocalRole,
    UpdateInSync,
    after,
    decide,
    stepped_down,
)

ME = 1


def state(master, epoch, in_sync=(0, 1, 2)) -> GroupState:
    ha = f"10.0.0.{master}:10912" if master != NO_MASTER else ""
    addr = f"10.0.0.{master}:10911" if master != NO_MASTER else ""
    return GroupState(master, epoch, frozenset(in_sync), addr, ha)


def test_no_group_yet_means_wait_as_a_slave_of_nobody():
    assert decide(ME, LocalRole(), None) == BecomeSlave(0, "", "")
    assert decide(ME, LocalRole(SLAVE, 0), None) is None


def test_elected_replica_becomes_master_of_the_new_epoch():
    current = LocalRole(SLAVE, 1, "10.0.0.0:10912")
    assert decide(ME, current, state(ME, 2)) == BecomeMaster(2, frozenset({0, 1, 2}))


def test_master_follows_in_sync_changes_of_its_own_epoch():
    current = LocalRole(MASTER, 2, "", frozenset({0, 1, 2}))
    assert decide(ME, current, state(ME, 2, (1, 2))) == UpdateInSync(frozenset({1, 2}))
    assert decide(ME, current, state(ME, 2)) is None


def test_deposed_master_follows_the_new_one():
    current = LocalRole(MASTER, 2, "", frozenset({0, 1, 2}))
    assert decide(ME, current, state(0, 3)) == BecomeSlave(3, "10.0.0.0:10911", "10.0.0.0:10912")


def test_a_late_event_of_an_older_epoch_changes_nothing():
    assert decide(ME, LocalRole(SLAVE, 3, "10.0.0.0:10912"), state(ME, 2)) is None
    assert decide(ME, LocalRole(MASTER, 3), state(0, 2)) is None


def test_group_without_master_leaves_slaves_waiting():
    current = LocalRole(SLAVE, 2, "10.0.0.0:10912")
    assert decide(ME, current, state(NO_MASTER, 2)) == BecomeSlave(2, "", "")


def test_a_restarted_or_lease_lost_master_kept_by_the_controller_serves_again():
    assert decide(ME, LocalRole(), state(ME, 4)) == BecomeMaster(4, frozenset({0, 1, 2}))
    lost = stepped_down(LocalRole(MASTER, 4, "", frozenset({0, 1, 2})))
    assert lost == LocalRole(SLAVE, 4, "")
    assert decide(ME, lost, state(ME, 4)) == BecomeMaster(4, frozenset({0, 1, 2}))


@st.composite
def histories(draw):
    """Group states with one master per epoch and non-decreasing epochs, interleaved with
    re-deliveries of earlier states (a watch that reconnects, a re-read)."""
    states, epoch = [], 1
    for _ in range(draw(st.integers(1, 25))):
        if states and draw(st.booleans()) and draw(st.booleans()):
            states.append(draw(st.sampled_from(states)))  # a late repeat
            continue
        if draw(st.booleans()):
            epoch += 1
        master = draw(st.sampled_from([NO_MASTER, 0, 1, 2]))
        same_epoch = [s for s in states if s.epoch == epoch]
        if same_epoch:
            master = same_epoch[-1].master  # one master per epoch
        members = draw(st.sets(st.sampled_from([0, 1, 2])))
        in_sync = members | {master} if master != NO_MASTER else members
        states.append(state(master, epoch, in_sync))
    return states


@given(histories())
def test_a_replica_always_agrees_with_the_newest_state_it_has_seen(history):
    current = LocalRole()
    newest = None
    for group in history:
        action = decide(ME, current, group)
        if action is not None:
            current = after(current, action)
        assert decide(ME, current, group) is None or group.epoch < current.epoch  # settled
        if newest is None or group.epoch >= newest.epoch:
            newest = group
        # Acting as master only ever in an epoch the controller gave this replica.
        if current.role == MASTER:
            assert newest.master == ME and newest.epoch == current.epoch
        assert current.epoch == newest.epoch
        assert (current.role == MASTER) == (newest.master == ME)
