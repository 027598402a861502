"""PopService over a real store (no network): handle errors with precise codes, delivery
count growth through revive, the DLQ after the group's limit, and pop beside offset pulls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from tidemq.broker.messaging import PullStatus
from tidemq.common import errors, record
from tidemq.common.receipt import MAX_ACK_BATCH, ReceiptHandle
from tidemq.configclient.groups import SubscriptionGroupConfig

from tests.unit.broker.test_pop_state_machine import GROUP, REVIVE, TOPIC, PopMachine


@pytest.fixture
def machine():
    m = PopMachine()
    yield m
    m.teardown()


def pop_bodies(m, count=8, invisible_ms=1000, tags=""):
    popped = m.run(m.pop.pop(GROUP, TOPIC, count, invisible_ms, 0, tags))
    return [r for r in record.iter_records(popped.records)], popped.handles


def test_bad_handles_and_durations_have_precise_codes(machine):
    machine.send(1, 0)
    _, (handle,) = pop_bodies(machine)
    with pytest.raises(errors.InvalidArgument) as bad:
        machine.run(machine.pop.ack(GROUP, "not-a-handle"))
    assert bad.value.code == "INVALID_RECEIPT_HANDLE"
    forged = ReceiptHandle("broker-a", 999, TOPIC, 0, 0).encode()
    with pytest.raises(errors.NotFound) as unknown:
        machine.run(machine.pop.ack(GROUP, forged))
    assert unknown.value.code == "RECEIPT_HANDLE_NOT_FOUND"
    with pytest.raises(errors.InvalidArgument) as negative:
        machine.run(machine.pop.change_invisible(GROUP, handle, -5))
    assert negative.value.code == "INVALID_INVISIBLE_DURATION"
    with pytest.raises(errors.NotFound):  # another group's handle
        machine.run(machine.pop.ack("other", handle))
    machine.clock.offset += 2
    with pytest.raises(errors.PreconditionFailed) as expired:
        machine.run(machine.pop.ack(GROUP, handle))
    assert expired.value.code == "RECEIPT_HANDLE_EXPIRED"


def revive_records(m, since: int) -> list[dict]:
    assert m.store.wait_dispatched(5)
    got = m.store.get_messages(REVIVE, 0, since, 64)
    return [json.loads(bytes(r.body)) for r in record.iter_records(got.records)] if \
        got.records else []


def test_a_batch_ack_acks_the_good_handles_in_one_append_and_says_why_the_rest_failed(machine):
    machine.send(4, 0)
    _, (late,) = pop_bodies(machine, count=1, invisible_ms=1000)
    _, (first, second, done) = pop_bodies(machine, count=3, invisible_ms=60_000)
    machine.run(machine.pop.ack(GROUP, done))
    (others,) = machine.run(machine.pop.pop("g2", TOPIC, 1, 60_000, 0, "")).handles
    machine.clock.offset += 2  # `late` expires; the others are still in flight
    batch = [first, second, late, ReceiptHandle("broker-a", 999, TOPIC, 0, 0).encode(),
             "not-a-handle", ReceiptHandle("broker-b", 0, TOPIC, 0, 0).encode(), others,
             first, done]
    assert machine.store.wait_dispatched(5)
    before = machine.store.max_offset(REVIVE, 0)
    appends = []
    send = machine.messaging.send

    async def counted_send(topic, queue_id, raw, count, **kwargs):
        appends.append((topic, count))
        return await send(topic, queue_id, raw, count, **kwargs)

    machine.messaging.send = counted_send
    outcomes = machine.run(machine.pop.ack_many(GROUP, batch))
    assert [o.receipt_handle for o in outcomes] == batch
    assert [o.code for o in outcomes] == [
        "", "", "RECEIPT_HANDLE_EXPIRED", "RECEIPT_HANDLE_NOT_FOUND", "INVALID_RECEIPT_HANDLE",
        "INVALID_RECEIPT_HANDLE", "RECEIPT_HANDLE_NOT_FOUND", "", ""]
    assert all(o.message for o in outcomes if o.code) and "broker-b" in outcomes[5].message
    # one append of one ACKS record naming the messages acked now: not the duplicate, not `done`
    assert appends == [(REVIVE, 1)]
    assert machine.store.wait_dispatched(5)
    assert machine.store.max_offset(REVIVE, 0) == before + 1
    acked = sorted([ReceiptHandle.decode(h).checkpoint, ReceiptHandle.decode(h).queue_offset]
                   for h in (first, second))
    (record,) = revive_records(machine, before)
    assert record["t"] == "acks" and sorted(record["h"]) == acked
    machine.time_passes(100)  # only `late` comes back (g2's message is g2's business)
    assert [bytes(r.body) for r in pop_bodies(machine)[0]] == [b"m0"]


def test_a_batch_ack_is_bounded_and_an_empty_one_writes_nothing(machine):
    with pytest.raises(errors.InvalidArgument) as big:
        machine.run(machine.pop.ack_many(GROUP, ["x"] * (MAX_ACK_BATCH + 1)))
    assert str(MAX_ACK_BATCH) in big.value.message
    machine.send(1, 0)
    pop_bodies(machine)
    assert machine.store.wait_dispatched(5)
    before = machine.store.max_offset(REVIVE, 0)
    assert machine.run(machine.pop.ack_many(GROUP, [])) == []
    assert machine.store.wait_dispatched(5)
    assert machine.store.max_offset(REVIVE, 0) == before


def test_unacked_comes_back_with_growing_count_then_dies(machine):
    machine.groups.put(SubscriptionGroupConfig(GROUP, retry_max_times=2))
    machine.send(1, 1)
    seen = []
    for _ in range(3):
        (rec,), _ = pop_bodies(machine)
        seen.append((rec.reconsume_times, rec.topic))
        machine.time_passes(2)
    assert seen == [(0, TOPIC), (1, f"%RETRY%{GROUP}"), (2, f"%RETRY%{GROUP}")]
    assert pop_bodies(machine) == ([], [])
    dlq = machine.store.get_messages(f"%DLQ%{GROUP}", 0, 0, 8)
    (dead,) = record.iter_records(dlq.records)
    assert dead.reconsume_times == 3 and dead.properties[record.PROP_RETRY_TOPIC] == TOPIC


def test_a_deleted_topics_in_flight_messages_are_dropped_not_revived(machine):
    """Reviving them would re-create the group's retry topic after an operator deleted both."""
    machine.send(2, 0)
    _, handles = pop_bodies(machine)
    assert len(handles) == 2
    machine.messaging.topics.apply([], [TOPIC], 1 << 31)
    machine.clock.offset += 2
    assert machine.run(machine.pop.revive_due()) == 2  # closed, each with its checkpoint entry
    assert machine.messaging.topics.get(f"%RETRY%{GROUP}") is None
    assert not machine.pop.book.in_flight


def test_progress_counts_unacked_and_redo_below_the_cursor(machine):
    """What the consumer-lag metric adds for pop groups: per queue, the next pop's offset and
    what was popped and is not acked (in flight, or waiting to be handed out again)."""
    machine.send(4, 0)
    _, handles = pop_bodies(machine, count=3)
    machine.run(machine.pop.ack(GROUP, handles[0]))
    assert machine.pop.progress() == {(GROUP, TOPIC, 0): (3, 2)}


def test_pop_and_offset_pulls_share_a_topic(machine):
    machine.send(3, 0)
    popped, handles = pop_bodies(machine)
    for handle in handles:
        machine.run(machine.pop.ack(GROUP, handle))
    pulled = machine.run(machine.messaging.pull(TOPIC, 0, 0, 8, 0, 0, ""))
    assert pulled.status is PullStatus.FOUND and pulled.record_count == 3  # untouched by pop
    assert [bytes(r.body) for r in popped] == [b"m0", b"m1", b"m2"]


def test_exact_tags_and_change_invisible(machine):
    raw = b"".join(record.encode_message(record.OutgoingMessage(TOPIC, b"x%d" % i, tags=tag))[0]
                   for i, tag in enumerate(["tag29685295", "tag32060020", "tag29685295"]))
    machine.run(machine.messaging.send(TOPIC, 0, raw, 3))
    assert machine.store.wait_dispatched(5)
    recs, handles = pop_bodies(machine, tags="tag29685295")
    assert [bytes(r.body) for r in recs] == [b"x0", b"x2"]  # same hash, other tag dropped
    new = machine.run(machine.pop.change_invisible(GROUP, handles[0], 60_000))
    machine.time_passes(2)   # the other one expires, the changed one does not
    again, _ = pop_bodies(machine, tags="tag29685295")
    assert [bytes(r.body) for r in again] == [b"x2"]
    machine.run(machine.pop.ack(GROUP, new))


def test_orderly_pop_is_fifo_per_queue_and_redelivers_in_place(machine):
    from tests.unit.broker.test_pop_state_machine import ORDERED

    machine.groups.put(SubscriptionGroupConfig(GROUP, retry_max_times=1))
    machine.send_ordered(3, 0)

    def pop_ordered(count=1):
        popped = machine.run(machine.pop.pop(GROUP, ORDERED, count, 1000, 0, ""))
        return list(record.iter_records(popped.records)), popped.handles

    (first,), (handle,) = pop_ordered()
    assert bytes(first.body) == b"o0" and first.reconsume_times == 0
    assert pop_ordered() == ([], [])           # nothing of the queue while o0 is in flight
    machine.time_passes(2)                      # o0 expires: handed out again, in place
    (again,), (handle,) = pop_ordered(3)
    assert bytes(again.body) == b"o0" and again.reconsume_times == 1
    assert pop_ordered() == ([], [])
    machine.time_passes(2)                      # the second expiry passes retry_max_times
    dead = machine.store.get_messages(f"%DLQ%{GROUP}", 0, 0, 8)
    (letter,) = record.iter_records(dead.records)
    assert bytes(letter.body) == b"o0" and letter.reconsume_times == 2
    rest, handles = pop_ordered(3)
    assert [bytes(r.body) for r in rest] == [b"o1", b"o2"]
    for h in handles:
        machine.run(machine.pop.ack(GROUP, h))
    machine.restart()
    assert machine.pop.book.attempts == {} and not machine.pop.book.in_flight


@contextmanager
def master_and_slave() -> Iterator[tuple[PopMachine, PopMachine]]:
    """Two pop machines, the second a slave (which leaves reviving be); both torn down."""
    master, replica = PopMachine(), PopMachine()
    try:
        replica.store.become_slave()
        assert replica.run(replica.pop.revive_due()) == 0   # a slave: it leaves reviving be
        yield master, replica
    finally:
        master.teardown()
        replica.teardown()


def replicate(master: PopMachine, replica: PopMachine) -> int:
    """Copy the master's whole CommitLog to the slave and wait it dispatched; its end."""
    end = master.store.commitlog_max_offset()
    replica.store.append_replicated(0, master.store.commitlog.read(0, end))
    assert replica.store.wait_dispatched(5)
    return end


def test_a_promoted_replica_pops_and_acks_from_the_replicated_state_at_once():
    """A pop or an ack on a just-promoted master must not use the book it had as a slave
    (empty: it only replays the revive log on promotion) until its revive round runs: the
    chaos suite saw acked messages handed out again from queue offset 0 right after a master
    kill (seed 20265539)."""
    with master_and_slave() as (master, replica):
        master.send(3, 0)
        _, handles = pop_bodies(master, count=3, invisible_ms=60_000)
        master.run(master.pop.ack(GROUP, handles[0]))
        master.send(1, 0)
        replicate(master, replica)
        replica.store.become_master(2)
        popped, _ = pop_bodies(replica)   # before any revive round
        assert [bytes(r.body) for r in popped] == [b"m3"]
        replica.run(replica.pop.ack(GROUP, handles[1]))   # popped on the old master


def test_a_new_master_replays_the_revive_records_above_its_read_fence():
    """Issue #36 (chaos: acknowledged pops handed out again): a master's reads are fenced at
    the confirmed offset it knew as a slave (a master back at its old epoch: at the one its
    store recorded), and the revive log's last records — a pop's checkpoint, an ack — may lie
    above it until its slaves have them. The pop book is this broker's log, not what
    consumers may read: replayed through the fence, the new master handed the checkpointed
    message out again and kept the acked one in flight (revived into the retry topic later:
    an acked message delivered again)."""
    from tidemq.broker.store.ha import InSyncTracker, ReplicationGate

    with master_and_slave() as (master, replica):
        master.send(3, 0)
        _, first = pop_bodies(master, count=2, invisible_ms=60_000)
        fence = master.store.commitlog_max_offset()   # all the slave knew confirmed
        master.run(master.pop.ack(GROUP, first[0]))
        [third], _ = pop_bodies(master, count=1, invisible_ms=60_000)
        assert bytes(third.body) == b"m2"
        end = replicate(master, replica)
        replica.store.follow_confirmed(fence)
        tracker = InSyncTracker(1, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
        replica.store.set_replication_gate(ReplicationGate(
            tracker, replica.store.commitlog_max_offset, timeout_ms=300))
        replica.store.become_master(2)
        assert replica.store.confirmed_offset() == fence < end   # reads are fenced there
        try:
            popped, _ = pop_bodies(replica)
        except errors.ServiceUnavailable as exc:   # it checkpointed something to hand out
            popped = [str(exc)]
        assert popped == [], "a message in flight was handed out again"
        with pytest.raises(errors.PreconditionFailed, match="acked already"):
            replica.run(replica.pop.change_invisible(GROUP, first[0], 1000))


def test_acks_of_calls_that_arrive_together_share_one_append_and_each_is_answered(machine):
    """Many consumers acking at once (a gateway's clients): one revive-log append of one
    ACKS record for all, each call answered only once its ack is logged, a bad handle failing
    alone."""
    import asyncio

    machine.send(6, 0)
    _, handles = pop_bodies(machine, count=6, invisible_ms=60_000)
    appends = []
    send = machine.messaging.send

    async def counted_send(topic, queue_id, raw, count):
        appends.append(count)
        return await send(topic, queue_id, raw, count)

    machine.messaging.send = counted_send

    async def together():
        calls = [machine.pop.ack(GROUP, h) for h in handles[:5]]
        calls.append(machine.pop.ack_many(GROUP, [handles[5], "not-a-handle"]))
        return await asyncio.gather(*calls)

    *singles, batch = machine.run(together())
    assert singles == [None] * 5
    assert [o.code for o in batch] == ["", "INVALID_RECEIPT_HANDLE"]
    assert appends == [1]  # one record naming the six
    for handle in handles:
        with pytest.raises(errors.PreconditionFailed, match="acked already"):
            machine.run(machine.pop.change_invisible(GROUP, handle, 1000))


def test_a_log_of_per_message_ack_records_replays_beside_acks_records():
    """Revive logs written before ACKS records hold one ACK record per acked message: a
    replay folds both kinds, from their stored bytes, into the same book."""
    from tidemq.broker.pop.book import ACKED, HandleState, PopBook, acks_entry

    book = PopBook()
    records = [
        json.dumps({"t": "ck", "g": GROUP, "topic": TOPIC, "q": 0, "offs": [5, 6, 7, 8],
                    "next": 9, "until": 10_000}).encode(),
        json.dumps({"t": "ack", "ck": 0, "off": 5, "why": ACKED}).encode(),  # the old form
        json.dumps(acks_entry([(0, 6), (0, 7)])).encode(),  # the new one
    ]
    for revive_offset, body in enumerate(records):
        book.apply(revive_offset, body)
    states = {offset: book.state(0, offset, now_ms=1) for offset in (5, 6, 7, 8)}
    assert states == {5: HandleState.DONE, 6: HandleState.DONE, 7: HandleState.DONE,
                      8: HandleState.IN_FLIGHT}


def test_a_revive_whose_closing_record_fails_stores_one_retry_copy_and_refuses_the_ack(machine):
    """The chaos suite's case: the retry copy was appended, then the record that closes the
    delivery was refused (the master fenced). The delivery stays taken — a late ack answers
    EXPIRED instead of succeeding while its copy is out — and moving it again (the next round,
    or a new master replaying the unclosed revive) stores no second copy."""
    machine.send(1, 0)
    _, (handle,) = pop_bodies(machine, count=1, invisible_ms=1000)
    machine.clock.offset += 2
    record_revive = machine.pop._record

    async def refused(entries):
        raise errors.PreconditionFailed("fenced", code="NOT_MASTER")

    machine.pop._record = refused
    assert machine.run(machine.pop.revive_due()) == 0
    machine.pop._record = record_revive
    with pytest.raises(errors.PreconditionFailed) as late:
        machine.run(machine.pop.ack(GROUP, handle))
    assert late.value.code == "RECEIPT_HANDLE_EXPIRED"
    assert machine.run(machine.pop.revive_due()) == 0  # not moved a second time here

    restarted = machine.new_pop_service()  # a new master replays the revive log
    restarted.rebuild()
    assert machine.run(restarted.revive_due()) == 1  # it moves the unclosed delivery again...
    assert machine.store.wait_dispatched(5)
    retry = f"%RETRY%{GROUP}"
    copies = sum(machine.store.max_offset(retry, q) for q in range(
        machine.messaging.topics.get(retry).queues))
    assert copies == 1  # ... and the idempotent move stored no second copy


def test_an_ack_the_replicas_did_not_confirm_is_not_answered_as_done(machine):
    """An ACKS record stored on the master but answered FLUSH_SLAVE_TIMEOUT (the in-sync
    replicas did not confirm it in time) is applied to the book — it is in the log — but the
    ack is refused: answered as done, it would be lost with this master."""
    from tidemq.broker.store import AppendStatus

    machine.send(1, 0)
    _, (handle,) = pop_bodies(machine, count=1, invisible_ms=60_000)
    send = machine.messaging.send

    async def unconfirmed(topic, queue_id, raw, count, **kwargs):
        result = await send(topic, queue_id, raw, count, **kwargs)
        return result._replace(status=AppendStatus.FLUSH_SLAVE_TIMEOUT)

    machine.messaging.send = unconfirmed
    with pytest.raises(errors.ServiceUnavailable) as refused:
        machine.run(machine.pop.ack(GROUP, handle))
    assert refused.value.code == "FLUSH_SLAVE_TIMEOUT"
    machine.messaging.send = send
    machine.run(machine.pop.ack(GROUP, handle))  # applied already: acking again is done
