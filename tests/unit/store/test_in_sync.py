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


def test_a_member_back_without_its_copy_lags_since_first_heard_never_infinitely():
    """`fell_behind` marks a member that never caught up under this master (another store
    id at its handshake, a rebuild); its lag in ms is then counted from when the tracker first
    heard it — a finite number GetBrokerInfo and the lag gauge can carry (int(inf) raised
    OverflowError there, so the master answered GetBrokerInfo with an internal error while such
    a slave copied)."""
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=1000, min_in_sync=1)
    tracker.incarnations[1] = "old-store:1"
    assert tracker.connect(1, 0, now_ms=5000, incarnation="new-store:1", confirmed=700)
    assert tracker.shrink_candidates(5000) == {1}         # out at once, as before
    assert tracker.lag_ms(1, 900, now_ms=5000) == 0
    assert tracker.lag_ms(1, 900, now_ms=7500) == 2500
    tracker.on_ack(1, 900, 900, now_ms=8000)              # caught up: lag 0, then counts again
    assert tracker.lag_ms(1, 900, now_ms=8200) == 0
    assert tracker.lag_ms(1, 1000, now_ms=8200) == 200
    assert tracker.lag_ms(2, 1000, now_ms=8200) == 0       # never heard of: no lag to count


def test_the_masters_progress_report_holds_a_slave_that_fell_behind():
    """BrokerRoleHost.progress (GetBrokerInfo's replicas, the lag gauges) for a master whose
    tracker pushed a slave out at its handshake: a finite lag, not an OverflowError."""
    from types import SimpleNamespace

    from tidemq.broker.registration import MASTER
    from tidemq.broker.replication.host import BrokerRoleHost
    from tidemq.broker.store.ha.config import HAConfig

    store = SimpleNamespace(commitlog_max_offset=lambda: 900)
    host = BrokerRoleHost(store=store, registrar=None, controller=None, ha_config=HAConfig(),
                          broker_name="broker-r", replica_id=0, ha_listen=("127.0.0.1", 0),
                          run_on_loop=None)
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=1000, min_in_sync=1)
    tracker.incarnations[1] = "old-store:1"
    tracker.connect(1, 100, now_ms=0, incarnation="new-store:1", confirmed=700)
    host.role, host.tracker = MASTER, tracker
    [(replica, end, lag_bytes, lag_ms, member)] = host.progress()
    assert (replica, end, lag_bytes, member) == (1, 100, 800, True)
    assert 0 <= lag_ms < 2**63
