"""In sync means this copy of the data (issue #36): the controller's rules with incarnations
and the group's confirmed offset, as examples and as a hypothesis model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.configclient.replication import NO_MASTER, GroupState
from tidemq.nameserver.controller.state import (
    NoEligibleReplica,
    alter_in_sync,
    elect,
    elect_unclean,
    reconcile,
    refresh,
    wait,
)
from tidemq.nameserver.controller.store import LiveReplica

STATE = GroupState(0, 1, frozenset({0, 2}), incarnations={0: "a:1", 2: "c:1"},
                   confirmed_offset=1000)


def test_a_member_back_with_a_wiped_disk_leaves_the_set_and_is_never_elected():
    state = refresh(STATE, {0: 1000, 2: 0}, {0: "a:1", 2: "new:1"})
    assert state.in_sync == {0} and 2 not in state.incarnations
    with pytest.raises(NoEligibleReplica, match="confirmed offset 1000"):
        elect(state, {2: 0}, incarnations={2: "new:1"})   # master lost: the group waits
    waiting = wait(state, {2: 0})
    assert waiting.waiting_for == {0} and waiting.master == 0


def test_an_unclean_restart_below_the_confirmed_offset_leaves_the_set():
    assert refresh(STATE, {0: 1000, 2: 900}, {0: "a:1", 2: "c:2"}).in_sync == {0}
    kept = refresh(STATE, {0: 1000, 2: 1000}, {0: "a:1", 2: "c:2"})
    assert kept.in_sync == {0, 2} and kept.incarnations[2] == "c:2"


def test_the_old_master_back_with_its_copy_is_elected_and_a_wiped_one_deposed():
    assert elect(STATE, {0: 1200}, incarnations={0: "a:2"}).state.master == 0
    wiped = refresh(STATE, {0: 0}, {0: "z:1"})
    assert wiped.master not in wiped.in_sync
    deposed = wait(wiped, {0: 0})
    assert deposed.master == NO_MASTER and deposed.epoch == 2


def test_the_confirmed_offset_only_rises():
    assert refresh(STATE, {0: 5000}, {0: "a:1"}, confirmed=4000).confirmed_offset == 4000
    assert refresh(STATE, {0: 5000}, {0: "a:1"}, confirmed=10).confirmed_offset == 1000


def test_a_joining_member_must_be_counted_under_its_live_incarnation():
    state = STATE.replace(in_sync=frozenset({0}), incarnations={0: "a:1"})
    with pytest.raises(Exception, match="new incarnation"):
        alter_in_sync(state, 1, 0, {0, 2}, {0: "a:1", 2: "c:1"}, {2: "c:2"})
    assert alter_in_sync(state, 1, 0, {0, 2}, {2: "c:2"}, {2: "c:2"}).incarnations[2] == "c:2"


def test_the_forced_unclean_election_says_what_may_be_lost():
    election = elect_unclean(STATE, {2: 400}, incarnations={2: "new:1"})
    assert election.state.master == 2 and election.state.in_sync == {2}
    assert election.lost_bytes == 600 and election.state.confirmed_offset == 400
    assert not election.clean


@given(st.dictionaries(st.integers(0, 2), st.tuples(st.integers(0, 3000),
                                                     st.sampled_from(["a:1", "a:2", "b:1",
                                                                      "c:1", "c:2", "z:1"])),
                       min_size=1),
       st.integers(0, 2000))
def test_a_clean_election_never_goes_below_the_confirmed_offset_nor_to_another_copy(live,
                                                                                  confirmed):
    state = GroupState(0, 3, frozenset({0, 1, 2}),
                       incarnations={0: "a:1", 1: "b:1", 2: "c:1"}, confirmed_offset=confirmed)
    ends = {r: end for r, (end, _) in live.items()}
    incarnations = {r: inc for r, (_, inc) in live.items()}
    state = refresh(state, ends, incarnations)
    try:
        election = elect(state, ends, incarnations=incarnations)
    except NoEligibleReplica:
        return
    master = election.state.master
    same_process = incarnations[master] == {0: "a:1", 1: "b:1", 2: "c:1"}[master]
    assert same_process or ends[master] >= confirmed
    assert incarnations[master].split(":")[0] == "abc"[master]


# -- proof of life: a live key outlives its process ---------------------------------------------
def key(replica: int, log_end: int, incarnation: str, revision: int, *, epoch: int = 1,
        confirmed: int = -1) -> LiveReplica:
    """A live key as a broker that rewrites it every refresh leaves it (`fence_ms` > 0)."""
    return LiveReplica("g", replica, log_end=log_end, epoch=epoch, fence_ms=3000,
                       quorum_acks=True, incarnation=incarnation, confirmed=confirmed,
                       mod_revision=revision)


def test_a_killed_replicas_old_key_does_not_elect_it():
    """The colleague's sequence: master 0 frozen, member 2 killed and wiped while its old key
    (old incarnation) is still valid, master 0's key expires at revision 50. Replica 2's key
    was last written at 40: it never proves it is alive, so it is never elected; the group
    keeps 0 and 2 recorded, and once 2's new (wiped) key shows, it waits for 0."""
    live = {2: key(2, 1000, "c:1", 40)}
    decision = reconcile(STATE, live, lost_at=50)
    assert decision.election is None and decision.pending == {2} and decision.needs_master
    assert decision.state.in_sync == {0, 2}            # nothing dropped, nothing written wrong
    expired = reconcile(STATE, {}, lost_at=50)         # its key expires
    assert expired.election is None and expired.state.in_sync == {0, 2}
    back = reconcile(expired.state, {2: key(2, 0, "new:1", 60)}, lost_at=50)
    assert back.election is None and back.state.in_sync == {0}
    assert back.state.waiting_for == {0} and back.state.master == 0


def test_a_replica_that_renews_after_the_loss_is_elected_and_keeps_the_others():
    live = {1: key(1, 1000, "b:1", 45), 2: key(2, 1000, "c:1", 40)}
    state = STATE.replace(in_sync=frozenset({0, 1, 2}),
                          incarnations={0: "a:1", 1: "b:1", 2: "c:1"})
    assert reconcile(state, live, lost_at=50).pending == {1, 2}
    live[1] = key(1, 1000, "b:1", 51)
    decision = reconcile(state, live, lost_at=50)
    assert decision.election is not None and decision.election.clean
    assert decision.state.master == 1 and decision.state.in_sync == {1, 2}
    assert not decision.needs_master


def test_no_unclean_election_while_an_in_sync_candidate_may_still_prove_it_is_alive():
    live = {1: key(1, 5000, "b:1", 51), 2: key(2, 1000, "c:1", 40)}   # 1 is not a member
    decision = reconcile(STATE, live, lost_at=50, unclean=True)
    assert decision.election is None and decision.pending == {2}
    live[2] = key(2, 1000, "c:1", 52)
    assert reconcile(STATE, live, lost_at=50, unclean=True).election.clean


def test_a_serving_master_needs_no_proof_and_a_broker_that_does_not_renew_counts_as_live():
    assert not reconcile(STATE, {0: key(0, 1000, "a:1", 10)}, lost_at=50).needs_master
    legacy = LiveReplica("g", 2, log_end=1000, epoch=1, incarnation="c:1", mod_revision=10)
    assert reconcile(STATE, {2: legacy}, lost_at=50).state.master == 2
