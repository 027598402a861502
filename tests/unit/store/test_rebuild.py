"""A slave store rebuilt from a master whose retention removed its oldest segments
(`restart_at`): its CommitLog starts at the master's oldest offset, its consume queues at the
master's queue offsets (min offsets not 0, queues emptied by retention included), byte-identical
reads, and the same after a normal or an abnormal restart. A crash in the middle of the
discarding leaves an empty store, never a mix; a master store never discards its log."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import NotMaster, StoreError

from .helpers import encode_batch, open_store, read_all, small_config
from .test_replicated_append import QUEUES, assert_same, batches, replicate


def fill(store, appended) -> None:
    for queue_id, sizes in appended:
        raw, _ = encode_batch("t", [bytes([queue_id + 65]) * size for size in sizes])
        store.append_batch("t", queue_id, raw, len(sizes))


def drop_oldest(store, segments: int) -> None:
    """Retention removes the `segments` oldest segments (as if the disk were full), once
    every record is in the consume queues (their minimums then move exactly)."""
    assert store.wait_dispatched(10)
    ratios = itertools.chain([1.0] * segments, itertools.repeat(0.0))
    store.retention.used_ratio = lambda _path: next(ratios)
    store.retention.run_once()


def rebuild(master, slave, chunk_sizes) -> dict:
    discarded = slave.restart_at(master.commitlog_min_offset(), master.empty_queues())
    replicate(master, slave, chunk_sizes, master.commitlog_min_offset())
    return discarded


def assert_same_queues(master, slave) -> None:
    assert_same(master, slave)
    assert slave.commitlog_min_offset() == master.commitlog_min_offset()
    for queue_id in range(QUEUES):
        assert slave.min_offset("t", queue_id) == master.min_offset("t", queue_id)


def restarted(root, slave, *, abnormal: bool):
    slave.shutdown()
    if abnormal:   # no checkpoint, the abort marker present: a crash
        (root / "slave" / "checkpoint").unlink()
        (root / "slave" / "abort").touch()
    slave = open_store(small_config(root / "slave"))
    assert slave.startup.abnormal == abnormal
    slave.become_slave()
    return slave


# Logs of 2-12 segments of 64 KiB: retention leaves between 1 and all of them.
big_batches = st.lists(st.tuples(st.integers(0, QUEUES - 1),
                                 st.lists(st.integers(2200, 6000), min_size=1, max_size=5)),
                       min_size=60, max_size=120)


@settings(max_examples=15, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches, big_batches, st.lists(st.integers(1, 20_000), min_size=1, max_size=6),
       st.data())
def test_a_slave_rebuilt_past_retention_has_the_masters_log_and_queue_offsets(
        tmp_path_factory, old, appended, chunk_sizes, data):
    root = tmp_path_factory.mktemp("rebuild")
    master = open_store(small_config(root / "master"))
    slave = open_store(small_config(root / "slave"))
    slave.become_slave()
    try:
        fill(master, old)
        replicate(master, slave, chunk_sizes, 0)   # what the slave held before it stopped
        held = slave.commitlog_max_offset()
        fill(master, appended)
        segments = len(master.commitlog.segments)
        drop_oldest(master, data.draw(st.integers(1, segments - 1), label="segments removed"))
        assert master.commitlog_min_offset() > 0

        discarded = rebuild(master, slave, chunk_sizes)
        assert discarded["log_end"] == held
        assert_same_queues(master, slave)
        slave = restarted(root, slave, abnormal=False)
        assert_same_queues(master, slave)
        slave = restarted(root, slave, abnormal=True)
        assert_same_queues(master, slave)

        fill(master, appended[:3])   # it goes on following
        replicate(master, slave, chunk_sizes, slave.commitlog_max_offset())
        assert_same_queues(master, slave)
    finally:
        master.shutdown()
        slave.shutdown()


def test_a_queue_retention_emptied_keeps_its_offsets_on_the_rebuilt_slave(tmp_path):
    master = open_store(small_config(tmp_path / "master"))
    slave = open_store(small_config(tmp_path / "slave"))
    slave.become_slave()
    try:
        fill(master, [(1, [3000] * 5)] * 6 + [(0, [3000] * 5)] * 10)   # queue 1 first only
        drop_oldest(master, 2)
        assert master.min_offset("t", 1) == master.max_offset("t", 1) == 30
        assert master.min_offset("t", 0) > 0
        rebuild(master, slave, [50_000])
        assert_same_queues(master, slave)
        assert (slave.min_offset("t", 1), slave.max_offset("t", 1)) == (30, 30)
        slave = restarted(tmp_path, slave, abnormal=True)
        assert (slave.min_offset("t", 1), slave.max_offset("t", 1)) == (30, 30)
        slave.become_master(1)   # it could take over: queue 1 goes on at 30, not 0
        raw, _ = encode_batch("t", [b"x"])
        assert slave.append_batch("t", 1, raw, 1).first_queue_offset == 30
    finally:
        master.shutdown()
        slave.shutdown()


def test_a_crash_while_discarding_leaves_an_empty_store(tmp_path):
    master = open_store(small_config(tmp_path / "master"))
    slave = open_store(small_config(tmp_path / "slave"))
    slave.become_slave()
    fill(master, [(0, [3000] * 5)] * 10)
    replicate(master, slave, [8192], 0)
    assert slave.wait_dispatched(10)
    slave.shutdown()
    slave.rebuild_marker.write(b"131072")   # the marker was durable, then the process died
    slave = open_store(small_config(tmp_path / "slave"))
    try:
        assert (slave.commitlog_min_offset(), slave.commitlog_max_offset()) == (0, 0)
        assert slave.queues.all() == [] and read_all(slave, "t", 0) == []
        assert slave.epochs.entries == []
        assert not slave.rebuild_marker.path.exists()
        slave.become_slave()
        rebuild(master, slave, [8192])   # the master's next handshake
        assert_same_queues(master, slave)
    finally:
        master.shutdown()
        slave.shutdown()


def test_a_master_never_discards_and_a_rebuild_starts_at_a_segment_base(tmp_path):
    store = open_store(small_config(tmp_path / "s"))
    fill(store, [(0, [3000] * 5)] * 10)
    try:
        store.become_master(1)
        with pytest.raises(NotMaster):
            store.restart_at(65536)
        store.become_slave()
        with pytest.raises(StoreError, match="segment base"):
            store.restart_at(1000)
        assert store.commitlog_max_offset() > 65536 and read_all(store, "t", 0)
    finally:
        store.shutdown()
