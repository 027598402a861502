"""InSyncTracker: the confirmed offset, shrinking members that fell behind, expanding with
caught-up slaves; a hypothesis run of random acks against a direct model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.store.ha import InSyncTracker


def test_confirmed_offset_is_the_smallest_log_end_of_the_members():
    tracker = InSyncTracker(0, {0, 1, 2}, lag_max_ms=1000, min_in_sync=2)
    assert tracker.confirmed_offset(500) == 0          # nobody reported yet
    tracker.on_ack(1, 400, 500, now_ms=0)
    tracker.on_ack(2, 300, 500, now_ms=0)
    assert tracker.confirmed_offset(500) == 300
    tracker.on_ack(3, 10, 500, now_ms=0)                # a non-member does not hold it back
    assert tracker.confirmed_offset(500) == 300
    tracker.apply({0, 1}, now_ms=0)
    assert tracker.confirmed_offset(500) == 400
    tracker.apply({0}, now_ms=0)
    assert tracker.confirmed_offset(500) == 500 and not tracker.writable()


def test_a_member_not_caught_up_for_lag_max_leaves_and_a_caught_up_slave_joins():
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=1000, min_in_sync=1)
    tracker.connect(1, 0, now_ms=0)
    tracker.connect(2, 0, now_ms=0)
    tracker.on_ack(1, 100, 100, now_ms=500)             # caught up at 500
    tracker.on_ack(1, 150, 400, now_ms=1400)            # behind since
    assert tracker.shrink_candidates(1400) == set()
    assert tracker.shrink_candidates(1501) == {1}
    assert tracker.expand_candidates(tracker.confirmed_offset(400)) == set()
    tracker.on_ack(2, 150, 400, now_ms=1500)
    assert tracker.expand_candidates(150) == {2}        # reached the confirmed offset
    tracker.disconnect(2)
    assert tracker.expand_candidates(150) == set()      # only connected slaves join
    assert tracker.lag_bytes(400) == {1: 250, 2: 250}


acks = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 1000), st.integers(0, 50)),
                max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(1, 4)), acks, st.integers(1, 300), st.integers(1, 5))
def test_tracker_matches_a_direct_model(members, events, lag_max, min_in_sync):
    tracker = InSyncTracker(0, members, lag_max_ms=lag_max, min_in_sync=min_in_sync)
    acked, caught_up, now, master_end = {}, {}, 0, 0
    for replica, offset, step in events:
        now += step
        master_end = max(master_end, offset)
        if replica not in acked:
            tracker.connect(replica, 0, now)
        caught_up.setdefault(replica, now)
        tracker.on_ack(replica, offset, master_end, now)
        acked[replica] = offset
        if offset >= master_end:
            caught_up[replica] = now
    in_sync = members | {0}
    confirmed = min([master_end] + [acked.get(r, 0) for r in in_sync if r != 0])
    assert tracker.confirmed_offset(master_end) == confirmed
    assert tracker.writable() == (len(in_sync) >= min_in_sync)
    assert tracker.shrink_candidates(now) == {
        r for r in members if now - caught_up.get(r, float("-inf")) > lag_max}
    joining = tracker.expand_candidates(confirmed)
    assert joining == {r for r in acked if r not in in_sync and acked[r] >= confirmed}
    tracker.apply((in_sync - tracker.shrink_candidates(now)) | joining, now)
    assert 0 in tracker.in_sync and joining <= tracker.in_sync
    assert tracker.confirmed_offset(master_end) >= confirmed or not joining
