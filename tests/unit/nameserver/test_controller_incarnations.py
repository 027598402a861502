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
    refresh,
    wait,
)

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
