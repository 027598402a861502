"""The read fence (store/reader.py): with a SYNC replication gate, readers see only records
that end at or below the confirmed offset — pulls, max offsets, offset ids, keys, times; an
ASYNC gate or none (single replica, slaves) reads everything written. A queue's visible end is
checked against a model: the number of units wholly below the bound. A slave of a SYNC master
serves below the confirmed offset its master sends it (`follow_confirmed`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.store import GetStatus, MessageNotFound
from tidemq.broker.store.consume_queue import ConsumeQueue
from tidemq.broker.store.ha import InSyncTracker, ReplicationGate
from tidemq.broker.store.reader import visible_max_offset

from .helpers import encode_batch, open_store, small_config


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 300), st.integers(0, 50)), max_size=200),
       units_per_file=st.sampled_from([7, 64, 1000]), data=st.data())
def test_visible_max_offset_counts_the_units_wholly_below_the_bound(sizes, units_per_file,
                                                                     data):
    ends, physical = [], 0
    with tempfile.TemporaryDirectory() as directory:
        queue = ConsumeQueue(Path(directory), "t", 0, units_per_file)
        queue.load()
        for offset, (size, gap) in enumerate(sizes):   # other queues' records in the gaps
            physical += gap
            queue.put(offset, physical, size, 0)
            physical += size
            ends.append(physical)
        bound = data.draw(st.one_of(st.integers(0, physical + 10),
                                    st.sampled_from([0, physical, *ends])), label="bound")
        assert visible_max_offset(queue, bound) == sum(1 for end in ends if end <= bound)
        queue.close()


def test_visible_max_offset_past_a_long_unconfirmed_tail(tmp_path):
    """More units past the bound than the tail read covers: the bisection finds the end,
    across unit-file ends, for every bound (one record per 100 bytes, 300 records)."""
    queue = ConsumeQueue(tmp_path, "t", 0, 64)
    queue.load()
    for offset in range(300):
        queue.put(offset, offset * 100, 100, 0)
    for bound in range(0, 30_100, 50):
        assert visible_max_offset(queue, bound) == bound // 100, bound
    queue.close()


def fenced_store(tmp_path, *, sync=True):
    store = open_store(small_config(tmp_path))
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
    gate = ReplicationGate(tracker, store.commitlog_max_offset, sync=sync, timeout_ms=60_000)
    store.set_replication_gate(gate)
    return store, tracker, gate


def append_unacknowledged(store, bodies, keys=None):
    """Append locally (the gate holds the answer): a blocking-free path for the test."""
    raw, ids = encode_batch("t", bodies, keys=keys)
    outcome = store.commitlog.append_group([("t", 0, raw, len(bodies))], store.store_host)[0]
    store.dispatcher.wake()
    assert store.wait_dispatched(10)
    return outcome, ids


def test_a_sync_master_serves_only_what_the_in_sync_replicas_confirmed(tmp_path):
    store, tracker, gate = fenced_store(tmp_path)
    woken = []
    store.add_visibility_listener(lambda: woken.append(gate.readable_end()))
    (_, first_physicals, first_end), _ = append_unacknowledged(store, [b"a", b"b"])
    tracker.on_ack(1, first_end, first_end, now_ms=0)
    gate.on_progress()
    assert woken == [first_end]
    (_, physicals, end), ids = append_unacknowledged(store, [b"c", b"d"], keys=["k-new"])
    assert store.written_max_offset("t", 0) == 4
    assert store.max_offset("t", 0) == 2
    got = store.get_messages("t", 0, 0, 32)
    assert (got.status, got.record_count, got.next_begin_offset, got.max_offset) == \
        (GetStatus.FOUND, 2, 2, 2)
    assert store.get_messages("t", 0, 2, 32).status is GetStatus.OFFSET_OVERFLOW_ONE
    # held but not yet confirmed: nothing to read yet (Kafka: an offset between the high
    # watermark and the log end), not an offset to reset; past the log's end it is illegal
    waiting = store.get_messages("t", 0, 4, 32)
    assert (waiting.status, waiting.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 4)
    assert store.get_messages("t", 0, 5, 32).status is GetStatus.OFFSET_OVERFLOW_BADLY
    with pytest.raises(MessageNotFound):
        store.read_record(physicals[0])
    assert store.query_by_key("t", "k-new", 0, 2**62) == []
    assert store.offset_for_timestamp("t", 0, 2**62) == 2
    assert store.search_timestamp("t", 0, 2**62) == (2, None)   # "c" is not readable yet
    tracker.on_ack(1, physicals[1], end, now_ms=0)   # covers "c" only
    gate.on_progress()
    assert store.max_offset("t", 0) == 3 and woken == [first_end, physicals[1]]
    tracker.on_ack(1, end, end, now_ms=0)
    gate.on_progress()
    assert store.max_offset("t", 0) == 4
    assert store.get_messages("t", 0, 2, 32).record_count == 2
    assert store.read_record(physicals[0])
    assert len(store.query_by_key("t", "k-new", 0, 2**62)) == 2
    store.shutdown()


def test_the_fence_never_moves_back_when_too_few_replicas_confirm(tmp_path):
    store, tracker, gate = fenced_store(tmp_path)
    (_, _, end), _ = append_unacknowledged(store, [b"a"])
    tracker.on_ack(1, end, end, now_ms=0)
    gate.on_progress()
    tracker.apply({0}, now_ms=0)    # the in-sync set shrank below min_in_sync: confirms nothing
    append_unacknowledged(store, [b"b"])
    assert gate.confirmed_offset() == -1
    assert store.max_offset("t", 0) == 1
    store.shutdown()


def test_an_elected_master_serves_its_unconfirmed_tail_once_the_in_sync_slaves_hold_it(
        tmp_path):
    """What a new master holds past the confirmed offset it knew as a slave is not in every
    in-sync replica yet: served once they have it, never at election (it could die first)."""
    store, tracker, gate = fenced_store(tmp_path)
    (_, physicals, end), _ = append_unacknowledged(store, [b"a", b"b"])
    tracker.on_ack(1, physicals[1], end, now_ms=0)   # "a" confirmed
    gate.on_progress()
    store.set_replication_gate(None)
    store.become_slave()
    assert store.max_offset("t", 0) == 1   # a deposed master keeps serving what it confirmed
    store.follow_confirmed(physicals[0])  # a master that knows less: the fence stays
    assert store.max_offset("t", 0) == 1
    store.become_master(epoch=2)
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
    gate = ReplicationGate(tracker, store.commitlog_max_offset, timeout_ms=60_000)
    store.set_replication_gate(gate)
    assert store.max_offset("t", 0) == 1   # "b": this replica alone holds it
    tracker.on_ack(1, end, end, now_ms=0)
    gate.on_progress()
    assert store.max_offset("t", 0) == 2
    store.shutdown()


def test_a_slave_serves_below_its_masters_confirmed_offset(tmp_path):
    store = open_store(small_config(tmp_path))
    store.become_slave()
    woken = []
    store.add_visibility_listener(lambda: woken.append(store.confirmed_offset()))
    (_, physicals, end), _ = append_unacknowledged(store, [b"a", b"b"])
    assert store.max_offset("t", 0) == 2          # no master heard yet: as before
    store.follow_confirmed(physicals[1])           # a SYNC_MASTER says: "a" is confirmed
    assert store.max_offset("t", 0) == 1 and store.get_messages("t", 0, 1, 32).record_count == 0
    with pytest.raises(MessageNotFound):
        store.read_record(physicals[1])
    store.follow_confirmed(physicals[0])           # never back
    assert store.max_offset("t", 0) == 1
    store.follow_confirmed(end)
    assert store.max_offset("t", 0) == 2 and woken == [physicals[1], end]
    store.follow_confirmed(None)                   # an ASYNC_MASTER: everything it holds
    assert store.confirmed_offset() is None and store.max_offset("t", 0) == 2
    store.shutdown()


def test_a_restarted_slave_keeps_its_fence_until_its_master_says_more(tmp_path):
    config = small_config(tmp_path)
    store = open_store(config)
    store.become_slave()
    (_, physicals, _), _ = append_unacknowledged(store, [b"a", b"b"])
    store.follow_confirmed(physicals[1])
    store.shutdown()
    store = open_store(config)
    assert store.confirmed_offset() == physicals[1]
    store.become_slave()
    assert store.max_offset("t", 0) == 1
    store.shutdown()


def test_async_masters_single_replicas_and_slaves_read_everything_written(tmp_path):
    store, _, _ = fenced_store(tmp_path, sync=False)
    append_unacknowledged(store, [b"a"])
    assert store.max_offset("t", 0) == 1
    tracker = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
    store.set_replication_gate(ReplicationGate(tracker, store.commitlog_max_offset))
    assert store.max_offset("t", 0) == 1      # what it held when the SYNC gate came is readable
    append_unacknowledged(store, [b"b"])
    assert store.max_offset("t", 0) == 1      # what came after is not, until confirmed
    store.set_replication_gate(None)          # no gate: a slave, or a single replica
    assert store.max_offset("t", 0) == 2
    assert store.get_messages("t", 0, 0).record_count == 2
    store.shutdown()


def test_filtered_and_compacted_pulls_stop_at_the_fence_too(tmp_path):
    """The general read path (a tag filter, a property filter, a queue with gaps) reads units
    a block at a time: the block stops at the visible end, not at the queue's end."""
    store = open_store(small_config(tmp_path))
    store.become_slave()
    (_, physicals, end), _ = append_unacknowledged(store, [b"a", b"b", b"c", b"d"])
    store.follow_confirmed(physicals[2])           # "a" and "b" confirmed
    every_tag = frozenset({0})
    assert store.get_messages("t", 0, 0, 32, tag_hashes=every_tag).record_count == 2
    assert store.get_messages("t", 0, 0, 32,
                              property_filter=lambda _props: True).record_count == 2
    store.queues.get("t", 0).mark_gaps([(0, 1)])  # compacted: the gap-aware path
    assert store.get_messages("t", 0, 0, 32).record_count == 1
    store.follow_confirmed(end)
    assert store.get_messages("t", 0, 0, 32).record_count == 3
    store.shutdown()
