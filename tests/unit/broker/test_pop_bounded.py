"""Pop state that stays flat (issue #39): the live book's in-order mark keeps up with the revive
log across snapshots (nothing held for ever in its out-of-order set), expired handles are
forgotten after EXPIRED_KEPT_MS and capped in number, and a snapshot too large for one record is
written as compressed parts that a restart reads back whole."""

from __future__ import annotations

import json

import pytest
from tidemq.broker.pop import book as book_module
from tidemq.broker.pop.book import EXPIRED_KEPT_MS, HandleState, PopBook
from tidemq.common import errors, record

from tests.unit.broker.test_pop_state_machine import GROUP, REVIVE, TOPIC, PopMachine


@pytest.fixture
def machine():
    m = PopMachine()
    yield m
    m.teardown()


def pop_handles(m, count, invisible_ms):
    popped = m.run(m.pop.pop(GROUP, TOPIC, count, invisible_ms, 0, ""))
    return popped.handles


def test_the_live_book_keeps_up_with_the_log_across_snapshots(machine):
    for _ in range(5):
        machine.send(4, 0)
        handles = pop_handles(machine, 4, 60_000)
        machine.run(machine.pop.ack(GROUP, handles[0]))
        assert machine.store.wait_dispatched(5)
        assert machine.run(machine.pop.compact()) is not None
    assert machine.store.wait_dispatched(5)
    book = machine.pop.book
    # before: the snapshot records were never applied to the live book, so its in-order mark
    # stopped at the first one and every later record stayed in its out-of-order set
    assert book.applied == machine.store.max_offset(REVIVE, 0) - 1
    assert not book._ahead
    assert machine.pop.stats()["revive_tail"] == 0


def test_expired_handles_are_forgotten_after_the_kept_time(machine):
    machine.send(3, 0)
    handles = pop_handles(machine, 3, 1000)
    machine.clock.offset += 2
    assert machine.run(machine.pop.revive_due()) == 3
    assert len(machine.pop.book.expired) == 3
    with pytest.raises(errors.PreconditionFailed) as expired:
        machine.run(machine.pop.ack(GROUP, handles[0]))
    assert expired.value.code == "RECEIPT_HANDLE_EXPIRED"
    machine.clock.offset += EXPIRED_KEPT_MS / 1000 + 1
    machine.run(machine.pop.revive_due())
    assert machine.pop.book.expired == {}
    assert machine.pop.stats()["expired"] == 0
    machine.run(machine.pop.ack(GROUP, handles[1]))  # forgotten: answered as acked before
    # a compaction after it writes a snapshot without them; a restart does not bring them back
    assert machine.store.wait_dispatched(5)
    machine.run(machine.pop.compact())
    machine.restart()
    assert machine.pop.book.expired == {}


def test_expired_handles_are_capped_oldest_first(monkeypatch):
    monkeypatch.setattr(book_module, "MAX_EXPIRED_KEPT", 10)
    book = PopBook()
    book.apply(0, {"t": "ck", "g": GROUP, "topic": TOPIC, "q": 0, "offs": list(range(20)),
                   "next": 20, "until": 1000})
    for i in range(20):
        book.apply(1 + i, {"t": "ack", "ck": 0, "off": i, "why": "revived", "at": 1000 + i})
    assert len(book.expired) == 10
    assert book.state(0, 19, 2000) == HandleState.EXPIRED
    assert book.state(0, 0, 2000) == HandleState.DONE  # the oldest forgotten


def test_a_snapshot_larger_than_a_record_is_written_in_parts_and_read_back(machine):
    # LocalBroker's records are at most 4 KiB: a thousand in-flight handles (popped 32 at a
    # time, each pop its own checkpoint) do not fit one, even compressed
    for queue in (0, 1):
        for _ in range(16):
            machine.send(32, queue)
    handles = []
    while batch := pop_handles(machine, 32, 3_600_000):
        handles += batch
    assert len(handles) == 1024
    machine.send(1, 0)
    assert machine.store.wait_dispatched(5)
    offset = machine.run(machine.pop.compact())
    assert offset is not None
    assert machine.store.wait_dispatched(5)
    got = machine.store.get_messages(REVIVE, 0, offset, 64)
    records = list(record.iter_records(got.records))
    head = json.loads(bytes(records[0].body))
    assert head["t"] == "snap" and head["parts"] >= 2, head   # really cut into parts
    before = machine.pop.book
    machine.restart()  # asserts the rebuilt book equals the live one
    assert machine.pop.book.in_flight == before.in_flight
    assert machine.pop._last_snapshot == offset + head["parts"]


def test_a_torn_snapshot_falls_back_to_replaying_the_whole_log(machine):
    machine.send(2, 0)
    handles = pop_handles(machine, 2, 3_600_000)
    assert machine.store.wait_dispatched(5)
    offset = machine.run(machine.pop.compact())
    # the saved offset names a record that is not a snapshot's head followed by its parts
    machine.offsets.commit("CID_SYS_RMQ_POP_SNAPSHOT", [(REVIVE, 0, offset)])
    head = PopBook().snapshot_records(4096)[0]  # claims one part; the log has another record
    machine.run(machine.pop._append([head, b'{"t":"acks","h":[]}']))
    assert machine.store.wait_dispatched(5)
    machine.offsets.commit("CID_SYS_RMQ_POP_SNAPSHOT",
                           [(REVIVE, 0, machine.store.max_offset(REVIVE, 0) - 2)])
    machine.pop = machine.new_pop_service()
    machine.pop.rebuild()
    assert len(machine.pop.book.in_flight) == 2
    machine.run(machine.pop.ack(GROUP, handles[0]))
