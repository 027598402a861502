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


def test_a_member_back_wiped_does_not_let_a_behind_slave_join():
    """The confirmed offset is the smallest log end of the members: a member that reconnects
    wiped (log end 0) drags it to 0 until it leaves. A slave still catching up must not join on
    that: it would be in sync — electable — without the records confirmed before."""
    t = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
    t.connect(1, 1000, now_ms=0, incarnation="s:1", confirmed=0)
    t.on_ack(1, 1000, 1000, now_ms=0)
    assert t.confirmed_offset(1000) == 1000
    t.connect(2, 400, now_ms=1, incarnation="b:1", confirmed=1000)   # catching up
    assert t.connect(1, 0, now_ms=2, incarnation="new:1", confirmed=1000)
    assert t.confirmed_offset(1000) == 0
    assert t.expand_candidates(t.confirmed_offset(1000)) == set()
    t.on_ack(2, 1000, 1000, now_ms=3)
    assert t.expand_candidates(t.confirmed_offset(1000)) == {2}


def test_a_master_resuming_at_its_epoch_holds_members_to_the_groups_confirmed_offset():
    """A master back at its old epoch (the controller's "the master itself returns") starts a
    fresh tracker: nothing acked yet, so its own confirmed offset is 0. A member that connects
    below the group's recorded confirmed offset (a lost tail) has not got the copy it was
    counted for: out at once, and a slave joins only once it holds that offset."""
    t = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2, confirmed_floor=1000)
    t.incarnations.update({0: "m:2", 1: "s:2"})
    assert t.connect(1, 800, now_ms=0, incarnation="s:2", confirmed=t.confirmed_offset(1200))
    assert t.shrink_candidates(now_ms=1) == {1}
    t.apply({0}, now_ms=1)
    t.connect(2, 900, now_ms=1, incarnation="b:1", confirmed=t.confirmed_offset(1200))
    assert t.expand_candidates(900) == set()    # whatever the caller computed
    t.on_ack(2, 1000, 1200, now_ms=2)
    assert t.expand_candidates(900) == {2}
