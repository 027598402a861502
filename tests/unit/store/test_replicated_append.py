"""A slave store fed a master's CommitLog bytes (`append_replicated`) in random chunks ends
byte-identical, with the same consume queues and reads; `truncate_to` a record boundary and
re-replication give the same again; so does an abnormal restart of the slave. Roles: a slave
refuses local appends; after `become_master` queue offsets continue where the master's were."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import NotMaster, ReplicationGap
from tidemq.common import record

from .helpers import encode_batch, open_store, read_all, small_config

QUEUES = 3
batches = st.lists(st.tuples(st.integers(0, QUEUES - 1),
                             st.lists(st.integers(1, 6000), min_size=1, max_size=5)),
                   min_size=1, max_size=25)


def log_bytes(store) -> bytes:
    """The CommitLog from its start to its end, segment by segment."""
    out, offset, end = [], store.commitlog_min_offset(), store.commitlog_max_offset()
    while offset < end:
        segment = store.commitlog.segment_for(offset)
        take = min(end, segment.end_offset) - offset
        out.append(store.commitlog.read(offset, take))
        offset += take
    return b"".join(out)


def replicate(master, slave, chunk_sizes: list[int], start: int) -> None:
    """Ship master bytes [start, end) in chunks of the given sizes (cycled), as the HA stream
    does (never across a segment end)."""
    offset, end, n = start, master.commitlog_max_offset(), 0
    while offset < end:
        segment = master.commitlog.segment_for(offset)
        take = min(chunk_sizes[n % len(chunk_sizes)], end - offset, segment.end_offset - offset)
        slave.append_replicated(offset, master.commitlog.read(offset, take))
        offset, n = offset + take, n + 1
    assert slave.commitlog_max_offset() == end


@contextlib.contextmanager
def unfenced(*stores):
    """Readers of `stores` see everything they hold, not only what their group confirmed: a
    check that two replicas hold the same bytes and queues, whatever each knows of the
    confirmed offset."""
    fences = [store.reader.visible_end for store in stores]
    for store in stores:
        store.reader.visible_end = None
    try:
        yield
    finally:
        for store, fence in zip(stores, fences, strict=True):
            store.reader.visible_end = fence


def assert_same(master, slave) -> None:
    with unfenced(master, slave):
        _assert_same(master, slave)


def _assert_same(master, slave) -> None:
    assert slave.wait_dispatched(10) and master.wait_dispatched(10)
    assert log_bytes(slave) == log_bytes(master)
    for queue_id in range(QUEUES):
        assert slave.max_offset("t", queue_id) == master.max_offset("t", queue_id)
        mine = [(r.queue_offset, r.physical_offset, bytes(r.body))
                for r in read_all(slave, "t", queue_id)]
        assert mine == [(r.queue_offset, r.physical_offset, bytes(r.body))
                        for r in read_all(master, "t", queue_id)]


def boundaries(store) -> list[int]:
    return sorted(unit[0] for q in store.queues.all() for unit in q.read_units(0, 10_000))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batches, st.lists(st.integers(1, 20_000), min_size=1, max_size=6), st.data())
def test_a_slave_replicated_in_random_chunks_is_identical_after_truncation_and_restart(
        tmp_path_factory, appended, chunk_sizes, data):
    root = tmp_path_factory.mktemp("ha")
    master = open_store(small_config(root / "master"))
    slave = open_store(small_config(root / "slave"))
    slave.become_slave()
    try:
        for queue_id, sizes in appended:
            raw, _ = encode_batch("t", [bytes([queue_id + 65]) * size for size in sizes])
            master.append_batch("t", queue_id, raw, len(sizes))
        replicate(master, slave, chunk_sizes, 0)
        assert_same(master, slave)

        cut = data.draw(st.sampled_from(boundaries(master) + [master.commitlog_max_offset()]))
        slave.truncate_to(cut)
        assert slave.commitlog_max_offset() == cut
        assert all(unit[0] < cut for q in slave.queues.all() for unit in q.read_units(0, 10_000))
        replicate(master, slave, chunk_sizes, cut)
        assert_same(master, slave)

        slave.shutdown()   # an abnormal restart: no checkpoint, the abort marker present
        (root / "slave" / "checkpoint").unlink()
        (root / "slave" / "abort").touch()
        slave = open_store(small_config(root / "slave"))
        assert slave.startup.abnormal
        slave.become_slave()
        assert_same(master, slave)
    finally:
        master.shutdown()
        slave.shutdown()


def test_a_record_cut_by_a_chunk_waits_for_its_rest(tmp_path):
    master = open_store(small_config(tmp_path / "m"))
    slave = open_store(small_config(tmp_path / "s"))
    slave.become_slave()
    raw, _ = encode_batch("t", [b"x" * 900, b"y" * 900])
    master.append_batch("t", 0, raw, 2)
    whole = master.commitlog.read(0, master.commitlog_max_offset())
    first = master.commitlog.record_size_at(0)
    assert slave.append_replicated(0, whole[:first + 10]) == first   # 10 bytes of the second held
    assert slave.commitlog.replica_end == first + 10
    with pytest.raises(ReplicationGap, match="start at 0"):
        slave.append_replicated(0, whole)
    assert slave.append_replicated(first + 10, whole[first + 10:]) == len(whole)
    assert_same(master, slave)
    with pytest.raises(ReplicationGap, match="no record starts"):
        slave.append_replicated(len(whole), b"\x01" * 200)
    master.shutdown()
    slave.shutdown()


def test_a_slave_refuses_local_appends_and_a_new_master_continues_the_queue_offsets(tmp_path):
    master = open_store(small_config(tmp_path / "m"))
    slave = open_store(small_config(tmp_path / "s"))
    master.become_master(1)
    slave.become_slave()
    for n in range(5):
        master.append_batch("t", n % 2, encode_batch("t", [b"m%d" % n])[0], 1)
    replicate(master, slave, [333], 0)
    with pytest.raises(NotMaster) as refused:
        slave.append_batch("t", 0, encode_batch("t", [b"no"])[0], 1)
    assert refused.value.code == "NOT_MASTER"
    with pytest.raises(NotMaster):
        master.append_replicated(master.commitlog_max_offset(), b"")
    slave.become_master(2)
    slave.become_master(2)   # idempotent
    assert [tuple(e) for e in slave.epochs.entries] == [(2, master.commitlog_max_offset())]
    result = slave.append_batch("t", 0, encode_batch("t", [b"after"])[0], 1)
    assert master.wait_dispatched(10)   # its queues are written by the dispatcher, later
    assert result.first_queue_offset == master.max_offset("t", 0) == 3
    assert record.decode(slave.read_record(result.physical_offsets[0])).body == b"after"
    master.shutdown()
    slave.shutdown()
