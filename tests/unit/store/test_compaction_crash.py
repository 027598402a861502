"""Compaction survives a crash at any point (docs/storage.md, "Compaction"): hypothesis plans
of keyed updates and tombstones over a few queues, one compaction pass, then a crash image —
the CommitLog cut at any byte from before the first marker to after the last (no marker, a
torn one, some of them, all), under the consume queues as they were before the pass (gaps not
flushed) or after it (flushed). Recovery must show exactly the records no surviving marker
removed, at their original offsets, and a pass after it must reach the fully compacted state
(the latest record of each key, tombstones gone, keyless records kept)."""

from __future__ import annotations

import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store.checkpoint import AbortMarker
from tidemq.broker.store.compaction import CompactionPolicy, decode_marker
from tidemq.common import record
from tidemq.common.system_topics import COMPACTION_TOPIC

from .helpers import open_store, read_all, reopened, small_config

TOPIC = "state"
POLICY = CompactionPolicy(min_lag_ms=0, delete_retention_ms=0)
updates = st.lists(st.tuples(st.integers(0, 2),                       # queue
                             st.one_of(st.none(), st.integers(0, 5)),  # key (None: keyless)
                             st.integers(1, 2500),                     # body size
                             st.booleans()),                           # tombstone
                   min_size=1, max_size=40)


def append(store, queue_id: int, key: int | None, size: int, tombstone: bool, n: int) -> None:
    message = record.OutgoingMessage(
        TOPIC, bytes([n % 251]) * size, keys=[f"key-{key}"] if key is not None else (),
        properties={"KAFKA_VALUE": "null"} if tombstone else {})
    store.append_batch(TOPIC, queue_id, record.encode_message(message)[0], 1)


def compacted_model(plan) -> dict[int, set[int]]:
    """Per queue, the offsets a full compaction keeps."""
    offsets: dict[int, int] = {}
    latest: dict[tuple[int, int], tuple[int, bool]] = {}
    kept: dict[int, set[int]] = {}
    for queue_id, key, _, tombstone in plan:
        offset = offsets.get(queue_id, 0)
        offsets[queue_id] = offset + 1
        kept.setdefault(queue_id, set())
        if key is None:
            kept[queue_id].add(offset)
        else:
            latest[(queue_id, key)] = (offset, tombstone)
    for (queue_id, _), (offset, tombstone) in latest.items():
        if not tombstone:
            kept[queue_id].add(offset)
    return kept


def readable(store) -> dict[int, set[int]]:
    return {q: {r.queue_offset for r in read_all(store, TOPIC, q)} for q in store.queue_ids(TOPIC)}


def markers(store) -> list[tuple[int, int, int, list[tuple[int, int]]]]:
    """(end of the marker record in the log, queue id, ranges) of every marker."""
    found = []
    for r in read_all(store, COMPACTION_TOPIC, 0):
        topic, queue_id, ranges = decode_marker(bytes(r.body))
        assert topic == TOPIC
        found.append((r.physical_offset + r.total_size, queue_id, ranges))
    return found


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=updates, data=st.data())
def test_a_crash_anywhere_in_compaction_loses_nothing_it_should_keep(tmp_path_factory, plan,
                                                                     data):
    root = tmp_path_factory.mktemp("compaction-crash")
    config = small_config(root / "live")
    store = open_store(config)
    for n, (queue_id, key, size, tombstone) in enumerate(plan):
        append(store, queue_id, key, size, tombstone, n)
    assert store.wait_dispatched(10)
    before = readable(store)
    log_start = store.commitlog.max_offset
    store.shutdown()
    shutil.copytree(config.data_dir, root / "before")

    with reopened(config) as store:
        store.compactor.topic_policy = lambda topic: POLICY if topic == TOPIC else None
        store.compactor.run_once()
        assert readable(store) == compacted_model(plan)
        written = markers(store)
        log_end = store.commitlog.max_offset

    # The crash image: the log as far as `cut` reached the disk, the consume queues as flushed
    # before the pass, or after it (then the whole log had reached the disk too).
    queues_after = data.draw(st.booleans(), label="consume queues flushed after the pass")
    cut = log_end if queues_after else data.draw(st.integers(log_start, log_end), label="cut")
    image = root / "image"
    shutil.copytree(root / ("live" if queues_after else "before"), image)
    shutil.rmtree(image / "commitlog")
    shutil.copytree(config.data_dir / "commitlog", image / "commitlog")
    _zero_log_from(image / "commitlog", cut, log_end)
    AbortMarker(image / "abort").create()

    image_config = small_config(image)
    with reopened(image_config) as store:
        # a marker survived if recovery kept it whole (zeroed bytes that were zeros anyway,
        # e.g. its empty properties' length, lose nothing)
        recovered_end = store.commitlog.max_offset
        assert recovered_end in {log_start, *(end for end, _, _ in written)}
        assert all(end <= recovered_end for end, _, _ in written if end <= cut)  # whole: kept
        expected = {q: set(offsets) for q, offsets in before.items()}
        for end, queue_id, ranges in written:
            if end <= recovered_end:
                for start, stop in ranges:
                    expected[queue_id] -= set(range(start, stop))
        assert readable(store) == expected
        for queue_id, offsets in before.items():   # offsets never move
            assert store.max_offset(TOPIC, queue_id) == max(offsets) + 1
        store.compactor.topic_policy = lambda topic: POLICY if topic == TOPIC else None
        store.compactor.run_once()
        assert readable(store) == compacted_model(plan)


def _zero_log_from(commitlog, cut: int, end: int) -> None:
    """The bytes [cut, end) of the log never reached the disk (zeros, as preallocated)."""
    for path in commitlog.iterdir():
        if not path.name.isdigit():
            continue
        base = int(path.name)
        size = path.stat().st_size
        start, stop = max(cut, base), min(end, base + size)
        if start < stop:
            with open(path, "r+b") as f:
                f.seek(start - base)
                f.write(bytes(stop - start))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=updates, passes=st.lists(st.integers(0, 40), max_size=4), data=st.data())
def test_passes_between_appends_reach_what_one_pass_at_the_end_would(tmp_path_factory, plan,
                                                                     passes, data):
    """Each pass reads only what is new (the queue's map); a map dropped in between (a new
    master) is rebuilt by a full scan; the end state is the model's either way."""
    store = open_store(small_config(tmp_path_factory.mktemp("compaction-passes")))
    try:
        store.compactor.topic_policy = lambda topic: POLICY if topic == TOPIC else None
        for n, (queue_id, key, size, tombstone) in enumerate(plan):
            append(store, queue_id, key, size, tombstone, n)
            if n in passes:
                assert store.wait_dispatched(10)
                if data.draw(st.booleans(), label="maps dropped first"):
                    store.compactor.reset()
                store.compactor.run_once()
        assert store.wait_dispatched(10)
        store.compactor.run_once()
        assert readable(store) == compacted_model(plan)
    finally:
        store.shutdown()


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rounds=st.integers(1, 3), data=st.data())
def test_a_crash_anywhere_in_relocation_loses_nothing(tmp_path_factory, rounds, data):
    """Copy-forward (store/relocation.py) survives a crash at any point: the log cut at any
    byte of the relocation records (none, a torn one, some, all) under the consume queues as
    they were before (repoints not flushed), or the whole pass and the deletion of the freed
    segment done. Recovery shows every key's latest value at its original offset, and a pass
    after it frees the segment."""
    from .test_relocation import CONFIG as RELOCATING
    from .test_relocation import expected, housekeeping, policies, readable, round_of_updates

    root = tmp_path_factory.mktemp("relocation-crash")
    config = small_config(root / "live", **RELOCATING)
    latest: dict[int, tuple[int, bytes]] = {}
    store = open_store(config)
    policies(store)
    for round_no in range(rounds + 1):
        round_of_updates(store, round_no, latest)
        assert store.wait_dispatched(10)
        store.compactor.run_once()
    store.retention.run_once()       # what needs no copy goes now
    held = store.commitlog.min_offset
    log_start = store.commitlog.max_offset
    store.shutdown()
    shutil.copytree(config.data_dir, root / "before")

    deleted = data.draw(st.booleans(), label="the freed segment deleted before the crash")
    with reopened(config) as store:
        policies(store)
        assert store.relocator.run_once() >= 10       # the cold keys at least
        log_end = store.commitlog.max_offset
        assert readable(store) == expected(latest)
        if deleted:
            assert store.retention.run_once() >= 1
            assert store.commitlog.min_offset > held

    cut = log_end if deleted else data.draw(st.integers(log_start, log_end), label="cut")
    image = root / "image"
    shutil.copytree(root / ("live" if deleted else "before"), image)
    shutil.rmtree(image / "commitlog")
    shutil.copytree(config.data_dir / "commitlog", image / "commitlog")
    _zero_log_from(image / "commitlog", cut, log_end)
    AbortMarker(image / "abort").create()

    with reopened(small_config(image, **RELOCATING)) as store:
        policies(store)
        assert readable(store) == expected(latest)
        housekeeping(store)
        assert readable(store) == expected(latest)
        assert store.commitlog.min_offset > held
