"""Transactions as a hypothesis state machine over the real TransactionService and store:
prepare, commit, rollback, repeated and conflicting ends, check-backs answered (or not) by a
live producer, discards after the last check, and restarts (a new service replaying the half
and op topics from the saved progress), in any interleaving.

Invariants: a committed transaction's message is on its real topic and queue exactly once; a
rolled-back or discarded one never is; nothing prepared is visible before its commit; a restart
rebuilds the same open set; every end answers what happened before it (repeat -> already
resolved, conflict -> TRANSACTION_ALREADY_RESOLVED)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.broker.idempotence import IdempotentSends, IdempotentSettings
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.store import GetStatus, MetadataFile
from tidemq.broker.topic_table import TopicConfig
from tidemq.broker.transactions import CheckSettings, TransactionService, TxnState
from tidemq.common import errors, record

from tests.support.clock import FakeClock
from tests.support.local_broker import LocalBroker

TOPIC, GROUP, QUEUES = "orders", "txn-producers", 2
CHECKS = CheckSettings(timeout_ms=1000, interval_ms=2000, max_checks=2)


class TxnWorld:
    """A store, a topic table and a TransactionService, restartable, without a network."""

    def __init__(self, *, slave: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="txn-sm-"))
        self.broker = LocalBroker(self.dir, [TopicConfig(TOPIC, QUEUES)], slave=slave)
        self.store, self.messaging = self.broker.store, self.broker.messaging
        self.topics = self.broker.system_topics()
        self.offsets = ConsumerOffsetManager(MetadataFile(self.dir / "offsets.json"))
        self.clock = FakeClock.following_real_time()
        self.loop = asyncio.new_event_loop()
        self.service = self.new_service()

    def new_service(self) -> TransactionService:
        service = TransactionService(  # a new idempotence table too: rebuilt from the log
            self.messaging, self.topics, self.offsets, settings=CHECKS, clock=self.clock,
            idempotence=IdempotentSends(self.messaging, IdempotentSettings()))
        service.rebuild()
        return service

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def prepare(self, body: bytes, queue_id: int = 0, group: str = GROUP):
        raw, unique_id = record.encode_message(record.OutgoingMessage(
            TOPIC, body, properties={record.PROP_PRODUCER_GROUP: group}))
        result = self.run(self.service.prepare(TOPIC, queue_id, raw, 1))
        return unique_id, result.physical_offsets[0]

    def end(self, txn: tuple[str, int], commit: bool | None):
        return self.run(self.service.end(GROUP, txn[0], txn[1], commit))

    def visible(self) -> list[tuple[int, bytes, int]]:
        """(queue, body, transaction bits) of every message on the real topic."""
        assert self.store.wait_dispatched(5)
        found = []
        for q in range(QUEUES):
            got = self.store.get_messages(TOPIC, q, 0, 1000)
            if got.status is GetStatus.FOUND:
                found += [(q, bytes(r.body), r.sys_flag & record.TRANSACTION_TYPE_MASK)
                          for r in record.iter_records(got.records)]
        return found

    def close(self) -> None:
        self.loop.close()
        self.broker.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class TxnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = TxnWorld()
        self.txns: list[tuple[str, int]] = []
        self.bodies: list[bytes] = []
        self.queues: list[int] = []
        self.outcome: dict[int, str] = {}  # index -> COMMITTED / ROLLED_BACK / DISCARDED
        self.checked: set[int] = set()
        self.stream = None

    def teardown(self) -> None:
        self.world.close()

    @rule(queue=st.integers(0, QUEUES - 1))
    def prepare(self, queue):
        body = b"t%d" % len(self.txns)
        self.txns.append(self.world.prepare(body, queue))
        self.bodies.append(body)
        self.queues.append(queue)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), commit=st.booleans())
    def end(self, data, commit):
        i = data.draw(st.integers(0, len(self.txns) - 1))
        wanted = "COMMITTED" if commit else "ROLLED_BACK"
        before = self.outcome.get(i)
        if before is None:
            state, already = self.world.end(self.txns[i], commit)
            assert (state.value, already) == (wanted, False)
            self.outcome[i] = wanted
        elif before == wanted:
            assert self.world.end(self.txns[i], commit) == (TxnState(wanted), True)
        else:
            with pytest.raises(errors.PreconditionFailed) as refused:
                self.world.end(self.txns[i], commit)
            assert refused.value.code == "TRANSACTION_ALREADY_RESOLVED"

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def ask_unknown(self, data):
        i = data.draw(st.integers(0, len(self.txns) - 1))
        state, already = self.world.end(self.txns[i], None)
        assert state.value == self.outcome.get(i, "PENDING") and not already

    @rule()
    def end_a_forged_transaction(self):
        with pytest.raises(errors.NotFound) as missing:
            self.world.end(("no-such-id", 0), True)
        assert missing.value.code == "TRANSACTION_NOT_FOUND"

    @rule()
    def producer_connects(self):
        if self.stream is None:
            self.stream = self.world.service.producers.open_stream(GROUP, "client-1")

    @rule(seconds=st.sampled_from([0.5, 1.5, 3]))
    def time_passes_and_checks_run(self, seconds):
        self.world.clock.offset += seconds
        before = set(self.world.service.book.pending)
        self.world.run(self.world.service.check_round())
        gone = before - set(self.world.service.book.pending)
        for i, (_, physical) in enumerate(self.txns):
            half = record.decode(self.world.store.read_record(physical)).queue_offset
            if half in gone and i not in self.outcome:
                self.outcome[i] = "DISCARDED"

    @precondition(lambda self: self.stream is not None and not self.stream.empty())
    @rule(answer=st.sampled_from([True, False, None]))
    def producer_answers_a_check(self, answer):
        check = self.stream.get_nowait()
        index = next(i for i, t in enumerate(self.txns) if t[0] == check.transaction_id)
        self.checked.add(index)
        assert check.check_times >= 1
        assert record.decode(check.record).properties[record.PROP_REAL_TOPIC] == TOPIC
        try:
            state, _ = self.world.end((check.transaction_id, check.half_offset), answer)
        except errors.PreconditionFailed:  # resolved meanwhile the other way
            return
        if answer is not None and index not in self.outcome:
            self.outcome[index] = state.value

    @precondition(lambda self: len(self.outcome) < len(self.txns))
    @rule(data=st.data())
    def crash_between_the_commit_and_its_op_record(self, data):
        """The broker dies after appending a commit's message, before its op record: after
        the restart the transaction is still open, and committing it again (a check-back
        answered "commit") must not store the message twice."""
        i = data.draw(st.sampled_from([i for i in range(len(self.txns)) if i not in self.outcome]))
        raw = self.world.store.read_record(self.txns[i][1])
        self.world.run(self.world.service._append_committed(raw, record.decode(raw)))
        self.restart()
        assert self.world.end(self.txns[i], True) == (TxnState.COMMITTED, False)
        self.outcome[i] = "COMMITTED"

    @rule()
    def restart(self):
        pending = set(self.world.service.book.pending)
        self.world.service = self.world.new_service()
        self.stream = None
        assert set(self.world.service.book.pending) == pending

    @invariant()
    def committed_visible_exactly_once_others_never(self):
        visible = self.world.visible()
        expected = sorted((self.queues[i], self.bodies[i], record.TRANSACTION_COMMIT_TYPE)
                          for i, state in self.outcome.items() if state == "COMMITTED")
        assert sorted(visible) == expected


TestTransactions = TxnMachine.TestCase
TestTransactions.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


@pytest.fixture
def world():
    w = TxnWorld()
    yield w
    w.close()


def test_a_batch_and_a_message_without_producer_group_are_refused(world):
    raw, _ = record.encode_message(record.OutgoingMessage(TOPIC, b"x"))
    with pytest.raises(errors.InvalidArgument) as missing:
        world.run(world.service.prepare(TOPIC, 0, raw, 1))
    assert missing.value.code == "PRODUCER_GROUP_MISSING"
    with pytest.raises(errors.InvalidArgument) as batch:
        world.run(world.service.prepare(TOPIC, 0, raw + raw, 2))
    assert batch.value.code == "TRANSACTION_BATCH"


def test_unanswered_checks_end_in_a_discard_and_the_progress_moves(world):
    txn = world.prepare(b"lonely")
    stream = world.service.producers.open_stream(GROUP, "c")
    for expected_times in (1, 2):
        world.clock.offset += 2.5
        world.run(world.service.check_round())
        assert stream.get_nowait().check_times == expected_times
    world.clock.offset += 2.5
    world.run(world.service.check_round())
    assert world.end(txn, None) == (TxnState.DISCARDED, False)
    assert stream.empty() and world.visible() == []
    assert world.service.book.half_progress == 1
    assert ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 1) in world.offsets.query("CID_SYS_RMQ_TRANS")
    with pytest.raises(errors.PreconditionFailed) as late:
        world.end(txn, True)
    assert late.value.code == "TRANSACTION_ALREADY_RESOLVED"


def test_a_restart_replays_from_the_saved_progress_only(world):
    for i in range(3):
        world.end(world.prepare(b"done%d" % i), i % 2 == 0)
    open_one = world.prepare(b"open")
    world.run(world.service.check_round())  # advances the progress past the resolved three
    world.service = world.new_service()
    assert world.service.book.half_progress == 3
    assert list(world.service.book.pending) == [3]
    assert world.end(open_one, True) == (TxnState.COMMITTED, False)
    assert sorted(body for _, body, _ in world.visible()) == [b"done0", b"done2", b"open"]


def test_a_promoted_replica_replays_and_only_a_master_checks_back(world):
    done = world.prepare(b"done")
    world.end(done, True)
    open_one = world.prepare(b"open")
    replica = TxnWorld(slave=True)
    try:
        end = world.store.commitlog_max_offset()
        replica.store.append_replicated(0, world.store.commitlog.read(0, end))
        replica.clock.offset = world.clock.offset = 10
        assert replica.run(replica.service.check_round()) == 0   # a slave never checks back
        with pytest.raises(errors.PreconditionFailed) as slave:
            replica.end(open_one, True)
        assert slave.value.code == "NOT_MASTER"
        replica.store.become_master(2)
        stream = replica.service.producers.open_stream(GROUP, "c")
        assert replica.run(replica.service.check_round()) == 1   # replayed, then checked
        assert stream.get_nowait().transaction_id == open_one[0]
        assert replica.end(done, True) == (TxnState.COMMITTED, True)
        assert replica.end(open_one, True) == (TxnState.COMMITTED, False)
        assert sorted(body for _, body, _ in replica.visible()) == [b"done", b"open"]
    finally:
        replica.close()
