"""The coordinator walk-through of docs/consumer-groups.md, one test per case, on a fake clock."""

from __future__ import annotations

import pytest
from tidemq.broker.coordinator import CoordinatorError, GroupState

from tests.unit.coordinator.coord_harness import (
    GROUP,
    INITIAL_DELAY_MS,
    PROTOCOLS,
    REBALANCE_MS,
    Harness,
)

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE


def test_case1_first_rebalance_answers_everyone_together_after_the_delayed_join():
    h = Harness()
    assert h.state() is GroupState.DEAD  # a group nobody has joined yet is described as Dead

    first = h.join(client_id="c1")
    assert h.state() is PREPARING  # the first joiner moved the group and created the delay
    assert h.transitions == [(GROUP, EMPTY, PREPARING)]
    leader_id = h.coordinator.describe_group(GROUP).leader_id
    assert leader_id == "c1-1"  # added first, so leader

    later = [h.join(client_id="c2"), h.join(client_id="c3")]
    assert h.state() is PREPARING
    assert h.transitions == [(GROUP, EMPTY, PREPARING)]  # later joiners change nothing

    h.advance(INITIAL_DELAY_MS - 1)
    assert not any(f.done() for f in [first, *later])
    # New members arrived during the initial delay, so it is extended once more.
    h.advance(1)
    assert not any(f.done() for f in [first, *later])
    h.advance(INITIAL_DELAY_MS)
    assert all(f.done() for f in [first, *later])  # all answered on the same tick

    results = [f.result(timeout=0) for f in [first, *later]]
    assert {r.generation_id for r in results} == {1}
    assert {r.leader_id for r in results} == {"c1-1"}
    assert [r.member_id for r in results] == ["c1-1", "c2-2", "c3-3"]
    assert {r.protocol_name for r in results} == {"averagely"}
    leader, *followers = results
    assert leader.is_leader
    assert [(m.member_id, m.metadata) for m in leader.members] == [
        ("c1-1", b"topic=orders"),
        ("c2-2", b"topic=orders"),
        ("c3-3", b"topic=orders"),
    ]
    assert all(r.members == () for r in followers)  # the member list goes to the leader only
    assert h.state() is COMPLETING
    assert h.transitions[-1] == (GROUP, PREPARING, COMPLETING)


def test_case1_sync_waits_for_the_leader_then_every_member_gets_its_own_assignment():
    h = Harness()
    futures = [h.join(client_id=c) for c in ("c1", "c2", "c3")]
    h.advance_until_done(*futures)
    leader, f2, f3 = (f.result(timeout=0) for f in futures)

    follower_syncs = [
        h.coordinator.sync_group(GROUP, r.member_id, r.generation_id) for r in (f2, f3)
    ]
    assert not any(s.done() for s in follower_syncs)  # waiting for the leader's SyncGroup
    plan = {"c1-1": b"q0,q1", "c2-2": b"q2"}  # c3 deliberately left out
    leader_sync = h.coordinator.sync_group(GROUP, leader.member_id, 1, plan)

    assert leader_sync.result(timeout=0).assignment == b"q0,q1"
    assert follower_syncs[0].result(timeout=0).assignment == b"q2"
    assert follower_syncs[1].result(timeout=0).assignment == b""
    assert h.state() is STABLE
    # A late follower SyncGroup in Stable is answered at once.
    assert h.coordinator.sync_group(GROUP, "c2-2", 1).result(timeout=0).assignment == b"q2"


def test_case2_rebalance_leader_first_others_update_and_wait_with_it():
    h = Harness()
    h.form_stable_group("a", "b", "c")
    h.transitions.clear()

    leader_join = h.join(member_id="a-1", client_id="a")
    assert h.state() is PREPARING
    assert h.transitions == [(GROUP, STABLE, PREPARING)]
    assert not leader_join.done()

    b_join = h.join(member_id="b-2", client_id="b")
    assert h.state() is PREPARING
    assert not leader_join.done() and not b_join.done()

    c_join = h.join(member_id="c-3", client_id="c")  # last known member: delayed join completes
    results = [f.result(timeout=0) for f in (leader_join, b_join, c_join)]
    assert {r.generation_id for r in results} == {2}
    assert {r.leader_id for r in results} == {"a-1"}
    assert [m.member_id for m in results[0].members] == ["a-1", "b-2", "c-3"]
    assert results[1].members == () and results[2].members == ()
    assert h.transitions == [(GROUP, STABLE, PREPARING), (GROUP, PREPARING, COMPLETING)]


def test_case3_unchanged_follower_before_the_leader_gets_an_immediate_answer():
    h = Harness()
    h.form_stable_group("a", "b", "c")
    h.transitions.clear()

    early = h.join(member_id="b-2", client_id="b")
    answer = early.result(timeout=0)  # immediate: current generation and leader
    assert (answer.generation_id, answer.leader_id, answer.members) == (1, "a-1", ())
    assert h.state() is STABLE and h.transitions == []

    leader_join = h.join(member_id="a-1", client_id="a")  # the leader starts the rebalance
    assert h.state() is PREPARING
    c_join = h.join(member_id="c-3", client_id="c")  # arrives after the leader: waits
    assert not leader_join.done() and not c_join.done()

    b_again = h.join(member_id="b-2", client_id="b")  # b learns of the rebalance, rejoins
    results = [f.result(timeout=0) for f in (leader_join, c_join, b_again)]
    assert {r.generation_id for r in results} == {2}
    assert results[0].is_leader
    assert {m.member_id for m in results[0].members} == {"a-1", "b-2", "c-3"}


def test_case3_member_that_never_rejoins_is_removed_when_the_rebalance_times_out():
    h = Harness()
    h.form_stable_group("a", "b", "c")
    h.join(member_id="b-2", client_id="b").result(timeout=0)
    leader_join = h.join(member_id="a-1", client_id="a")
    c_join = h.join(member_id="c-3", client_id="c")

    # b keeps heartbeating (so its session stays alive) but ignores REBALANCE_IN_PROGRESS.
    for _ in range(REBALANCE_MS // 2_000 - 1):
        h.advance(2_000)
        with pytest.raises(CoordinatorError) as raised:
            h.coordinator.heartbeat(GROUP, "b-2", 1)
        assert raised.value.code == "REBALANCE_IN_PROGRESS"
    h.advance(1_999)
    assert not leader_join.done()
    h.advance(1)
    leader = leader_join.result(timeout=0)
    assert c_join.result(timeout=0).generation_id == leader.generation_id == 2
    assert [m.member_id for m in leader.members] == ["a-1", "c-3"]
    assert [m.member_id for m in h.coordinator.describe_group(GROUP).members] == ["a-1", "c-3"]


def test_case4_new_member_before_the_leader_starts_the_rebalance_and_leader_stays_leader():
    h = Harness()
    h.form_stable_group("a", "b")
    h.transitions.clear()

    newcomer = h.join(client_id="d")  # unknown member id, Stable group
    assert h.state() is PREPARING
    assert h.transitions == [(GROUP, STABLE, PREPARING)]
    assert h.coordinator.describe_group(GROUP).leader_id == "a-1"

    leader_join = h.join(member_id="a-1", client_id="a")
    assert not newcomer.done() and not leader_join.done()
    b_join = h.join(member_id="b-2", client_id="b")

    d, a, b = (f.result(timeout=0) for f in (newcomer, leader_join, b_join))
    assert d.member_id == "d-3"
    assert {r.leader_id for r in (a, b, d)} == {"a-1"}
    assert {r.generation_id for r in (a, b, d)} == {2}
    assert [m.member_id for m in a.members] == ["a-1", "b-2", "d-3"]
    assert b.members == () and d.members == ()
    assert h.state() is COMPLETING


def test_rebalance_of_an_empty_group_waits_the_initial_delay_even_for_a_single_member():
    h = Harness()
    only = h.join(client_id="solo")
    h.advance(INITIAL_DELAY_MS - 1)
    assert not only.done()
    h.advance(1)
    assert only.result(timeout=0).members[0].member_id == "solo-1"


def test_initial_delay_extensions_stop_at_the_rebalance_timeout():
    h = Harness()
    first = h.join(client_id="c0")
    waited = 0
    # A new consumer arrives every delay period: the join keeps extending, but not forever.
    while not first.done():
        h.join(client_id=f"c{waited}")
        h.advance(INITIAL_DELAY_MS)
        waited += INITIAL_DELAY_MS
        assert waited <= REBALANCE_MS + INITIAL_DELAY_MS
    assert waited >= REBALANCE_MS


def test_zero_initial_delay_answers_on_the_next_tick():
    h = Harness(initial_delay_ms=0)
    only = h.join(client_id="solo", protocols=PROTOCOLS)
    assert not only.done()
    h.advance(0)
    assert only.result(timeout=0).generation_id == 1
