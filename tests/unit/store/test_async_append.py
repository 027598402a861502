"""append_batch_async: SYNC_FLUSH group commit for asyncio callers (no thread per append):
groups written on the loop, fsynced by a Syncer (the C one, or the Python fallback).

Disk faults are injected by giving the Python syncer a gated fdatasync (the disk is outside
the system); the store, the syncer thread, its eventfd and the event loop are real.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from tidemq.broker.store import AppendStatus, FlushFailed, FlushMode, InvalidBatch, StoreClosed
from tidemq.broker.store.syncer import PySyncer, Syncer

from tests.support.processes import wait_until_async

from .helpers import GatedSync, encode_batch, open_store, read_all, small_config
from .test_group_commit import one, run_threads, sync_store


def gather(*coroutines) -> list:
    """Run the coroutines concurrently on a fresh loop; each result or exception, in order."""
    async def main():
        return await asyncio.gather(*coroutines, return_exceptions=True)
    return asyncio.run(main())


async def appended(store, *args):
    """store.append_batch_async(*args), called once the loop runs (it needs the loop)."""
    return await store.append_batch_async(*args)


@pytest.mark.parametrize("syncer", [Syncer, PySyncer], ids=["native", "python"])
def test_concurrent_async_appends_share_fsyncs_and_get_contiguous_offsets(tmp_path, syncer):
    store = sync_store(tmp_path, segment_size=256 * 1024)
    store.syncer_factory = syncer

    async def appender(n: int) -> list:
        return [await store.append_batch_async("t", n % 4, one(body=b"x" * n), 1)
                for _ in range(25)]

    results = gather(*(appender(n) for n in range(64)))
    flat = [r for per_task in results for r in per_task]
    assert {r.status for r in flat} == {AppendStatus.PUT_OK}
    for queue_id in range(4):
        mine = sorted((r.first_queue_offset, r.physical_offsets[0])
                      for n in range(queue_id, 64, 4) for r in results[n])
        assert [offset for offset, _ in mine] == list(range(len(mine)))
        assert [p for _, p in mine] == sorted(p for _, p in mine)
    assert store.commitlog.flushed_offset > max(r.physical_offsets[-1] for r in flat)
    assert store.flusher.fsyncs < len(flat) / 4, "appends of one loop share fsyncs"
    assert store.flusher.round_requests == len(flat)
    assert store.wait_dispatched(10)
    assert sum(len(read_all(store, "t", q)) for q in range(4)) == len(flat)
    store.shutdown()


def test_async_and_thread_appenders_append_concurrently(tmp_path):
    store = sync_store(tmp_path)
    done = threading.Event()

    def thread_appends(n: int) -> list:
        return [store.append_batch("t", 0, one(), 1) for _ in range(50)]

    def loop_appends() -> list:
        async def appender() -> list:
            return [await store.append_batch_async("t", 1, one(), 1) for _ in range(50)]
        try:
            return gather(*(appender() for _ in range(8)))
        finally:
            done.set()

    results = run_threads(5, lambda n: loop_appends() if n == 0 else thread_appends(n))
    assert done.is_set()
    statuses = {r.status for per in results[0] for r in per} | {
        r.status for per in results[1:] for r in per}
    assert statuses == {AppendStatus.PUT_OK}
    assert store.max_offset("t", 0) == 200 and store.max_offset("t", 1) == 400
    store.shutdown()


def test_an_invalid_async_batch_fails_alone(tmp_path):
    store = sync_store(tmp_path)
    bad = bytearray(one())
    bad[4:8] = b"\0\0\0\0"  # magic
    results = gather(appended(store, "t", 0, one(), 1),
                     appended(store, "t", 0, bytes(bad), 1),
                     appended(store, "t", 0, one(), 1))
    assert isinstance(results[1], InvalidBatch), results
    assert [r.first_queue_offset for r in (results[0], results[2])] == [0, 1]
    store.shutdown()


def test_a_failed_fsync_fails_the_async_appends_it_covered(tmp_path):
    store = sync_store(tmp_path)
    disk = GatedSync(store, gates=2, failing={1})

    async def scenario():
        first = asyncio.ensure_future(appended(store, "t", 0, one(), 1))
        # the first append alone is written and in its fsync
        await wait_until_async(disk.entered[0].is_set, 10, message="the first fsync")
        rest = [asyncio.ensure_future(appended(store, "t", 1, one(), 1))
                for _ in range(4)]
        await wait_until_async(lambda: store.max_offset("t", 1) == 4, 10,
                               message="four more appends written, waiting for an fsync")
        disk.open_all()                               # the first fsync succeeds, the next fails
        return await first, await asyncio.gather(*rest, return_exceptions=True)

    first, rest = asyncio.run(scenario())
    assert first.status is AppendStatus.PUT_OK
    assert all(isinstance(r, FlushFailed) and "fsync failed" in str(r) for r in rest), rest
    assert gather(appended(store, "t", 2, one(), 1))[0].status is AppendStatus.PUT_OK
    store.shutdown()


def test_async_appends_of_a_hung_fsync_report_flush_timeout_with_offsets(tmp_path):
    store = sync_store(tmp_path, sync_flush_timeout_ms=1000)
    disk = GatedSync(store, gates=1)
    results = gather(*(appended(store, "t", 0, one(), 1) for _ in range(3)))
    assert disk.entered[0].is_set()
    assert sorted(r.first_queue_offset for r in results) == [0, 1, 2]
    assert {r.status for r in results} == {AppendStatus.FLUSH_DISK_TIMEOUT}
    disk.open_all()
    store.shutdown()   # joins the syncer once its fsync returned
    reopened = sync_store(tmp_path)
    assert len(read_all(reopened, "t", 0)) == 3
    reopened.shutdown()



def test_a_shutdown_answers_every_waiting_async_append(tmp_path):
    store = sync_store(tmp_path)
    disk = GatedSync(store, gates=1)

    async def scenario():
        first = asyncio.ensure_future(appended(store, "t", 0, one(), 1))
        await wait_until_async(disk.entered[0].is_set, 10, message="the first fsync")
        late = store.append_batch_async("t", 0, one(), 1)   # written on the next loop pass
        disk.open_all()
        store.shutdown()   # on the loop's thread: the syncer ends its fsync, then stops
        # a deadline, so that an append left unanswered fails the test instead of hanging it
        return await asyncio.wait_for(asyncio.gather(first, late, return_exceptions=True), 20)

    first, late = asyncio.run(scenario())
    assert first.status is AppendStatus.PUT_OK   # its fsync finished during the shutdown
    assert isinstance(late, StoreClosed) and "shut down" in str(late), late

@pytest.mark.parametrize("syncer", [Syncer, PySyncer], ids=["native", "python"])
def test_a_store_serves_one_loop_after_another(tmp_path, syncer):
    store = sync_store(tmp_path)
    store.syncer_factory = syncer
    seen = []
    for n in range(3):   # asyncio.run: a new loop each time; the closed ones' syncers end
        result = gather(appended(store, "t", 0, one(), 1))[0]
        assert (result.status, result.first_queue_offset) == (AppendStatus.PUT_OK, n)
        seen += [a for a in store._appenders if a not in seen]
    assert len(seen) == 3 and store._appenders == seen[-1:]
    store.shutdown()
    for appender in seen:   # every syncer was stopped: the old loops' and, at shutdown, the last
        with pytest.raises(RuntimeError, match="closed"):
            appender._syncer.request([], 1)
    assert not [t for t in threading.enumerate() if t.name == "store-syncer"]


def test_async_append_with_async_flush_and_on_a_stopped_store(tmp_path):
    store = open_store(small_config(tmp_path, flush_mode=FlushMode.ASYNC))
    raw, _ = encode_batch("t", [b"a", b"b"])
    result = gather(appended(store, "t", 0, raw, 2))[0]
    assert (result.status, result.first_queue_offset) == (AppendStatus.PUT_OK, 0)
    store.shutdown()
    sync = sync_store(tmp_path / "sync")
    sync.shutdown()
    assert isinstance(gather(appended(sync, "t", 0, one(), 1))[0], StoreClosed)


def test_an_fsync_that_cannot_be_requested_fails_only_its_group(tmp_path):
    store = sync_store(tmp_path)

    def closed_syncer(notify_fd: int) -> PySyncer:
        syncer = PySyncer(notify_fd)
        syncer.close()   # every request now raises, as after a shutdown
        return syncer

    store.syncer_factory = closed_syncer
    results = gather(*(appended(store, "t", 0, one(), 1) for _ in range(3)))
    assert all(isinstance(r, FlushFailed) and "could not be requested" in str(r)
               for r in results), results
    assert store.max_offset("t", 0) == 3   # in the log, not acknowledged
    store.shutdown()


def test_a_hung_fsync_answers_each_caller_flush_disk_timeout_by_its_answer_by_time(tmp_path):
    """sync_flush_timeout 60 s, the fsync hung: the append whose caller must be answered
    within 0.2 s gets FLUSH_DISK_TIMEOUT (with its offsets) then; one of the same group
    without a deadline waits for the fsync and gets PUT_OK."""
    store = sync_store(tmp_path, sync_flush_timeout_ms=60_000)
    disk = GatedSync(store, gates=1)

    async def scenario():
        hurried = asyncio.ensure_future(appended(store, "t", 0, one(), 1, 0.2))
        patient = asyncio.ensure_future(appended(store, "t", 0, one(), 1))
        await wait_until_async(disk.entered[0].is_set, 10, message="the fsync")
        answered = await asyncio.wait_for(hurried, 10)
        assert not patient.done()
        disk.open_all()
        return answered, await asyncio.wait_for(patient, 10)

    hurried, patient = asyncio.run(scenario())
    assert (hurried.status, patient.status) == (AppendStatus.FLUSH_DISK_TIMEOUT,
                                                AppendStatus.PUT_OK)
    assert sorted([hurried.first_queue_offset, patient.first_queue_offset]) == [0, 1]
    store.shutdown()
    reopened = sync_store(tmp_path)
    assert len(read_all(reopened, "t", 0)) == 2   # the timed-out batch is in the log too
    reopened.shutdown()
