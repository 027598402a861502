"""Membership rules: session expiry, leave, and every error code the coordinator answers."""

from __future__ import annotations

import threading

import pytest
from tidemq.broker.coordinator import (
    CoordinatorConfig,
    CoordinatorError,
    GroupCoordinator,
    GroupState,
)
from tidemq.common.errors import TideMQError

from tests.support.clock import FakeClock
from tests.unit.coordinator.coord_harness import (
    GROUP,
    INITIAL_DELAY_MS,
    PROTOCOLS,
    REBALANCE_MS,
    SESSION_MS,
    Harness,
)


def error_of(call) -> CoordinatorError:
    with pytest.raises(CoordinatorError) as raised:
        call()
    return raised.value


def future_error(future) -> CoordinatorError:
    exc = future.exception(timeout=0)
    assert isinstance(exc, CoordinatorError), exc
    return exc


def test_missed_session_removes_the_member_and_rebalances_the_rest():
    h = Harness()
    h.form_stable_group("a", "b")
    for _ in range(3):  # b heartbeats every 3 s, the leader a stays silent
        h.advance(3_000)
        h.coordinator.heartbeat(GROUP, "b-2", 1)
    h.advance(SESSION_MS - 9_000 - 1)
    assert h.state() is GroupState.STABLE
    h.advance(1)
    assert h.state() is GroupState.PREPARING_REBALANCE  # a's 10 s session lapsed at 12 s
    description = h.coordinator.describe_group(GROUP)
    assert [m.member_id for m in description.members] == ["b-2"]
    assert description.leader_id == "b-2"  # leadership handed to the oldest survivor

    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "b-2", 1)).code == (
        "REBALANCE_IN_PROGRESS"
    )
    rejoined = h.join(member_id="b-2", client_id="b").result(timeout=0)
    assert (rejoined.generation_id, rejoined.leader_id) == (2, "b-2")
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "a-1", 1)).code == "UNKNOWN_MEMBER_ID"


def test_heartbeats_keep_a_member_forever():
    h = Harness()
    h.form_stable_group("a")
    for _ in range(20):
        h.advance(SESSION_MS - 1)
        h.coordinator.heartbeat(GROUP, "a-1", 1)
    assert h.state() is GroupState.STABLE


def test_member_blocked_in_join_is_not_expired_by_its_session():
    h = Harness()
    h.form_stable_group("a", "b")
    a_join = h.join(member_id="a-1", client_id="a")
    h.advance(SESSION_MS + 1)  # a waits in JoinGroup; b is silent and expires
    assert a_join.result(timeout=0).members[0].member_id == "a-1"
    assert [m.member_id for m in h.coordinator.describe_group(GROUP).members] == ["a-1"]


def test_leave_removes_the_member_and_triggers_a_rebalance():
    h = Harness()
    h.form_stable_group("a", "b")
    h.coordinator.leave_group(GROUP, "b-2")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "a-1", 1)).code == (
        "REBALANCE_IN_PROGRESS"
    )
    result = h.join(member_id="a-1", client_id="a").result(timeout=0)
    assert (result.generation_id, [m.member_id for m in result.members]) == (2, ["a-1"])


def test_last_member_leaving_empties_the_group_and_fails_nothing_else():
    h = Harness()
    h.form_stable_group("a")
    h.coordinator.leave_group(GROUP, "a-1")
    description = h.coordinator.describe_group(GROUP)
    assert (description.state, description.generation_id, description.leader_id) == (
        GroupState.EMPTY,
        2,
        "",
    )
    assert error_of(lambda: h.coordinator.leave_group(GROUP, "a-1")).code == "UNKNOWN_MEMBER_ID"


def test_leaving_while_others_wait_in_sync_sends_them_back_to_rejoin():
    h = Harness()
    futures = [h.join(client_id=c) for c in ("a", "b", "c")]
    h.advance_until_done(*futures)
    b_sync = h.coordinator.sync_group(GROUP, "b-2", 1)
    h.coordinator.leave_group(GROUP, "c-3")
    assert future_error(b_sync).code == "REBALANCE_IN_PROGRESS"
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_stale_generation_is_illegal_generation():
    h = Harness()
    h.form_stable_group("a", "b")
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "a-1", 0)).code == "ILLEGAL_GENERATION"
    assert future_error(h.coordinator.sync_group(GROUP, "b-2", 7)).code == "ILLEGAL_GENERATION"
    a = h.join(member_id="a-1", client_id="a")
    h.join(member_id="b-2", client_id="b")
    assert a.result(timeout=0).generation_id == 2
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "b-2", 1)).code == "ILLEGAL_GENERATION"


def test_unknown_member_id_everywhere():
    h = Harness()
    h.form_stable_group("a")
    assert future_error(h.join(member_id="ghost-9")).code == "UNKNOWN_MEMBER_ID"
    assert future_error(h.join(member_id="ghost-9", group="no-such-group")).code == (
        "UNKNOWN_MEMBER_ID"
    )
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "ghost-9", 1)).code == (
        "UNKNOWN_MEMBER_ID"
    )
    assert future_error(h.coordinator.sync_group(GROUP, "ghost-9", 1)).code == "UNKNOWN_MEMBER_ID"
    assert error_of(lambda: h.coordinator.leave_group("nope", "ghost-9")).code == (
        "UNKNOWN_MEMBER_ID"
    )
    assert h.state() is GroupState.STABLE  # bad calls changed nothing


def test_inconsistent_group_protocol():
    h = Harness()
    h.form_stable_group("a")
    sticky_only = [("sticky", b"")]
    assert future_error(h.join(protocols=sticky_only)).code == "INCONSISTENT_GROUP_PROTOCOL"
    assert future_error(h.join(protocols=[])).code == "INCONSISTENT_GROUP_PROTOCOL"
    other_type = h.coordinator.join_group(GROUP, "", PROTOCOLS, protocol_type="connect")
    assert future_error(other_type).code == "INCONSISTENT_GROUP_PROTOCOL"
    # A sole member may change protocol freely (nobody to be consistent with).
    changed = h.join(member_id="a-1", protocols=sticky_only)
    h.advance(REBALANCE_MS)
    assert changed.result(timeout=0).protocol_name == "sticky"


def test_protocol_is_chosen_by_vote_among_common_protocols():
    h = Harness()
    both = [("sticky", b"s"), ("averagely", b"a")]
    futures = [
        h.join(client_id="a", protocols=[("averagely", b"a"), ("sticky", b"s")]),
        h.join(client_id="b", protocols=both),
        h.join(client_id="c", protocols=both + [("consistent-hash", b"")]),
    ]
    h.advance_until_done(*futures)
    leader = futures[0].result(timeout=0)
    assert leader.protocol_name == "sticky"
    assert [m.metadata for m in leader.members] == [b"s", b"s", b"s"]


def test_rebalance_in_progress_for_sync_and_heartbeat():
    h = Harness()
    h.form_stable_group("a", "b")
    h.join(client_id="c")  # Stable -> PreparingRebalance
    assert future_error(h.coordinator.sync_group(GROUP, "a-1", 1)).code == "REBALANCE_IN_PROGRESS"
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "b-2", 1)).code == (
        "REBALANCE_IN_PROGRESS"
    )
    a = h.join(member_id="a-1")
    h.join(member_id="b-2")
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "b-2", 2)).code == (
        "REBALANCE_IN_PROGRESS"
    )
    assert a.result(timeout=0).generation_id == 2


def test_join_arguments_are_validated_with_precise_codes():
    h = Harness()
    for bad in ([], [("", b"")], [("averagely", "text")], [("a", b""), ("a", b"")]):
        assert future_error(h.join(protocols=bad)).code == "INCONSISTENT_GROUP_PROTOCOL"
    assert h.coordinator.list_groups() == []  # rejected joins create no group
    assert future_error(h.join(group="")).code == "INVALID_GROUP_ID"
    assert future_error(h.join(session_ms=50)).code == "INVALID_SESSION_TIMEOUT"
    assert future_error(h.join(session_ms=10**9)).code == "INVALID_SESSION_TIMEOUT"
    assert "outside the allowed" in future_error(h.join(session_ms=50)).message


def test_dead_group():
    h = Harness()
    h.form_stable_group("a")
    assert error_of(lambda: h.coordinator.delete_group(GROUP)).code == "NON_EMPTY_GROUP"
    assert error_of(lambda: h.coordinator.delete_group("nope")).code == "GROUP_ID_NOT_FOUND"
    h.coordinator.leave_group(GROUP, "a-1")
    h.coordinator.delete_group(GROUP)
    assert h.transitions[-1] == (GROUP, GroupState.EMPTY, GroupState.DEAD)
    assert h.state() is GroupState.DEAD
    assert h.coordinator.list_groups() == []
    # A fresh join recreates the group from scratch.
    again = h.join(client_id="z")
    h.advance(INITIAL_DELAY_MS)
    assert again.result(timeout=0).generation_id == 1


def test_calls_racing_with_removal_see_coordinator_not_available():
    h = Harness()
    h.form_stable_group("a")
    # Simulates a call that looked the group up just before another thread made it Dead.
    h.coordinator._groups[GROUP].transition_to(GroupState.DEAD)
    assert future_error(h.join(member_id="a-1")).code == "COORDINATOR_NOT_AVAILABLE"
    assert error_of(lambda: h.coordinator.heartbeat(GROUP, "a-1", 1)).code == (
        "COORDINATOR_NOT_AVAILABLE"
    )
    assert error_of(lambda: h.coordinator.leave_group(GROUP, "a-1")).code == (
        "COORDINATOR_NOT_AVAILABLE"
    )
    h.advance(SESSION_MS * 2)  # tick ignores Dead groups
    assert h.state() is GroupState.DEAD


def test_unload_fails_waiting_calls_with_not_coordinator():
    h = Harness()
    h.form_stable_group("a", "b")
    waiting = h.join(member_id="a-1")
    h.coordinator.unload_all()
    assert future_error(waiting).code == "NOT_COORDINATOR"
    assert h.transitions[-1][2] is GroupState.DEAD
    assert h.coordinator.list_groups() == []


def test_superseded_join_fails_the_older_call():
    h = Harness()
    h.form_stable_group("a", "b")
    first = h.join(member_id="a-1")
    second = h.join(member_id="a-1")
    assert future_error(first).code == "REBALANCE_IN_PROGRESS"
    assert not second.done()


def test_errors_carry_transport_status_for_the_grpc_layer():
    exc = CoordinatorError("REBALANCE_IN_PROGRESS", "group g is rebalancing")
    assert isinstance(exc, TideMQError)
    assert (exc.code, exc.grpc_status.name, exc.http_status) == (
        "REBALANCE_IN_PROGRESS",
        "ABORTED",
        409,
    )
    assert CoordinatorError("UNKNOWN_MEMBER_ID", "x").grpc_status.name == "NOT_FOUND"
    with pytest.raises(ValueError):
        CoordinatorError("NO_SUCH_CODE", "x")


def test_describe_and_list():
    h = Harness()
    h.form_stable_group("a", "b")
    description = h.coordinator.describe_group(GROUP)
    assert description.protocol_type == "consumer"
    assert description.protocol_name == "averagely"
    assert [(m.member_id, m.assignment, m.metadata) for m in description.members] == [
        ("a-1", b"a-1", b"topic=orders"),
        ("b-2", b"b-2", b"topic=orders"),
    ]
    h.join(client_id="x", group="another")
    assert [(g.group_id, g.state) for g in h.coordinator.list_groups()] == [
        ("another", GroupState.PREPARING_REBALANCE),
        (GROUP, GroupState.STABLE),
    ]


def test_done_callbacks_may_call_back_into_the_coordinator():
    h = Harness()
    seen = []
    first = h.join(client_id="a")
    first.add_done_callback(lambda f: seen.append(h.coordinator.describe_group(GROUP).state))
    h.advance(INITIAL_DELAY_MS)
    assert seen == [GroupState.COMPLETING_REBALANCE]


def test_concurrent_joins_from_many_threads_land_in_one_generation():
    clock = FakeClock(0)
    coordinator = GroupCoordinator(
        CoordinatorConfig(initial_rebalance_delay_ms=100, min_session_timeout_ms=1),
        now_ms=clock,
    )
    futures, barrier = [], threading.Barrier(8)

    def consumer():
        barrier.wait()
        futures.append(coordinator.join_group(GROUP, "", PROTOCOLS, session_timeout_ms=1_000))

    threads = [threading.Thread(target=consumer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(futures) == 8
    while not all(f.done() for f in futures):
        clock.advance(100)
        coordinator.tick()
        assert clock() < 10_000
    results = [f.result(timeout=0) for f in futures]
    assert {r.generation_id for r in results} == {1}
    assert len({r.member_id for r in results}) == 8
    assert sum(len(r.members) for r in results) == 8  # exactly one leader got the list
