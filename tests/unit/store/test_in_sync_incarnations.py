"""The master's side of issue #36: a member that reconnects with another store (a wiped disk)
or below the confirmed offset (a lost unflushed tail) leaves the in-sync set at the next
review, and its acknowledgements count again only once it has caught up and rejoined."""

from __future__ import annotations

from tidemq.broker.store.ha.in_sync import InSyncTracker


def tracker() -> InSyncTracker:
    t = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
    t.incarnations.update({0: "m:1", 1: "s:1"})
    t.connect(1, 1000, now_ms=0, incarnation="s:1", confirmed=0)
    t.on_ack(1, 1000, 1000, now_ms=0)
    return t


def test_a_wiped_member_is_a_shrink_candidate_at_once():
    t = tracker()
    assert t.connect(1, 0, now_ms=1, incarnation="new:1", confirmed=1000)
    assert t.shrink_candidates(now_ms=2) == {1}      # not after replica_lag_max
    t.apply({0}, now_ms=2)
    assert not t.writable()                          # min 2: NOT_ENOUGH_REPLICAS, no ack
    t.on_ack(1, 600, 1000, now_ms=3)
    assert t.expand_candidates(t.confirmed_offset(1000)) == set()   # still catching up
    t.on_ack(1, 1000, 1000, now_ms=4)
    assert t.expand_candidates(t.confirmed_offset(1000)) == {1}


def test_an_unclean_restart_below_the_confirmed_offset_is_out_too():
    t = tracker()
    assert t.connect(1, 800, now_ms=1, incarnation="s:2", confirmed=1000)
    assert t.shrink_candidates(now_ms=2) == {1}


def test_a_restart_that_kept_everything_stays():
    t = tracker()
    assert not t.connect(1, 1000, now_ms=1, incarnation="s:2", confirmed=1000)
    assert t.shrink_candidates(now_ms=2) == set() and t.incarnations[1] == "s:2"
