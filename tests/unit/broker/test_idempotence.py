"""Idempotent sends over a real MessageStore: duplicates dropped and answered with the original
offsets, mixed batches, refusals, and the table rebuilt from the CommitLog after a restart and
on a replica promoted to master (its log copied with append_replicated, as the HA stream does)."""

from __future__ import annotations

import asyncio

import pytest
from tidemq.broker.idempotence import IdempotentSends, IdempotentSettings
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import record
from tidemq.common.errors import InvalidArgument
from tidemq.common.record import PROP_PRODUCER_ID

from tests.support.local_broker import LocalBroker


def open_sends(path, settings: IdempotentSettings | None = None) -> IdempotentSends:
    local = LocalBroker(path, [TopicConfig("t", 2)], long_poll_max_ms=1000)
    return IdempotentSends(local.messaging, settings or IdempotentSettings())


@pytest.fixture
def sends(tmp_path):
    sends = open_sends(tmp_path)
    yield sends
    sends.messaging.store.shutdown()


def batch(ids, producer="p", body=b"x"):
    return b"".join(record.encode_message(record.OutgoingMessage(
        "t", body + u.encode(), unique_id=u, properties={PROP_PRODUCER_ID: producer}))[0]
        for u in ids)


def send(sends, ids, producer="p", queue_id=0):
    return asyncio.run(sends.send(producer, "t", queue_id, batch(ids, producer), len(ids)))


def stored_bodies(store, queue_id=0):
    assert store.wait_dispatched(5)
    got = store.get_messages("t", queue_id, 0, 100)
    return [bytes(r.body) for r in record.iter_records(got.records)] if got.records else []


def test_replayed_batch_is_dropped_and_answered_with_its_offsets(sends):
    first = send(sends, ["a", "b", "c"])
    assert (first.first_queue_offset, first.duplicates) == (0, 0)
    again = send(sends, ["a", "b", "c"])
    assert again.duplicates == 3
    assert again.queue_offsets == [0, 1, 2]
    assert again.physical_offsets == first.physical_offsets
    assert stored_bodies(sends.messaging.store) == [b"xa", b"xb", b"xc"]


def test_mixed_batch_stores_only_new_records(sends):
    send(sends, ["a", "b"])
    mixed = send(sends, ["b", "c", "a", "d", "c"])
    assert mixed.duplicates == 3
    assert mixed.queue_offsets == [1, 2, 0, 3, 2]
    assert stored_bodies(sends.messaging.store) == [b"xa", b"xb", b"xc", b"xd"]


def test_producers_do_not_share_ids(sends):
    send(sends, ["a"], producer="p")
    other = send(sends, ["a"], producer="q")
    assert other.duplicates == 0 and other.first_queue_offset == 1


def test_window_forgets(tmp_path):
    sends = open_sends(tmp_path, IdempotentSettings(window_messages=2))
    try:
        send(sends, ["a", "b", "c"])
        assert send(sends, ["a"]).duplicates == 0   # pushed out by b and c
        assert send(sends, ["c"]).duplicates == 1
    finally:
        sends.messaging.store.shutdown()


def test_refusals(sends):
    with pytest.raises(InvalidArgument, match="producer_id"):
        asyncio.run(sends.send("", "t", 0, batch(["a"]), 1))
    with pytest.raises(InvalidArgument, match="PRODUCER_ID"):
        asyncio.run(sends.send("q", "t", 0, batch(["a"], producer="p"), 1))
    plain = record.encode("t", b"no id")
    with pytest.raises(InvalidArgument, match="UNIQ_KEY"):
        asyncio.run(sends.send("p", "t", 0, plain, 1))
    with pytest.raises(InvalidArgument, match="record_count"):
        asyncio.run(sends.send("p", "t", 0, batch(["a", "b"]), 1))


def test_table_is_rebuilt_after_a_restart(tmp_path):
    sends = open_sends(tmp_path)
    send(sends, ["a", "b"], queue_id=1)
    asyncio.run(sends.messaging.send("t", 0, record.encode("t", b"plain"), 1))
    send(sends, ["c"], producer="q")
    sends.messaging.store.shutdown()
    restarted = open_sends(tmp_path)
    try:
        again = send(restarted, ["a", "b"], queue_id=1)
        assert again.duplicates == 2 and again.queue_offsets == [0, 1]
        assert send(restarted, ["c"], producer="q").duplicates == 1
        assert send(restarted, ["c"], producer="p").duplicates == 0
    finally:
        restarted.messaging.store.shutdown()


def test_promoted_replica_knows_its_old_masters_ids(tmp_path):
    master = open_sends(tmp_path / "m")
    replica = open_sends(tmp_path / "r")
    try:
        first = send(master, ["a", "b", "c"])
        send(replica, ["x"])    # its table is built (epoch 0); the promotion must rebuild it
        replica.messaging.store.truncate_to(0)
        replica.messaging.store.become_slave()
        log = master.messaging.store.commitlog
        end = log.max_offset
        replica.messaging.store.append_replicated(0, log.read(0, end))
        replica.messaging.store.become_master(1)
        again = send(replica, ["a", "b", "c", "d"])
        assert again.duplicates == 3
        assert again.physical_offsets[:3] == first.physical_offsets
        assert stored_bodies(replica.messaging.store) == [b"xa", b"xb", b"xc", b"xd"]
    finally:
        master.messaging.store.shutdown()
        replica.messaging.store.shutdown()


@pytest.mark.parametrize("chunk", [64, 200, 4 << 20])
def test_rebuild_reads_the_log_in_chunks_of_any_size(tmp_path, monkeypatch, chunk):
    """Chunks smaller than a record, cutting records, or holding the whole log: same table."""
    from tidemq.broker.idempotence import service

    sends = open_sends(tmp_path)
    ids = [f"id-{i}" for i in range(40)]
    for start in range(0, 40, 7):
        send(sends, ids[start:start + 7], queue_id=start % 2)
    sends.messaging.store.shutdown()
    monkeypatch.setattr(service, "_READ_CHUNK", chunk)
    restarted = open_sends(tmp_path)
    try:
        assert restarted.rebuild() == 40
        assert send(restarted, ids, queue_id=1).duplicates == 40
    finally:
        restarted.messaging.store.shutdown()


def test_a_repeat_is_acknowledged_only_once_its_original_is_confirmed(tmp_path):
    """The unique-id path as the sequenced one (test_idempotence_sequences): a send the
    in-sync replicas did not confirm in time is FLUSH_SLAVE_TIMEOUT, and the producer's retry,
    every record a duplicate, must not turn it into PUT_OK while a failover can still take it
    away; once the slave holds it, the retry is PUT_OK with the original offsets."""
    from tidemq.broker.store import AppendStatus

    from tests.support.local_broker import SlowSlave

    sends = open_sends(tmp_path)
    store = sends.messaging.store
    slave = SlowSlave(store)
    try:
        first = send(sends, ["a", "b"])
        assert first.status is AppendStatus.FLUSH_SLAVE_TIMEOUT and first.duplicates == 0
        again = send(sends, ["a", "b"])
        assert (again.status, again.duplicates) == (AppendStatus.FLUSH_SLAVE_TIMEOUT, 2)
        slave.catch_up()
        confirmed = send(sends, ["a", "b"])
        assert (confirmed.status, confirmed.duplicates) == (AppendStatus.PUT_OK, 2)
        assert confirmed.physical_offsets == first.physical_offsets
    finally:
        slave.close()
        store.shutdown()
