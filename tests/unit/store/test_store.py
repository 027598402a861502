"""MessageStore driven in-process: pulls, filters, lookups, flush modes, restart, retention."""

from __future__ import annotations

import threading
import time

import pytest
from tidemq.broker.store import (
    AppendStatus,
    FlushMode,
    GetStatus,
    MessageNotFound,
    MessageStore,
    MetadataFile,
    StoreClosed,
)
from tidemq.common import record
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN

from .helpers import (
    HOST,
    encode_batch,
    forget_derived_state,
    open_store,
    read_all,
    reopened,
    small_config,
)


@pytest.fixture
def store(tmp_path):
    opened = open_store(small_config(tmp_path / "data"))
    yield opened
    opened.shutdown()


def test_pull_returns_one_contiguous_slice(store):
    raw, _ = encode_batch("t", [b"%d" % i * 50 for i in range(10)])
    result = store.append_batch("t", 2, raw, 10)
    assert result.status is AppendStatus.PUT_OK and result.first_queue_offset == 0
    assert store.wait_dispatched(5)
    pulled = store.get_messages("t", 2, 3, max_messages=4)
    assert (pulled.status, pulled.record_count, pulled.next_begin_offset) == (GetStatus.FOUND, 4, 7)
    start = result.physical_offsets[3]
    assert pulled.records == store.commitlog.read(start, result.physical_offsets[7] - start)
    assert [r.queue_offset for r in record.iter_records(pulled.records)] == [3, 4, 5, 6]
    assert (pulled.min_offset, pulled.max_offset) == (0, 10)


def test_pull_statuses(store):
    assert store.get_messages("t", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
    store.append_batch("t", 0, encode_batch("t", [b"a", b"b"])[0], 2)
    assert store.wait_dispatched(5)
    assert store.get_messages("t", 0, 2).status is GetStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_messages("t", 0, 9)
    assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 2)


def test_max_bytes_limits_but_always_returns_one(store):
    store.append_batch("t", 0, encode_batch("t", [b"x" * 500] * 5)[0], 5)
    assert store.wait_dispatched(5)
    assert store.get_messages("t", 0, 0, max_bytes=10).record_count == 1
    assert store.get_messages("t", 0, 0, max_bytes=1300).record_count == 2


def test_tag_filter_uses_the_consume_queue_hash(store):
    store.append_batch("t", 0, encode_batch("t", [b"1", b"2"], tags="red")[0], 2)
    store.append_batch("t", 0, encode_batch("t", [b"3"], tags="blue")[0], 1)
    store.append_batch("t", 0, encode_batch("t", [b"4"], tags="red")[0], 1)
    assert store.wait_dispatched(5)
    red = store.get_messages("t", 0, 0, tag_hashes=frozenset({record.tag_hash("red")}))
    assert [bytes(r.body) for r in record.iter_records(red.records)] == [b"1", b"2", b"4"]
    green = store.get_messages("t", 0, 0, tag_hashes=frozenset({record.tag_hash("green")}))
    assert (green.status, green.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 4)


def test_lookups_by_offset_id_key_unique_id_and_time(store):
    before = int(time.time() * 1000) - 1
    raw, ids = encode_batch("t", [b"a", b"b"], keys=["order-7"])
    result = store.append_batch("t", 1, raw, 2)
    store.append_batch("u", 0, encode_batch("u", [b"c"], keys=["order-7"])[0], 1)
    assert store.wait_dispatched(5)
    assert record.decode(store.read_record(result.physical_offsets[1])).unique_id == ids[1]
    with pytest.raises(MessageNotFound):
        store.read_record(result.physical_offsets[1] + 1)
    found = store.query_by_key("t", "order-7", before, 2**62, 10)
    assert sorted(bytes(record.decode(r).body) for r in found) == [b"a", b"b"]
    assert store.query_by_key("t", ids[0], before, 2**62, 10)[0] == store.read_record(
        result.physical_offsets[0])
    assert store.query_by_key("t", "order-7", 0, before - 10_000, 10) == []
    assert store.offset_for_timestamp("t", 1, before) == 0
    assert store.offset_for_timestamp("t", 1, 2**62) == 2
    # the search also says when the message it found was stored (what a Kafka ListOffsets
    # by time answers on a LogAppendTime topic), None past the queue's end
    stored = store.store_timestamp_at(result.physical_offsets[0])
    assert before < stored <= int(time.time() * 1000)
    assert store.search_timestamp("t", 1, before) == (0, stored)
    assert store.search_timestamp("t", 1, 2**62) == (2, None)
    assert store.search_timestamp("t", 7, before) == (0, None)   # no such queue
    assert store.topics() == ["t", "u"] and store.queue_ids("t") == [1]


def test_arrival_listener_hears_new_max_offset(store):
    heard = []
    store.add_arrival_listener(lambda topic, qid, max_offset: heard.append((topic, qid, max_offset)))
    store.append_batch("t", 4, encode_batch("t", [b"a", b"b", b"c"])[0], 3)
    assert store.wait_dispatched(5)
    assert ("t", 4, 3) in heard


def test_restart_keeps_everything_and_continues_offsets(tmp_path):
    config = small_config(tmp_path)
    first = open_store(config)
    for i in range(40):
        first.append_batch("t", i % 2, encode_batch("t", [b"m%d" % i * 200])[0], 1)
    first.shutdown()
    second = open_store(config)
    assert not second.startup.abnormal
    assert [second.max_offset("t", q) for q in (0, 1)] == [20, 20]
    assert second.append_batch("t", 0, encode_batch("t", [b"z"])[0], 1).first_queue_offset == 20
    assert second.wait_dispatched(5)
    assert len(read_all(second, "t", 0)) == 21
    second.shutdown()


def test_a_topic_of_the_longest_name_is_stored_and_survives_a_restart(tmp_path):
    """249 characters (Kafka's limit, tidemq.common.topic_names): its consume queue directory
    (one 249-byte path component), its records and their keys' index are there after a
    restart, and again when rebuilt from the CommitLog alone."""
    topic = "L" * MAX_TOPIC_NAME_LEN
    config = small_config(tmp_path)
    first = open_store(config)
    result = first.append_batch(topic, 1, encode_batch(topic, [b"a", b"b"], keys=["k"])[0], 2)
    assert result.status is AppendStatus.PUT_OK
    first.shutdown()
    assert (config.consumequeue_dir / topic / "1").is_dir()
    for rebuild in (False, True):
        if rebuild:
            forget_derived_state(config)
        with reopened(config) as store:
            assert [(r.topic, bytes(r.body)) for r in read_all(store, topic, 1)] == \
                [(topic, b"a"), (topic, b"b")]
            assert len(store.query_by_key(topic, "k", 0, 2**62, 10)) == 2


def test_consume_queues_and_index_are_rebuilt_from_the_log(tmp_path):
    config = small_config(tmp_path)
    first = open_store(config)
    first.append_batch("t", 0, encode_batch("t", [b"a" * 900] * 120, keys=["k"])[0], 120)
    first.shutdown()
    forget_derived_state(config)
    second = open_store(config)
    assert second.startup.redispatched_records == 120
    assert [r.queue_offset for r in read_all(second, "t", 0)] == list(range(120))
    assert len(second.query_by_key("t", "k", 0, 2**62, 500)) == 120
    second.shutdown()


def test_sync_flush_group_commit_shares_fsyncs(tmp_path):
    store = open_store(small_config(tmp_path, flush_mode=FlushMode.SYNC, segment_size=1 << 20))
    results, errors = [], []

    def produce(n: int) -> None:
        try:
            for _ in range(20):
                results.append(store.append_batch("t", n % 4, encode_batch("t", [b"s"])[0], 1))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert {r.status for r in results} == {AppendStatus.PUT_OK}
    assert store.commitlog.flushed_offset >= max(r.physical_offsets[-1] for r in results)
    assert store.flusher.fsyncs < len(results)
    store.shutdown()


def test_sync_flush_timeout_is_reported(tmp_path):
    store = open_store(small_config(tmp_path, flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=0))
    result = store.append_batch("t", 0, encode_batch("t", [b"a"])[0], 1)
    assert result.status is AppendStatus.FLUSH_DISK_TIMEOUT
    assert result.physical_offsets == [0]
    store.shutdown()


def test_closed_store_refuses_appends(tmp_path):
    store = MessageStore(small_config(tmp_path), HOST)
    with pytest.raises(StoreClosed):
        store.append_batch("t", 0, encode_batch("t", [b"a"])[0], 1)


def test_retention_by_age_moves_queue_minimum(tmp_path):
    config = small_config(tmp_path, delete_when_hour=None, retention_hours=1)
    store = open_store(config)
    for _ in range(40):
        store.append_batch("t", 0, encode_batch("t", [b"r" * 5000])[0], 1)
    assert store.wait_dispatched(5)
    segments = len(store.commitlog.segments)
    assert store.retention.run_once(now_ms=int(time.time() * 1000)) == 0
    removed = store.retention.run_once(now_ms=int(time.time() * 1000) + 2 * 3600 * 1000)
    assert removed == segments - 1
    low = store.min_offset("t", 0)
    assert low > 0 and store.commitlog_min_offset() == store.commitlog.segments[0].base_offset
    moved = store.get_messages("t", 0, 0)
    assert (moved.status, moved.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
    assert store.get_messages("t", 0, low).status is GetStatus.FOUND
    store.shutdown()


def test_retention_by_disk_ratio(tmp_path):
    config = small_config(tmp_path, disk_max_used_ratio=0.5)
    store = open_store(config)
    for _ in range(40):
        store.append_batch("t", 0, encode_batch("t", [b"r" * 5000])[0], 1)
    ratios = iter([0.9, 0.9, 0.1])
    store.retention.used_ratio = lambda _path: next(ratios)
    assert store.retention.run_once() == 2
    store.shutdown()


def test_queue_minimums_are_corrected_again_once_the_dispatcher_caught_up(tmp_path):
    """Retention removed segments the dispatcher had not reached: the queue's minimum moved
    only past the units dispatched by then, and the dispatcher goes on at the new start, so
    the next check moves it to the first retained record (a rebuilt replica's queues start
    there, and both must agree)."""
    store = open_store(small_config(tmp_path, disk_max_used_ratio=0.5))
    try:
        store.append_batch("t", 0, encode_batch("t", [b"r" * 5000])[0], 1)
        assert store.wait_dispatched(10)
        with store.dispatcher.paused():
            for _ in range(39):
                store.append_batch("t", 0, encode_batch("t", [b"r" * 5000])[0], 1)
            ratios = iter([0.9, 0.9, 0.1])
            store.retention.used_ratio = lambda _path: next(ratios)
            assert store.retention.run_once() == 2
        assert store.wait_dispatched(10)
        assert store.min_offset("t", 0) == 1   # units 1.. were never dispatched
        store.retention.used_ratio = lambda _path: 0.1
        assert store.retention.run_once() == 0
        low, queue = store.min_offset("t", 0), store.queues.get("t", 0)
        assert queue.physical_offset_of(low) == store.commitlog_min_offset()
        assert [r.queue_offset for r in read_all(store, "t", 0)][0] == low
    finally:
        store.shutdown()


def test_metadata_file_replaces_atomically(tmp_path):
    meta = MetadataFile(tmp_path / "offsets.json")
    assert meta.read() is None
    meta.write(b"one")
    meta.write(b"two")
    assert meta.read() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["offsets.json"]


def test_dispatcher_reads_the_right_property_among_look_alikes(store):
    message = record.OutgoingMessage("t", b"body", tags="red", keys=["a", "b"],
                                     properties={"XTAGS": "blue", "MY_UNIQ_KEY": "zzz"})
    raw, uid = record.encode_message(message)
    untagged, _ = record.encode_message(record.OutgoingMessage("t", b"plain"))
    store.append_batch("t", 0, raw + untagged, 2)
    assert store.wait_dispatched(5)
    red = store.get_messages("t", 0, 0, tag_hashes=frozenset({record.tag_hash("red")}))
    blue = store.get_messages("t", 0, 0, tag_hashes=frozenset({record.tag_hash("blue")}))
    assert (red.record_count, blue.record_count) == (1, 0)
    for key in ("a", "b", uid):
        assert [record.decode(r).unique_id for r in store.query_by_key("t", key, 0, 2**62)] == [uid]
    assert store.query_by_key("t", "zzz", 0, 2**62) == []
