"""The controller's election and in-sync rules, one rule per test."""

from __future__ import annotations

import pytest
from tidemq.nameserver.controller.state import (
    GroupState,
    InvalidInSyncSet,
    NoEligibleReplica,
    NotMaster,
    StaleEpoch,
    alter_in_sync,
    elect,
    elect_preferred,
    initial,
)


def group(master: int, epoch: int, *in_sync: int) -> GroupState:
    return GroupState(master, epoch, frozenset(in_sync))


def test_initial_prefers_replica_zero_then_the_lowest_live_id():
    assert initial([2, 0, 1]) == group(0, 1, 0)
    assert initial([2, 1]) == group(1, 1, 1)
    with pytest.raises(NoEligibleReplica):
        initial([])


def test_a_group_the_store_forgot_starts_above_its_replicas_epochs_with_the_most_complete():
    assert initial({0: 100, 1: 300, 2: 300}, epoch_floor=7) == group(1, 8, 1)
    assert initial({0: 0, 1: 0}, epoch_floor=0) == group(0, 1, 0)


def test_an_election_goes_above_every_epoch_a_live_replica_reports():
    assert elect(group(0, 4, 0, 1), {1: 10}, epoch_floor=6).state.epoch == 7
    assert elect(group(0, 4, 0, 1), {1: 10}, epoch_floor=2).state.epoch == 5
    assert elect_preferred(group(0, 4, 0, 1), {0: 5, 1: 5}, 1, epoch_floor=9).state.epoch == 10


def test_clean_election_picks_the_most_complete_live_in_sync_replica():
    election = elect(group(0, 4, 0, 1, 2), {1: 100, 2: 300, 3: 900})
    assert election.clean and not election.possible_loss
    assert election.state == group(2, 5, 1, 2)  # 3 is longer but was never in sync
    assert election.old_master == 0


def test_clean_election_breaks_ties_on_the_lowest_id():
    assert elect(group(0, 1, 0, 1, 2), {2: 50, 1: 50}).state.master == 1


def test_preferred_replica_wins_when_eligible_else_the_best_one():
    assert elect(group(0, 1, 0, 1, 2), {1: 10, 2: 90}, preferred=1).state.master == 1
    assert elect(group(0, 1, 0, 1), {1: 10, 2: 90}, preferred=2).state.master == 1


def test_no_live_in_sync_replica_means_wait():
    with pytest.raises(NoEligibleReplica, match="disabled"):
        elect(group(0, 3, 0, 1), {2: 500})
    with pytest.raises(NoEligibleReplica):
        elect(group(0, 3, 0, 1), {}, unclean=True)


def test_unclean_election_takes_the_most_complete_live_replica_and_reports_it():
    election = elect(group(0, 3, 0, 1), {2: 500, 3: 700}, unclean=True)
    assert not election.clean and election.possible_loss
    assert election.state == group(3, 4, 3).replace(confirmed_offset=700)  # restarts there


def test_unclean_enabled_still_elects_cleanly_when_it_can():
    election = elect(group(0, 3, 0, 1), {1: 5, 2: 500}, unclean=True)
    assert election.clean and election.state.master == 1


def test_the_dead_leave_the_in_sync_set_at_an_election():
    assert elect(group(0, 1, 0, 1, 2), {1: 7}).state.in_sync == {1}


def test_operator_election_moves_leadership_to_an_in_sync_replica_only():
    state = group(0, 2, 0, 1)
    assert elect_preferred(state, {0: 9, 1: 9, 2: 9}, 1).state == group(1, 3, 0, 1)
    with pytest.raises(NoEligibleReplica, match="not in the in-sync set"):
        elect_preferred(state, {0: 9, 1: 9, 2: 9}, 2)
    with pytest.raises(NoEligibleReplica, match="not live"):
        elect_preferred(state, {0: 9}, 1)


def test_operator_election_without_a_choice_hands_over_to_another_replica():
    assert elect_preferred(group(0, 2, 0, 1, 2), {0: 9, 1: 5, 2: 8}, None).state.master == 2
    with pytest.raises(NoEligibleReplica, match="other than master"):
        elect_preferred(group(0, 2, 0, 1), {0: 9, 2: 9}, None)


def test_operator_election_of_the_live_master_changes_nothing():
    state = group(0, 2, 0, 1)
    election = elect_preferred(state, {0: 9, 1: 9}, 0)
    assert election.state is state and election.clean


def test_alter_in_sync_accepts_the_current_master_at_the_current_epoch():
    state = GroupState(0, 3, frozenset({0}), "a:1", "a:2")
    assert alter_in_sync(state, 3, 0, {0, 2}) == GroupState(0, 3, frozenset({0, 2}), "a:1", "a:2")


@pytest.mark.parametrize("epoch, master, new_set, error", [
    (2, 0, {0, 1}, StaleEpoch),        # a deposed master's late proposal
    (4, 0, {0, 1}, StaleEpoch),        # an epoch the controller never issued
    (3, 1, {0, 1}, NotMaster),
    (3, 0, {1, 2}, InvalidInSyncSet),  # the master must stay in the set
    (3, 0, {0, -1}, InvalidInSyncSet),
])
def test_alter_in_sync_refusals(epoch, master, new_set, error):
    with pytest.raises(error):
        alter_in_sync(group(0, 3, 0, 1), epoch, master, new_set)


def test_json_round_trip_matches_the_contract_shape():
    state = GroupState(1, 7, frozenset({2, 1}), "h:10911", "h:10912")
    assert state.to_json() == {"master": 1, "epoch": 7, "in_sync": [1, 2],
                               "master_addr": "h:10911", "master_ha_addr": "h:10912",
                               "incarnations": {}, "confirmed_offset": 0, "waiting_for": [],
                               "eligible_leaders": {}}
    assert GroupState.from_json(state.to_json()) == state
    counted = state.replace(incarnations={1: "s1:3", 2: "s2:1"}, confirmed_offset=4096,
                            waiting_for=frozenset({2}), eligible_leaders={0: "s0:2"})
    assert GroupState.from_json(counted.to_json()) == counted
    # a value an older controller wrote reads as "no incarnation recorded, nothing confirmed"
    assert GroupState.from_json({"master": 1, "epoch": 7, "in_sync": [1, 2],
                                 "master_addr": "h:10911", "master_ha_addr": "h:10912"}) == state
