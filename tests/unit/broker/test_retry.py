"""RetryService over a real MessageStore (no network): a given-back message moves to the
group's retry topic with reconsume_times + 1, to its DLQ past retry_max_times, and back to
its original topic on re-drive; system topics are defined through the given callable."""

from __future__ import annotations

import asyncio

import pytest
from tidemq.broker.retry import RetryService
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import errors, record
from tidemq.configclient.groups import SubscriptionGroupConfig

from tests.support.local_broker import LocalBroker


@pytest.fixture
def setup(tmp_path):
    local = LocalBroker(tmp_path, [TopicConfig("orders", 2)])
    groups = SubscriptionGroupTable()
    groups.put(SubscriptionGroupConfig("g", retry_max_times=2, retry_queue_nums=3))
    # no timer here: retries are visible at once (their delay: tests/unit/broker/test_schedule)
    service = RetryService(local.messaging, groups, local.system_topics())
    yield service, local.defined
    local.close()


def send(service, body=b"pay") -> int:
    raw, _ = record.encode_message(record.OutgoingMessage("orders", body, tags="t"))
    result = asyncio.run(service.messaging.send("orders", 1, raw, 1))
    return result.physical_offsets[0]


def stored(service, topic, queue_id, queue_offset) -> record.Record:
    assert service.messaging.store.wait_dispatched(5)
    got = service.messaging.store.get_messages(topic, queue_id, queue_offset, 1)
    return next(record.iter_records(got.records))


def test_retries_grow_then_the_message_dies_then_is_redriven(setup):
    service, defined = setup
    offset, first = send(service), None
    for expected in (1, 2):
        moved = asyncio.run(service.send_back("g", offset))
        assert (moved.topic, moved.reconsume_times, moved.dead_letter) == (
            "%RETRY%g", expected, False)
        again = stored(service, moved.topic, moved.queue_id, moved.queue_offset)
        first = first or again.properties[record.PROP_FIRST_FAILURE_MS]
        assert again.reconsume_times == expected and bytes(again.body) == b"pay"
        assert again.properties[record.PROP_RETRY_TOPIC] == "orders"
        assert again.properties[record.PROP_FIRST_FAILURE_MS] == first  # the first one stays
        assert record.PROP_NOT_BEFORE_MS not in again.properties  # the timer waits instead
        assert again.tags == "t"
        offset = again.physical_offset
    dead = asyncio.run(service.send_back("g", offset))
    assert (dead.topic, dead.reconsume_times, dead.dead_letter) == ("%DLQ%g", 3, True)
    letter = stored(service, dead.topic, 0, dead.queue_offset)
    assert defined == [("%RETRY%g", 3), ("%DLQ%g", 1)]  # each defined once, on first use

    with pytest.raises(errors.PreconditionFailed):  # a dead letter is not given back again
        asyncio.run(service.send_back("g", letter.physical_offset))
    back = asyncio.run(service.redrive("g", letter.physical_offset))
    assert back.topic == "orders"
    home = stored(service, "orders", back.queue_id, back.queue_offset)
    assert home.reconsume_times == 0 and bytes(home.body) == b"pay" and home.topic == "orders"


def test_redrive_refuses_what_is_not_a_dead_letter_of_the_group(setup):
    service, _ = setup
    offset = send(service)
    with pytest.raises(errors.PreconditionFailed):
        asyncio.run(service.redrive("g", offset))


def test_zero_retries_goes_straight_to_the_dlq(setup):
    service, _ = setup
    service.groups.put(SubscriptionGroupConfig("strict", retry_max_times=0))
    assert asyncio.run(service.send_back("strict", send(service))).dead_letter
