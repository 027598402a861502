"""Sequenced idempotent sends (Kafka's idempotent producer): the per-(producer, queue) rules of
SequenceTable, and IdempotentSends.send_sequenced over a real MessageStore — a repeat stored
once and answered with its first offsets, gaps, fenced epochs and lost state refused, the
state rebuilt from the CommitLog after a restart, and the LRU bound."""

from __future__ import annotations

import asyncio

import pytest
from tidemq.broker.idempotence import IdempotentSends, IdempotentSettings
from tidemq.broker.idempotence.sequences import (
    BATCHES_KEPT,
    SequenceError,
    SequenceTable,
    StoredBatch,
)
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PreconditionFailed
from tidemq.v1 import broker_pb2

from tests.support.local_broker import LocalBroker

KEY = (7, "t", 0)


def stored(first, count, offset=0):
    return StoredBatch(first, first + count - 1, offset, offset * 100, count)


def test_table_rules():
    table = SequenceTable(max_entries=10)
    assert table.check(KEY, 0, 0, 3) is None
    table.record(KEY, 0, stored(0, 3))
    assert table.check(KEY, 0, 0, 3) == stored(0, 3)            # a repeat: its original
    assert table.check(KEY, 0, 3, 2) is None                    # the next one
    with pytest.raises(SequenceError) as gap:
        table.check(KEY, 0, 5, 1)
    assert gap.value.code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    with pytest.raises(SequenceError) as unknown:
        table.check((8, "t", 0), 0, 4, 1)
    assert unknown.value.code == "UNKNOWN_PRODUCER_ID"
    table.record(KEY, 1, stored(0, 1, 3))                       # a new epoch starts at 0
    with pytest.raises(SequenceError) as fenced:
        table.check(KEY, 0, 3, 1)
    assert fenced.value.code == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(SequenceError) as new_epoch:
        table.check(KEY, 2, 5, 1)
    assert new_epoch.value.code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert table.check(KEY, 2, 0, 1) is None


def test_only_the_last_batches_are_answered_as_duplicates():
    table = SequenceTable(max_entries=10)
    for n in range(BATCHES_KEPT + 1):
        table.record(KEY, 0, stored(n, 1, n))
    assert table.check(KEY, 0, BATCHES_KEPT, 1) == stored(BATCHES_KEPT, 1, BATCHES_KEPT)
    assert table.check(KEY, 0, 1, 1) == stored(1, 1, 1)
    with pytest.raises(SequenceError, match="expected 6"):
        table.check(KEY, 0, 0, 1)                               # older than the kept five


def test_sequences_wrap_as_kafkas_do():
    table = SequenceTable(max_entries=10)
    top = (1 << 31) - 2
    table.record(KEY, 0, StoredBatch(top - 5, top, 0, 0, 6))
    assert table.check(KEY, 0, top + 1, 3) is None              # last = 1, wrapped
    table.record(KEY, 0, StoredBatch(top + 1, 1, 6, 0, 3))
    assert table.check(KEY, 0, 2, 1) is None


def test_least_recently_written_state_is_evicted():
    table = SequenceTable(max_entries=3)
    for producer in range(3):
        table.record((producer, "t", 0), 0, stored(0, 1))
    table.record((0, "t", 0), 0, stored(1, 1))                  # producer 0 written last
    table.record((3, "t", 0), 0, stored(0, 1))
    assert table.get((1, "t", 0)) is None and table.get((0, "t", 0)) is not None
    assert table.evicted == 1
    with pytest.raises(SequenceError, match="no state"):
        table.check((1, "t", 0), 0, 1, 1)


def test_ten_thousand_producers_fit_the_default_bound():
    table = SequenceTable(max_entries=IdempotentSettings().max_sequenced)
    for producer in range(10_000):
        for queue in range(4):
            table.record((producer, "t", queue), 0, stored(0, 10))
    assert len(table) == 40_000 and table.evicted == 0


# -- over a real store ----------------------------------------------------------------------

def open_sends(path, settings: IdempotentSettings | None = None) -> IdempotentSends:
    local = LocalBroker(path, [TopicConfig("t", 2)], long_poll_max_ms=1000)
    return IdempotentSends(local.messaging, settings or IdempotentSettings())


def sequenced_batch(bodies, producer, epoch, first):
    last = (first + len(bodies) - 1) % (1 << 31)
    out = []
    for index, body in enumerate(bodies):
        properties = {record.PROP_PRODUCER_SEQUENCE: f"{producer}:{epoch}:{first}:{last}"} \
            if index == 0 else {}
        out.append(record.encode_message(record.OutgoingMessage(
            "t", body, properties=properties))[0])
    return b"".join(out)


def send(sends, bodies, producer=7, epoch=0, first=0, queue_id=0):
    sequence = broker_pb2.ProducerSequence(producer_id=producer, epoch=epoch,
                                           base_sequence=first)
    return asyncio.run(sends.send_sequenced(sequence, "t", queue_id,
                                            sequenced_batch(bodies, producer, epoch, first),
                                            len(bodies)))


def stored_bodies(store, queue_id=0):
    assert store.wait_dispatched(5)
    got = store.get_messages("t", queue_id, 0, 100)
    return [bytes(r.body) for r in record.iter_records(got.records)] if got.records else []


@pytest.fixture
def sends(tmp_path):
    sends = open_sends(tmp_path)
    yield sends
    sends.messaging.store.shutdown()


def test_a_repeated_batch_is_stored_once(sends):
    first = send(sends, [b"a", b"b", b"c"])
    assert (first.first_queue_offset, first.duplicates) == (0, 0)
    again = send(sends, [b"a", b"b", b"c"])
    assert (again.first_queue_offset, again.duplicates) == (0, 3)
    assert again.queue_offsets == [0, 1, 2]
    assert again.physical_offsets == first.physical_offsets
    assert send(sends, [b"d"], first=3).first_queue_offset == 3
    assert stored_bodies(sends.messaging.store) == [b"a", b"b", b"c", b"d"]


def test_gap_epoch_and_lost_state_refused(sends):
    send(sends, [b"a"])
    for kwargs, code in [({"first": 2}, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
                         ({"producer": 9, "first": 4}, "UNKNOWN_PRODUCER_ID")]:
        with pytest.raises(SequenceError) as refused:
            send(sends, [b"x"], **kwargs)
        assert refused.value.code == code
    send(sends, [b"b"], epoch=1)
    with pytest.raises(SequenceError) as fenced:
        send(sends, [b"x"], first=1)
    assert fenced.value.code == "INVALID_PRODUCER_EPOCH"
    assert stored_bodies(sends.messaging.store) == [b"a", b"b"]


def test_the_first_record_must_carry_the_sequence(sends):
    sequence = broker_pb2.ProducerSequence(producer_id=7, epoch=0, base_sequence=0)
    plain = record.encode("t", b"plain")
    with pytest.raises(InvalidArgument, match="PRODUCER_SEQUENCE"):
        asyncio.run(sends.send_sequenced(sequence, "t", 0, plain, 1))
    other = sequenced_batch([b"a"], 7, 0, 5)
    with pytest.raises(InvalidArgument, match="PRODUCER_SEQUENCE"):
        asyncio.run(sends.send_sequenced(sequence, "t", 0, other, 1))


def test_state_is_rebuilt_after_a_restart(tmp_path):
    sends = open_sends(tmp_path)
    send(sends, [b"a", b"b"])
    send(sends, [b"c"], first=2)
    send(sends, [b"q"], producer=8, queue_id=1)
    sends.messaging.store.shutdown()
    restarted = open_sends(tmp_path)
    try:
        again = send(restarted, [b"c"], first=2)
        assert (again.duplicates, again.first_queue_offset) == (1, 2)
        assert send(restarted, [b"a", b"b"]).duplicates == 2
        with pytest.raises(SequenceError, match="expected 3"):
            send(restarted, [b"x"], first=4)
        assert send(restarted, [b"r"], producer=8, first=1, queue_id=1).duplicates == 0
        assert stored_bodies(restarted.messaging.store) == [b"a", b"b", b"c"]
        assert stored_bodies(restarted.messaging.store, 1) == [b"q", b"r"]
    finally:
        restarted.messaging.store.shutdown()


def test_a_repeat_is_acknowledged_only_once_its_original_is_confirmed(tmp_path):
    """A batch the in-sync replicas did not confirm in time is answered FLUSH_SLAVE_TIMEOUT
    (stored on the master only); the producer's retry, kept as a duplicate, must not turn it
    into PUT_OK while a failover can still take it away (the chaos suite's Kafka producer lost
    acknowledged records that way): the repeat waits for the confirmation as the original
    did, and is PUT_OK once the slave holds it."""
    from tidemq.broker.store import AppendStatus

    from tests.support.local_broker import SlowSlave

    sends = open_sends(tmp_path)
    store = sends.messaging.store
    slave = SlowSlave(store)
    try:
        first = send(sends, [b"a", b"b"])
        assert first.status is AppendStatus.FLUSH_SLAVE_TIMEOUT and first.duplicates == 0
        again = send(sends, [b"a", b"b"])
        assert (again.status, again.duplicates) == (AppendStatus.FLUSH_SLAVE_TIMEOUT, 2)
        slave.catch_up()
        confirmed = send(sends, [b"a", b"b"])
        assert (confirmed.status, confirmed.duplicates) == (AppendStatus.PUT_OK, 2)
        assert confirmed.physical_offsets == first.physical_offsets
    finally:
        slave.close()
        store.shutdown()


def test_a_batch_only_partly_in_the_log_is_neither_acknowledged_nor_stored_again(sends):
    """A replica elected with a lost tail (a power loss cut a batch it had copied) rebuilds the
    batch from its first record but holds only its head: its retry must not be answered as
    stored (the chaos suite's Kafka producer lost the acknowledged tail that way) nor stored
    again (the head twice): refused OUT_OF_ORDER_SEQUENCE_NUMBER, nothing stored."""
    from tidemq.broker.idempotence.sequences import StoredBatch

    first = send(sends, [b"a", b"b"])
    store = sends.messaging.store
    end = store.commitlog_max_offset()
    # the log holds records 0..1; the table says the batch 2..4 starts at its end (its records
    # lost with the tail)
    sends.sequences.record((7, "t", 0), 0, StoredBatch(2, 4, 2, end, 3))
    with pytest.raises(PreconditionFailed) as refused:
        send(sends, [b"c", b"d", b"e"], first=2)
    assert refused.value.code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert "only partly in this broker's log (0 of 3 records" in refused.value.message
    assert first.first_queue_offset == 0
    assert stored_bodies(store) == [b"a", b"b"]
