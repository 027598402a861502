"""Generation-fenced offset commits (commit_fence.py) on the coordinating broker: a member of the
current generation commits, a stale generation is ILLEGAL_GENERATION, an unknown member
UNKNOWN_MEMBER_ID, a group waiting for its SyncGroup REBALANCE_IN_PROGRESS, a group preparing
a rebalance still takes its current generation's commits, and -1 is never checked."""

from __future__ import annotations

import pytest
from tidemq.broker.commit_fence import CommitFence
from tidemq.broker.coordinator import GroupState
from tidemq.common.errors import TideMQError

from tests.unit.coordinator.coord_harness import GROUP, Harness


@pytest.fixture
def harness():
    return Harness()


def fence_for(harness: Harness) -> CommitFence:
    fence = CommitFence("broker-a", harness.coordinator, name_servers=[])
    fence._coordinator_of = lambda group: ("broker-a", "127.0.0.1:1")   # this broker
    return fence


def attempt(fence: CommitFence, generation: int, member: str) -> str:
    done = []
    try:
        fence.commit(GROUP, generation, member, lambda: done.append(True))
    except TideMQError as exc:
        assert not done
        return exc.code
    assert done == [True]
    return "NONE"


def test_only_the_current_generations_members_commit(harness):
    joined = harness.form_stable_group("c1", "c2")
    fence = fence_for(harness)
    member, generation = joined["c1"].member_id, joined["c1"].generation_id
    assert attempt(fence, generation, member) == "NONE"
    assert attempt(fence, generation - 1, member) == "ILLEGAL_GENERATION"
    assert attempt(fence, generation, "stranger") == "UNKNOWN_MEMBER_ID"
    assert attempt(fence, -1, "") == "NONE"
    assert attempt(fence, 0, "") == "UNKNOWN_MEMBER_ID"


def test_commits_during_a_rebalance(harness):
    joined = harness.form_stable_group("c1")
    fence = fence_for(harness)
    member, generation = joined["c1"].member_id, joined["c1"].generation_id
    harness.join(client_id="c2")                        # c2 arrives: PreparingRebalance
    assert harness.state() is GroupState.PREPARING_REBALANCE
    assert attempt(fence, generation, member) == "NONE"   # commits before it rejoins
    rejoin = harness.join(member_id=member)
    harness.advance_until_done(rejoin)
    assert harness.state() is GroupState.COMPLETING_REBALANCE
    new_generation = rejoin.result(timeout=0).generation_id
    assert attempt(fence, new_generation, member) == "REBALANCE_IN_PROGRESS"
    assert attempt(fence, generation, member) == "ILLEGAL_GENERATION"


def test_an_unknown_group_has_no_members(harness):
    assert attempt(fence_for(harness), 3, "m") == "UNKNOWN_MEMBER_ID"
