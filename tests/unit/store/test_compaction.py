"""Compaction (store/compaction.py, docs/storage.md "Compaction"): the latest record per key
is kept, tombstones go after delete.retention.ms, offsets never change, readers skip the gaps,
and the state is a pure function of the log (a restart that re-dispatches gets it again)."""

from __future__ import annotations

import time

import pytest
from tidemq.broker.store.compaction import (
    CompactionPolicy,
    decode_marker,
    encode_marker,
    to_ranges,
)
from tidemq.broker.store.reader import GetStatus
from tidemq.common import record

from .helpers import forget_derived_state, reopened, small_config

TOPIC = "changelog"


def send(store, key: str | None, body: bytes, *, tombstone: bool = False, queue_id: int = 0):
    message = record.OutgoingMessage(TOPIC, body, keys=[key] if key else (),
                                     properties={"KAFKA_VALUE": "null"} if tombstone else {})
    raw, _ = record.encode_message(message)
    return store.append_batch(TOPIC, queue_id, raw, 1)


def read_all(store, queue_id: int = 0, batch: int = 32) -> list[tuple[int, bytes]]:
    """(queue offset, body) of every readable record, pulling as a consumer does."""
    found, offset = [], store.min_offset(TOPIC, queue_id)
    while offset < store.max_offset(TOPIC, queue_id):
        got = store.get_messages(TOPIC, queue_id, offset, batch)
        for pos, header in record.scan_records(got.records) if got.records else []:
            found.append((header[record.H_QUEUE_OFFSET],
                          record.body_at(got.records, pos, header)))
        assert got.next_begin_offset > offset, got
        offset = got.next_begin_offset
    return found


EAGER = CompactionPolicy(min_lag_ms=0, delete_retention_ms=0)


def compact(store, policy=EAGER, now_ms: int | None = None) -> int:
    store.compactor.topic_policy = lambda topic: policy if topic == TOPIC else None
    assert store.wait_dispatched(10)
    return store.compactor.run_once(now_ms)


def test_marker_round_trip_and_ranges():
    assert to_ranges([5, 1, 2, 3, 9]) == [(1, 4), (5, 6), (9, 10)]
    assert decode_marker(encode_marker("t", 3, [(1, 4), (9, 10)])) == ("t", 3, [(1, 4), (9, 10)])


def test_latest_per_key_kept_offsets_unchanged(tmp_path):
    with reopened(small_config(tmp_path)) as store:
        for i in range(30):
            send(store, f"k{i % 3}", f"v{i}".encode())
        send(store, None, b"no key")      # never compacted
        assert compact(store) == 27
        assert read_all(store) == [(27, b"v27"), (28, b"v28"), (29, b"v29"), (30, b"no key")]
        assert (store.min_offset(TOPIC, 0), store.max_offset(TOPIC, 0)) == (0, 31)
        assert store.compactor.queue_passes == 1    # the metric the soak prints
        assert compact(store) == 0                  # nothing new: nothing decided again
        assert store.compactor.queue_passes == 1    # ... nor read
        send(store, "k0", b"v31")
        assert compact(store) == 1
        assert [body for _, body in read_all(store)] == [b"v28", b"v29", b"no key", b"v31"]
    with reopened(small_config(tmp_path)) as again:   # gaps are durable
        assert [offset for offset, _ in read_all(again)] == [28, 29, 30, 31]
    forget_derived_state(small_config(tmp_path))      # ... and a function of the log
    with reopened(small_config(tmp_path)) as rebuilt:
        assert [offset for offset, _ in read_all(rebuilt)] == [28, 29, 30, 31]


def test_tombstones_delete_their_key_and_go_after_delete_retention(tmp_path):
    with reopened(small_config(tmp_path)) as store:
        send(store, "a", b"a1")
        send(store, "b", b"b1")
        send(store, "a", b"\0", tombstone=True)
        policy = CompactionPolicy(min_lag_ms=0, delete_retention_ms=60_000)
        assert compact(store, policy) == 1          # a1 superseded; the tombstone stays
        assert read_all(store) == [(1, b"b1"), (2, b"\0")]
        assert compact(store, policy, now_ms=int(time.time() * 1000) + 61_000) == 1
        assert read_all(store) == [(1, b"b1")]


def test_min_compaction_lag_leaves_recent_records(tmp_path):
    with reopened(small_config(tmp_path)) as store:
        for i in range(4):
            send(store, "k", f"v{i}".encode())
        assert compact(store, CompactionPolicy(min_lag_ms=3_600_000)) == 0
        assert len(read_all(store)) == 4


@pytest.mark.parametrize("batch", [1, 7, 32])
def test_pull_skips_gaps_whatever_the_batch(tmp_path, batch):
    with reopened(small_config(tmp_path)) as store:
        for i in range(200):
            send(store, f"k{i % 2}", f"v{i}".encode())
        compact(store)
        assert read_all(store, batch=batch) == [(198, b"v198"), (199, b"v199")]
        got = store.get_messages(TOPIC, 0, 0, 1)
        assert got.status is GetStatus.FOUND and got.next_begin_offset == 199


def test_a_slave_replaying_the_log_reaches_the_same_state(tmp_path):
    with reopened(small_config(tmp_path / "m")) as master, \
            reopened(small_config(tmp_path / "s")) as slave:
        slave.become_slave()
        for i in range(50):
            send(master, f"k{i % 5}", f"v{i}".encode())
        compact(master)
        data = master.commitlog.read(0, master.commitlog.max_offset)
        slave.append_replicated(0, data)
        assert slave.wait_dispatched(10)
        assert read_all(slave) == read_all(master) == [(45 + i, f"v{45 + i}".encode())
                                                       for i in range(5)]


def test_a_read_at_an_exact_offset_does_not_answer_the_record_after_a_gap(tmp_path):
    """What a pop's revive and redelivery read (store.get_message_at): a compacted-away
    record is gone, not replaced by the next live one."""
    with reopened(small_config(tmp_path)) as store:
        send(store, "k", b"old")
        send(store, "k", b"new")
        compact(store)
        gone = store.get_message_at(TOPIC, 0, 0)
        assert gone.status is GetStatus.NO_MATCHED_MESSAGE and gone.record_count == 0
        kept = store.get_message_at(TOPIC, 0, 1)
        assert kept.status is GetStatus.FOUND and kept.record_count == 1
        assert store.get_messages(TOPIC, 0, 0, 1).next_begin_offset == 2   # a pull skips


def test_a_lookup_by_key_or_unique_id_no_longer_finds_a_removed_record(tmp_path):
    """docs/storage.md "Readers skip gaps": query by key (KEYS) and by unique id (UNIQ_KEY)."""
    def send_keyed(store, body: bytes) -> str:
        raw, uniq = record.encode_message(record.OutgoingMessage(TOPIC, body, keys=["k"]))
        store.append_batch(TOPIC, 0, raw, 1)
        return uniq

    with reopened(small_config(tmp_path)) as store:
        old_id, new_id = send_keyed(store, b"old"), send_keyed(store, b"new")
        end_ms = int(time.time() * 1000) + 60_000
        assert store.wait_dispatched(10)
        assert len(store.query_by_key(TOPIC, "k", 0, end_ms)) == 2
        assert len(store.query_by_key(TOPIC, old_id, 0, end_ms)) == 1
        assert compact(store) == 1
        (kept,) = store.query_by_key(TOPIC, "k", 0, end_ms)
        assert record.body_at(kept, 0, record.HEADER.unpack_from(kept)) == b"new"
        assert store.query_by_key(TOPIC, old_id, 0, end_ms) == []
        assert len(store.query_by_key(TOPIC, new_id, 0, end_ms)) == 1


def test_a_segment_whose_records_were_all_compacted_away_is_deleted(tmp_path):
    """A compact topic holds its segments past the global age, but one holding only gaps of
    it (every record superseded) goes as a drained segment."""
    from tidemq.broker.store.retention import QueueRetention

    # a full shared disk (forced clean-up) must not delete the held segments under the test
    with reopened(small_config(tmp_path, delete_when_hour=None, disk_max_used_ratio=1.0,
                               disk_full_ratio=1.0)) as store:
        for i in range(300):     # about five 64 KiB segments, all of key "k"
            send(store, "k", bytes([i % 251]) * 1000)
        segments = len(store.commitlog.segments)
        assert segments >= 4
        store.retention.topic_policy = lambda topic: QueueRetention(holds=True)
        assert store.retention.run_once() == 0         # all live: held
        compact(store)
        assert store.retention.run_once() == segments - 1   # all but the active one
        assert [offset for offset, _ in read_all(store)] == [299]


def test_a_later_pass_reads_only_the_new_records_and_still_supersedes_old_ones(tmp_path):
    with reopened(small_config(tmp_path)) as store:
        for i in range(100):
            send(store, f"k{i % 10}", b"x" * 500)
        compact(store)
        first = store.compactor.bytes_read
        send(store, "k3", b"new k3")
        send(store, "k3", b"\0", tombstone=True)      # deletes k3 (retention 0)
        send(store, "fresh", b"fresh")
        assert compact(store) == 3      # k3 at 93, its new value, the tombstone itself
        assert store.compactor.bytes_read - first < 3 * 1000    # only the three new records
        bodies = {body for _, body in read_all(store)}
        assert b"new k3" not in bodies and b"fresh" in bodies and len(bodies) <= 10
        store.compactor.reset()          # a new master: scans whole, decides nothing again
        assert compact(store) == 0
        assert [o for o, _ in read_all(store)] == [90, 91, 92, 94, 95, 96, 97, 98, 99, 102]


def test_a_long_kafka_key_is_compacted_by_its_digest(tmp_path):
    """gateway-kafka carries a key too long for the properties in the body, naming it by its
    SHA-256 (KAFKA_KEY_DIGEST): records with the same digest are one key, apart from
    KAFKA_KEY and KEYS ones."""
    def send_digest(digest: str, body: bytes) -> None:
        message = record.OutgoingMessage(TOPIC, body, keys=["d1"],   # not the key: the digest is
                                         properties={"KAFKA_KEY_DIGEST": digest})
        store.append_batch(TOPIC, 0, record.encode_message(message)[0], 1)

    with reopened(small_config(tmp_path)) as store:
        send_digest("AAAA", b"long-1")
        send_digest("BBBB", b"other")
        send(store, "d1", b"keys-d1")
        send_digest("AAAA", b"long-2")
        assert compact(store) == 1
        assert [body for _, body in read_all(store)] == [b"other", b"keys-d1", b"long-2"]


def test_a_slave_cuts_a_compaction_marker_past_its_confirmed_offset(tmp_path):
    """A deposed master's unconfirmed tail holds a compaction marker (markers are appended
    outside the replication gate); become a slave whose master confirmed only up to before it,
    it must still cut that tail: the truncation reads the cut markers past the read fence.
    (Found by the chaos run's compacted topic: the read was fenced, every truncation raised
    MessageNotFound and the slave never caught up again.)"""
    with reopened(small_config(tmp_path)) as store:
        for i in range(6):
            send(store, f"k{i % 2}", f"v{i}".encode())
        assert store.wait_dispatched(10)
        before = store.commitlog_max_offset()
        assert compact(store) == 4
        assert store.wait_dispatched(10)
        assert len(read_all(store)) == 2
        store.become_slave()
        store.follow_confirmed(before)            # the new master has nothing past `before`
        store.truncate_to(before)
        assert store.wait_dispatched(10)
        assert [body for _, body in read_all(store)] == [f"v{i}".encode() for i in range(6)]
