"""Messaging (send/pull domain) over a real MessageStore in a temp dir: no network."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tidemq.broker.messaging import PullStatus, tag_hashes
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import record
from tidemq.common.errors import (
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    TopicNotExist,
)

from tests.support.local_broker import LocalBroker
from tests.support.processes import wait_until


@pytest.fixture
def messaging(tmp_path):
    local = LocalBroker(tmp_path, [TopicConfig("t", 2), TopicConfig("ro", 1, perm=2),
                                   TopicConfig("wo", 1, perm=4)],
                        long_poll_max_ms=30_000, wake_long_polls=True)
    yield local.messaging
    local.close()


def batch(topic, n, tags=""):
    return b"".join(record.encode_message(record.OutgoingMessage(topic, b"m%d" % i, tags=tags))[0]
                    for i in range(n))


def test_send_then_pull(messaging):
    result = asyncio.run(messaging.send("t", 1, batch("t", 3), 3))
    assert result.first_queue_offset == 0 and len(result.physical_offsets) == 3
    assert messaging.store.wait_dispatched(5)
    outcome = asyncio.run(messaging.pull("t", 1, 0, 10, 0, 0, ""))
    assert outcome.status is PullStatus.FOUND and outcome.record_count == 3
    assert outcome.next_begin_offset == 3
    assert [bytes(r.body) for r in record.iter_records(outcome.records)] == [b"m0", b"m1", b"m2"]
    assert asyncio.run(messaging.pull("t", 1, 3, 10, 0, 0, "")).status is PullStatus.NO_NEW_MSG
    illegal = asyncio.run(messaging.pull("t", 1, 10, 10, 0, 0, ""))
    assert (illegal.status, illegal.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, 3)
    assert asyncio.run(messaging.pull("t", 0, 4, 10, 0, 0, "")).status is PullStatus.OFFSET_ILLEGAL
    assert messaging.queue_offsets("t") == [(0, 0, 0), (1, 0, 3)]
    assert messaging.view(result.physical_offsets[1])[record.OFF_BODY_LEN + 4:][:2] == b"m1"
    with pytest.raises(NotFound):
        messaging.view(result.physical_offsets[1] + 1)


def test_held_pull_wakes_on_send(messaging):
    answers = []
    puller = threading.Thread(target=lambda: answers.append(
        asyncio.run(messaging.pull("t", 0, 0, 10, 0, 30_000, ""))))
    puller.start()
    wait_until(lambda: messaging.holds.held_count() == 1, 5, message="held pull")
    asyncio.run(messaging.send("t", 0, batch("t", 2), 2))
    puller.join(20)
    assert answers[0].status is PullStatus.FOUND and answers[0].record_count == 2


def _pull_in_thread(messaging, offset, expression):
    answers = []
    puller = threading.Thread(target=lambda: answers.append(
        asyncio.run(messaging.pull("t", 0, offset, 10, 0, 30_000, expression))))
    puller.start()
    return puller, answers


def test_held_filtered_pull_answers_past_non_matching_arrivals(messaging):
    """Woken by messages its filter skips, a held pull answers NO_MATCHED_MSG with the new end
    as next offset: the consumer commits past them instead of showing them as lag."""
    puller, answers = _pull_in_thread(messaging, 0, "B")
    wait_until(lambda: messaging.holds.held_count() == 1, 5, message="held pull")
    asyncio.run(messaging.send("t", 0, batch("t", 2, tags="A"), 2))
    puller.join(20)
    assert (answers[0].status, answers[0].next_begin_offset) == (PullStatus.NO_MATCHED_MSG, 2)

    puller, answers = _pull_in_thread(messaging, 2, "B")  # the consumer pulls again from there
    wait_until(lambda: messaging.holds.held_count() == 1, 5, message="held pull at the end")
    asyncio.run(messaging.send("t", 0, batch("t", 1, tags="B"), 1))
    puller.join(20)
    assert answers[0].status is PullStatus.FOUND
    assert [r.tags for r in record.iter_records(answers[0].records)] == ["B"]
    assert answers[0].next_begin_offset == 3


def test_filtered_pull_over_only_non_matching_messages_answers_at_once_with_the_end(messaging):
    """Phantom lag: a tag-filtered consumer behind non-matching messages at the end of a queue
    was held there (30 s here) instead of being told to move to the end."""
    asyncio.run(messaging.send("t", 0, batch("t", 3, tags="A"), 3))
    assert messaging.store.wait_dispatched(5)
    puller, answers = _pull_in_thread(messaging, 0, "B")
    wait_until(lambda: answers or messaging.holds.held_count() == 1, 10,
               message="the filtered pull to answer or be held")
    assert answers, "held behind messages its filter skips"
    assert (answers[0].status, answers[0].next_begin_offset) == (PullStatus.NO_MATCHED_MSG, 3)
    puller.join(5)


def test_errors(messaging):
    with pytest.raises(TopicNotExist):
        asyncio.run(messaging.send("nope", 0, batch("nope", 1), 1))
    with pytest.raises(InvalidArgument, match="out of range"):
        asyncio.run(messaging.send("t", 2, batch("t", 1), 1))
    with pytest.raises(PreconditionFailed) as err:
        asyncio.run(messaging.send("ro", 0, batch("ro", 1), 1))
    assert err.value.code == "NO_PERMISSION"
    with pytest.raises(PreconditionFailed):
        asyncio.run(messaging.pull("wo", 0, 0, 1, 0, 0, ""))
    with pytest.raises(InvalidArgument, match="record_count"):
        asyncio.run(messaging.send("t", 0, batch("t", 2), 1))
    with pytest.raises(PayloadTooLarge):
        asyncio.run(messaging.send("t", 0, record.encode("t", b"x" * 5000), 1))
    with pytest.raises(InvalidArgument, match="queue_offset"):
        asyncio.run(messaging.pull("t", 0, -1, 1, 0, 0, ""))
    assert messaging.store.max_offset("t", 0) == 0


@pytest.mark.parametrize("expression,expected", [
    ("", None), ("*", None), ("A", {"A"}), ("A || B", {"A", "B"}), (" A||B ", {"A", "B"}),
])
def test_tag_expressions(expression, expected):
    hashes = tag_hashes(expression)
    assert hashes == (None if expected is None else {record.tag_hash(t) for t in expected})


def test_bad_tag_expression():
    with pytest.raises(InvalidArgument):
        tag_hashes("A || ")


def test_slave_rejects_sends(messaging):
    messaging.accepts_writes = False
    with pytest.raises(PreconditionFailed, match="slave") as err:
        asyncio.run(messaging.send("t", 0, batch("t", 1), 1))
    assert err.value.code == "NO_PERMISSION"


def test_a_slave_never_calls_an_offset_past_its_log_illegal(messaging):
    """A slave may hold less than its master (behind, or back with a damaged disk): a reader
    past its log is told nothing is new and keeps its offset, as RocketMQ's slaves do not
    correct offsets; a master answers OFFSET_ILLEGAL (a Kafka client told so resets its group
    to the earliest offset and re-reads the partition: the chaos run's compound disk faults)."""
    asyncio.run(messaging.send("t", 1, batch("t", 3), 3))
    assert messaging.store.wait_dispatched(5)
    assert asyncio.run(messaging.pull("t", 1, 10, 10, 0, 0, "")).status is \
        PullStatus.OFFSET_ILLEGAL
    messaging.store._slave = True   # what become_slave sets; the pull path reads is_master
    try:
        for queue_id, offset in ((1, 10), (0, 4)):   # past the end; a queue it holds nothing of
            past = asyncio.run(messaging.pull("t", queue_id, offset, 10, 0, 0, ""))
            assert (past.status, past.next_begin_offset) == (PullStatus.NO_NEW_MSG, offset)
        assert asyncio.run(messaging.pull("t", 1, 0, 10, 0, 0, "")).record_count == 3
    finally:
        messaging.store._slave = False
