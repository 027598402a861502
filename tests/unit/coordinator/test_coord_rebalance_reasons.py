"""Why each rebalance starts (the coordinator's `on_rebalance`, counted by the broker as
tidemq_broker_group_rebalances_total{reason}): one report per rebalance, naming the member
whose call or expiry caused it, and none for a rejoin that Kafka answers without one."""

from __future__ import annotations

from tidemq.broker import group_rpc, metrics
from tidemq.broker.coordinator import REBALANCE_REASONS, GroupState

from tests.unit.coordinator.coord_harness import GROUP, REBALANCE_MS, SESSION_MS, Harness


def reasons(h: Harness) -> list[tuple[str, str]]:
    return [(reason, member) for group, reason, member in h.rebalances if group == GROUP]


def test_a_new_member_starts_one_rebalance_however_many_join_in_it():
    h = Harness()
    joined = h.form_stable_group("c1", "c2")
    first = next(iter(joined.values())).member_id
    assert reasons(h) == [("member_joined", first)]   # the Empty group's first join only
    h.rebalances.clear()
    h.join(client_id="c3")
    h.join(client_id="c4")
    assert [r for r, _ in reasons(h)] == ["member_joined"]
    assert reasons(h)[0][1].startswith("c3-")


def test_an_unchanged_follower_rejoining_a_stable_group_starts_none():
    h = Harness()
    joined = h.form_stable_group("c1", "c2")
    follower = next(r for r in joined.values() if not r.is_leader)
    h.rebalances.clear()
    again = h.join(member_id=follower.member_id)
    assert again.result(timeout=0).generation_id == follower.generation_id
    assert h.state() is GroupState.STABLE
    assert reasons(h) == []


def test_the_leader_rejoining_and_changed_metadata_are_named():
    h = Harness()
    joined = h.form_stable_group("c1", "c2")
    leader = next(r for r in joined.values() if r.is_leader)
    follower = next(r for r in joined.values() if not r.is_leader)
    h.rebalances.clear()
    h.join(member_id=leader.member_id)
    assert reasons(h) == [("leader_rejoined", leader.member_id)]
    h.join(member_id=follower.member_id)   # already preparing: no second report
    assert reasons(h) == [("leader_rejoined", leader.member_id)]

    h = Harness()
    joined = h.form_stable_group("c1", "c2")
    follower = next(r for r in joined.values() if not r.is_leader)
    h.rebalances.clear()
    h.join(member_id=follower.member_id, protocols=[("averagely", b"topic=other")])
    assert reasons(h) == [("metadata_changed", follower.member_id)]


def test_leave_and_expiries_are_named():
    h = Harness()
    joined = h.form_stable_group("c1", "c2", "c3")
    members = [r.member_id for r in joined.values()]
    h.rebalances.clear()
    h.coordinator.leave_group(GROUP, members[2])
    assert reasons(h) == [("member_left", members[2])]

    h = Harness()
    joined = h.form_stable_group("c1", "c2")
    leader = next(r for r in joined.values() if r.is_leader)
    follower = next(r for r in joined.values() if not r.is_leader)
    h.rebalances.clear()
    for _ in range(SESSION_MS // 1_000 + 1):   # only the leader keeps heartbeating
        h.coordinator.heartbeat(GROUP, leader.member_id, leader.generation_id)
        h.advance(1_000)
        if reasons(h):
            break
    assert reasons(h) == [("session_expired", follower.member_id)]


def test_a_member_waiting_for_its_assignment_past_the_rebalance_timeout_is_sync_expired():
    h = Harness()
    leader_join = h.join(client_id="c1", session_ms=REBALANCE_MS * 2)
    follower_join = h.join(client_id="c2")
    h.advance_until_done(leader_join, follower_join)
    leader, follower = leader_join.result(0), follower_join.result(0)
    assert leader.is_leader
    h.coordinator.sync_group(GROUP, follower.member_id, follower.generation_id)  # waits
    h.rebalances.clear()
    h.advance(REBALANCE_MS + 1)   # the leader never syncs; its own session is longer
    assert reasons(h) == [("sync_expired", follower.member_id)]


def test_every_reason_is_a_known_one():
    assert len(set(REBALANCE_REASONS)) == len(REBALANCE_REASONS) == 6


def test_the_broker_counts_each_reason():
    def count(reason: str) -> float:
        return metrics.GROUP_REBALANCES.labels(reason)._value.get()

    before = {reason: count(reason) for reason in REBALANCE_REASONS}
    group_rpc.rebalance_started(GROUP, "member_left", "c1-1")
    assert {r: count(r) - before[r] for r in REBALANCE_REASONS} == {
        r: (1 if r == "member_left" else 0) for r in REBALANCE_REASONS}
