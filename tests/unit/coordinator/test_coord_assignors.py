"""Assignment strategies: hypothesis properties plus the reference examples from RocketMQ."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.coordinator import coordinator_for
from tidemq.common.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    QueueRef,
    averagely,
    averagely_by_circle,
    consistent_hash,
    get_assignor,
    sticky,
)
from tidemq.common.errors import InvalidArgument, ServiceUnavailable

queue_refs = st.builds(
    QueueRef, st.sampled_from(["broker-a", "broker-b", "broker-c"]), st.integers(0, 15)
)
queue_lists = st.lists(queue_refs, max_size=40, unique=True)
member_lists = st.lists(
    st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=9, unique=True
)
BALANCED = ["averagely", "averagely-by-circle", "sticky"]


def check_complete_and_disjoint(result, queues, members):
    assert set(result) == set(members)
    assigned = [q for qs in result.values() for q in qs]
    assert sorted(assigned) == sorted(queues)  # every queue exactly once
    assert all(qs == sorted(qs) for qs in result.values())


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@given(queues=queue_lists, members=member_lists)
def test_every_assignor_is_disjoint_and_complete(name, queues, members):
    result = ASSIGNORS[name](queues, members, None)
    check_complete_and_disjoint(result, queues, members)
    assert ASSIGNORS[name](list(reversed(queues)), list(reversed(members)), None) == result


@pytest.mark.parametrize("name", BALANCED)
@given(queues=queue_lists, members=member_lists)
def test_balanced_assignors_differ_by_at_most_one(name, queues, members):
    counts = [len(qs) for qs in ASSIGNORS[name](queues, members, None).values()]
    assert max(counts) - min(counts) <= 1


@given(queues=queue_lists, members=member_lists, newcomer=st.text("xyz", min_size=5))
def test_consistent_hash_moves_queues_only_to_a_new_member(queues, members, newcomer):
    before = consistent_hash(queues, members)
    after = consistent_hash(queues, [*members, newcomer])
    owner_before = {q: m for m, qs in before.items() for q in qs}
    for member, qs in after.items():
        for queue in qs:
            assert member in (owner_before[queue], newcomer)


def test_averagely_matches_rocketmq_reference():
    queues = [QueueRef("broker-a", i) for i in range(8)]
    result = averagely(queues, ["c3", "c1", "c2"])
    assert {m: [q.queue_id for q in qs] for m, qs in result.items()} == {
        "c1": [0, 1, 2],
        "c2": [3, 4, 5],
        "c3": [6, 7],
    }
    assert averagely(queues[:2], ["c1", "c2", "c3"])["c3"] == []


def test_averagely_by_circle_deals_round_robin():
    queues = [QueueRef("broker-a", i) for i in range(5)]
    result = averagely_by_circle(queues, ["c2", "c1"])
    assert {m: [q.queue_id for q in qs] for m, qs in result.items()} == {
        "c1": [0, 2, 4],
        "c2": [1, 3],
    }


def previous_for(queues, members):
    """Earlier assignments: some current members, some departed ones, overlaps and queues
    that no longer exist (the leader's view after topics and membership changed)."""
    holders = st.sampled_from([*members, "gone-1", "gone-2"])
    stale_queue = st.builds(QueueRef, st.just("broker-z"), st.integers(0, 3))
    owned = st.lists(st.sampled_from(queues) | stale_queue if queues else stale_queue, max_size=12)
    return st.dictionaries(holders, owned, max_size=len(members) + 2)


@settings(max_examples=150)
@given(queues=queue_lists, members=member_lists, data=st.data())
def test_sticky_is_balanced_and_moves_the_minimum(queues, members, data):
    previous = data.draw(previous_for(queues, members))
    result = sticky(queues, members, previous)
    check_complete_and_disjoint(result, queues, members)
    counts = [len(qs) for qs in result.values()]
    assert max(counts) - min(counts) <= 1

    # Valid previous ownership: queue still exists, member still present, first claim wins
    # (members in sorted order), exactly as documented.
    existing, kept, claimed = set(queues), {m: 0 for m in members}, set()
    owner_before = {}
    for member in sorted(set(previous) & set(members)):
        for queue in sorted(set(previous[member])):
            if queue in existing and queue not in claimed:
                claimed.add(queue)
                kept[member] += 1
                owner_before[queue] = member
    base, extra = divmod(len(queues), len(members))
    # Upper bound on queues that can stay put under balanced counts.
    best = sum(min(k, base) for k in kept.values()) + min(
        extra, sum(1 for k in kept.values() if k > base)
    )
    stayed = sum(1 for m, qs in result.items() for q in qs if owner_before.get(q) == m)
    assert stayed == best


@given(queues=queue_lists, members=member_lists)
def test_sticky_is_stable_when_nothing_changes(queues, members):
    first = sticky(queues, members, None)
    assert sticky(queues, members, first) == first


def test_sticky_moves_only_from_a_departed_member():
    queues = [QueueRef("broker-a", i) for i in range(6)]
    previous = {"c1": queues[0:2], "c2": queues[2:4], "c3": queues[4:6]}
    result = sticky(queues, ["c1", "c2"], previous)
    assert set(previous["c1"]) <= set(result["c1"])
    assert set(previous["c2"]) <= set(result["c2"])
    assert len(result["c1"]) == len(result["c2"]) == 3


def test_registry_and_unknown_name():
    assert get_assignor(DEFAULT_ASSIGNOR) is averagely
    assert set(ASSIGNORS) == {"averagely", "averagely-by-circle", "consistent-hash", "sticky"}
    with pytest.raises(InvalidArgument) as raised:
        get_assignor("random")
    assert raised.value.code == "UNKNOWN_ASSIGNOR"
    assert "averagely" in raised.value.message


def test_empty_inputs():
    for assignor in ASSIGNORS.values():
        assert assignor([], ["c1"], None) == {"c1": []}
        assert assignor([QueueRef("b", 0)], [], None) == {}


@settings(max_examples=200)
@given(group=st.text(min_size=1), masters=st.lists(st.text(min_size=1), min_size=1, max_size=8))
def test_coordinator_for_is_a_member_and_ignores_order(group, masters):
    chosen = coordinator_for(group, masters)
    assert chosen in masters
    assert coordinator_for(group, list(reversed(masters)) + masters) == chosen


def test_coordinator_for_is_pinned_across_processes_and_versions():
    # crc32 values are fixed forever; this would fail if someone switched to hash().
    masters = ["broker-a", "broker-b", "broker-c"]
    assert [coordinator_for(g, masters) for g in ("g0", "g1", "g2", "orders-consumers")] == [
        "broker-c",
        "broker-b",
        "broker-b",
        "broker-c",
    ]
    assert coordinator_for("orders-consumers", ["broker-b", "broker-a"]) == "broker-a"


def test_coordinator_for_without_masters_is_unavailable():
    with pytest.raises(ServiceUnavailable) as raised:
        coordinator_for("g", [])
    assert raised.value.code == "COORDINATOR_NOT_AVAILABLE"
