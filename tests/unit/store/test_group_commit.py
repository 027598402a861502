"""SYNC_FLUSH group commit of blocking appenders (threads): append groups, failures and
timeouts. Their appends go through the same LoopAppender as asyncio appends, on the store's
own loop thread (store_loop.py), so they are acknowledged in that one place.

Disk faults are injected by giving the Python syncer a gated fdatasync, or replacing the
CommitLog's write with one that raises (the disk is outside the system); everything else is
the real store.
"""

from __future__ import annotations

import errno
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import (
    AppendStatus,
    FlushFailed,
    FlushMode,
    InvalidBatch,
    StoreClosed,
    StoreError,
)

from tests.support.processes import wait_until

from .helpers import HOST, GatedSync, encode_batch, open_store, read_all, small_config
from .test_commitlog import new_log, walk


def sync_store(tmp_path, **overrides):
    return open_store(small_config(tmp_path, flush_mode=FlushMode.SYNC, **overrides))


def run_threads(count: int, target) -> list:
    """Run target(n) in `count` threads; returns each thread's result or exception."""
    results: list = [None] * count

    def run(n: int) -> None:
        try:
            results[n] = target(n)
        except Exception as exc:  # returned to the test, which asserts on it
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "an appender never returned"
    return results


def one(topic: str = "t", body: bytes = b"m") -> bytes:
    return encode_batch(topic, [body])[0]


def test_concurrent_one_message_appends_are_contiguous_and_in_log_order(tmp_path):
    store = sync_store(tmp_path, segment_size=256 * 1024)
    results = run_threads(24, lambda n: [store.append_batch("t", n % 4, one(body=b"x" * n), 1)
                                         for _ in range(25)])
    flat = [r for per_thread in results for r in per_thread]
    assert {r.status for r in flat} == {AppendStatus.PUT_OK}
    for queue_id in range(4):   # thread n appends to queue n % 4
        mine = sorted((r.first_queue_offset, r.physical_offsets[0])
                      for n in range(queue_id, 24, 4) for r in results[n])
        assert [offset for offset, _ in mine] == list(range(len(mine)))
        physical = [p for _, p in mine]
        assert physical == sorted(physical), "a queue's records are in offset order in the log"
    assert store.commitlog.flushed_offset > max(r.physical_offsets[-1] for r in flat)
    assert store.flusher.fsyncs < len(flat) and store.flusher.round_requests == len(flat)
    assert store.wait_dispatched(10)
    assert sum(len(read_all(store, "t", q)) for q in range(4)) == len(flat)
    store.shutdown()


def test_a_failed_fsync_fails_every_blocking_append_it_covered_and_only_them(tmp_path):
    store = sync_store(tmp_path)
    disk = GatedSync(store, gates=2, failing={1})
    first = []
    leader = threading.Thread(target=lambda: first.append(store.append_batch("t", 0, one(), 1)))
    leader.start()
    assert disk.entered[0].wait(10)           # the first append alone is in its fsync
    results: list = []
    waiters = threading.Thread(target=lambda: results.extend(
        run_threads(4, lambda n: store.append_batch("t", 1, one(), 1))))
    waiters.start()
    wait_until(lambda: store.max_offset("t", 1) == 4)   # written, waiting for the next fsync
    disk.open_all()                           # the first fsync succeeds; the next one fails
    leader.join(30)
    waiters.join(30)
    assert first[0].status is AppendStatus.PUT_OK
    assert len(results) == 4 and all(isinstance(r, FlushFailed) for r in results), results
    assert all(r.code == "SERVICE_UNAVAILABLE" and "fsync failed" in str(r) for r in results)
    assert store.append_batch("t", 2, one(), 1).status is AppendStatus.PUT_OK
    store.shutdown()


def test_a_failed_write_appends_nothing_and_fails_the_round(tmp_path):
    store = sync_store(tmp_path)
    real_write = store.commitlog._write_chunks

    def no_space(view, chunks):
        raise OSError(errno.ENOSPC, "No space left on device")

    store.commitlog._write_chunks = no_space
    with pytest.raises(FlushFailed, match="write failed.*nothing was appended"):
        store.append_batch("t", 0, one(), 1)
    assert store.commitlog_max_offset() == 0
    store.commitlog._write_chunks = real_write
    result = store.append_batch("t", 0, one(), 1)
    assert (result.status, result.first_queue_offset, result.physical_offsets) == (
        AppendStatus.PUT_OK, 0, [0])
    store.shutdown()


def test_an_invalid_batch_fails_alone_in_its_group(tmp_path):
    log = new_log(tmp_path)
    good = one(body=b"good")
    outcomes = log.append_group([
        ("t", 0, good, 1),
        ("t", 0, one("u"), 1),          # not for topic t
        ("t", 1, good, 1),
        ("t", 0, good + good, 3),       # wrong record_count
        ("../x", 0, good, 1),           # unsafe topic name
        ("t", 0, good, 1),
    ], HOST)
    assert outcomes[0][:2] == (0, [0]) and outcomes[0][2] == len(good)
    assert isinstance(outcomes[1], InvalidBatch) and "not for topic" in str(outcomes[1])
    assert isinstance(outcomes[3], InvalidBatch) and "record_count" in str(outcomes[3])
    assert isinstance(outcomes[4], InvalidBatch)
    assert outcomes[2][0] == 0 and outcomes[5][0] == 1
    assert [(r.queue_id, r.queue_offset) for r in walk(log)] == [(0, 0), (1, 0), (0, 1)]
    log.close()


requests = st.lists(
    st.tuples(st.integers(0, 2), st.lists(st.integers(0, 5000), min_size=1, max_size=4),
              st.booleans()),
    min_size=1, max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(requests, min_size=1, max_size=6))
def test_random_append_groups_match_their_model(tmp_path_factory, groups):
    """Groups of batches for several queues, some invalid, across segment ends: valid batches
    get contiguous offsets per queue in group order, invalid ones change nothing."""
    directory = tmp_path_factory.mktemp("log")
    log = new_log(directory)
    model: dict[int, list[bytes]] = {}
    for g, group in enumerate(groups):
        batch_requests, expected = [], []
        for r, (queue_id, sizes, valid) in enumerate(group):
            bodies = [bytes([(g * 13 + r) % 251]) * size for size in sizes]
            raw = encode_batch("t", bodies)[0]
            batch_requests.append(("t", queue_id, raw if valid else raw[:-1], len(bodies)))
            expected.append((queue_id, bodies, valid))
        outcomes = log.append_group(batch_requests, HOST)
        for (queue_id, bodies, valid), outcome in zip(expected, outcomes, strict=True):
            if not valid:
                assert isinstance(outcome, StoreError)
                continue
            queue = model.setdefault(queue_id, [])
            assert outcome[0] == len(queue) and len(outcome[1]) == len(bodies)
            queue.extend(bodies)
    log.close()
    reopened = new_log(directory)
    records = walk(reopened)
    for queue_id, bodies in model.items():
        mine = [r for r in records if r.queue_id == queue_id]
        assert [bytes(r.body) for r in mine] == bodies
        assert [r.queue_offset for r in mine] == list(range(len(bodies)))
    assert len(records) == sum(len(b) for b in model.values())
    reopened.close()


def test_blocking_appends_of_a_hung_fsync_report_flush_timeout_with_their_offsets(tmp_path):
    store = sync_store(tmp_path, sync_flush_timeout_ms=300)
    disk = GatedSync(store, gates=1)
    first = []
    leader = threading.Thread(target=lambda: first.append(store.append_batch("t", 0, one(), 1)))
    leader.start()
    assert disk.entered[0].wait(10)              # its fsync hangs
    results = run_threads(3, lambda n: store.append_batch("t", 1, one(), 1))
    assert sorted(r.first_queue_offset for r in results) == [0, 1, 2]
    assert {r.status for r in results} == {AppendStatus.FLUSH_DISK_TIMEOUT}
    assert all(r.physical_offsets[0] > 0 for r in results)
    leader.join(30)
    assert first[0].status is AppendStatus.FLUSH_DISK_TIMEOUT
    disk.open_all()
    assert store.append_batch("t", 1, one(), 1).first_queue_offset == 3
    assert store.wait_dispatched(10) and len(read_all(store, "t", 1)) == 4
    store.shutdown()


def test_a_shutdown_answers_every_waiting_blocking_append(tmp_path):
    store = sync_store(tmp_path)
    disk = GatedSync(store, gates=1)
    results: list = []
    appenders = threading.Thread(target=lambda: results.extend(
        run_threads(3, lambda n: store.append_batch("t", 0, one(), 1))))
    appenders.start()
    assert disk.entered[0].wait(10)
    wait_until(lambda: store.max_offset("t", 0) >= 1)
    closer = threading.Thread(target=store.shutdown)
    closer.start()
    disk.open_all()
    closer.join(30)
    appenders.join(30)
    assert not closer.is_alive() and not appenders.is_alive()
    assert len(results) == 3
    assert all(isinstance(r, StoreClosed) or r.status is AppendStatus.PUT_OK for r in results)
    with pytest.raises(StoreClosed):
        store.append_batch("t", 0, one(), 1)
    assert not [t for t in threading.enumerate() if t.name == "store-loop"]


def test_cpu_affinity_pins_the_threads_while_the_store_runs(tmp_path):
    before = os.sched_getaffinity(0)
    cpu = min(before)
    store = sync_store(tmp_path, cpu_affinity={cpu})
    try:
        assert os.sched_getaffinity(0) == {cpu}
        inherited = run_threads(1, lambda n: os.sched_getaffinity(0))
        assert inherited == [{cpu}]
        assert store.append_batch("t", 0, one(), 1).status is AppendStatus.PUT_OK
    finally:
        store.shutdown()
        os.sched_setaffinity(0, before)  # in case shutdown did not get that far
    assert os.sched_getaffinity(0) == before
    with pytest.raises(ValueError, match="at least one CPU"):
        small_config(tmp_path, cpu_affinity=set())
