"""Scheduled delivery over a real MessageStore (no network), driven by a test clock: delay
levels and exact times wait in SCHEDULE_TOPIC_XXXX and reach their real queue when due, never
before, with the schedule properties gone and the body untouched; bad delays are refused; a
new deliverer goes on from the committed progress; retries wait their RocketMQ delay level."""

from __future__ import annotations

import time

import pytest
from tidemq.broker.retry import RetryService
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.client.message import Message
from tidemq.common import delays, errors, record
from tidemq.common.system_topics import SCHEDULE_TOPIC, retry_topic
from tidemq.configclient.groups import SubscriptionGroupConfig

from tests.support.clock import FakeClock
from tests.unit.broker.scheduling import LEVELS, TOPIC, Scheduled


@pytest.fixture
def broker(tmp_path):
    scheduled = Scheduled(tmp_path, FakeClock(time.time()))
    yield scheduled
    scheduled.close()


def test_a_delay_level_waits_in_its_queue_then_reaches_the_real_queue(broker):
    broker.send(Message(TOPIC, b"later", tags="t", delay_level=3))   # 10 s
    assert broker.tick() == 0 and broker.real() == []
    assert broker.store.max_offset(SCHEDULE_TOPIC, 2) == 1  # queue level - 1
    assert broker.deliverer.waiting() == 1
    broker.clock.offset = 9.0
    assert broker.tick() == 0
    broker.clock.offset = 10.1
    assert broker.tick() == 1
    (delivered,) = broker.real()
    assert bytes(delivered.body) == b"later" and delivered.tags == "t"
    assert delivered.topic == TOPIC and delivered.queue_id == 0
    assert not delivered.sys_flag & record.SYS_FLAG_SCHEDULED
    for name in (record.PROP_DELAY, record.PROP_REAL_TOPIC, record.PROP_TIMER_OUT_MS):
        assert name not in delivered.properties
    assert broker.tick() == 0 and len(broker.real()) == 1   # moved once
    assert broker.deliverer.waiting() == 0 and broker.deliverer.delivered == 1


def test_an_exact_time_is_kept_in_the_wheel_and_never_delivered_early(broker):
    due = broker.clock.ms() + 3 * 3600 * 1000   # a coarse level: placed finer on its way
    broker.send(Message(TOPIC, b"at", deliver_at_ms=due), queue_id=1)
    for ahead_s in (60, 3000, 10_000, 10_790, 10_799.5):
        broker.clock.offset = ahead_s
        broker.tick()
        if broker.clock.ms() < due:
            assert broker.real(1) == []
    broker.clock.offset = 10_801
    broker.tick()
    (delivered,) = broker.real(1)
    assert bytes(delivered.body) == b"at"
    assert record.PROP_TIMER_DELIVER_MS not in delivered.properties


def test_a_time_in_the_past_and_a_plain_record_of_the_batch_are_stored_at_once(broker):
    broker.send(Message(TOPIC, b"plain"), Message(TOPIC, b"past", deliver_at_ms=1),
                Message(TOPIC, b"soon", delay_level=1))
    plain, past = broker.real()
    assert [bytes(plain.body), bytes(past.body)] == [b"plain", b"past"]
    assert record.PROP_TIMER_DELIVER_MS not in past.properties
    assert not past.sys_flag & record.SYS_FLAG_SCHEDULED


@pytest.mark.parametrize("message, code", [
    (Message(TOPIC, b"x", delay_level=19), "INVALID_DELAY"),
    (Message(TOPIC, b"x", delay_level=-1), "INVALID_DELAY"),
    (Message(TOPIC, b"x", deliver_at_ms=-5), "INVALID_DELAY"),
    (Message(TOPIC, b"x", delay_level=2, deliver_at_ms=10**13), "INVALID_DELAY"),
])
def test_the_client_refuses_a_bad_delay(broker, message, code):
    with pytest.raises(errors.InvalidArgument) as caught:
        broker.send(message)
    assert caught.value.code == code


def test_the_broker_refuses_a_time_beyond_max_delay_and_a_bad_property(broker):
    too_far = broker.clock.ms() + delays.DEFAULT_MAX_DELAY_MS + 60_000
    with pytest.raises(errors.InvalidArgument) as caught:
        broker.send(Message(TOPIC, b"x", deliver_at_ms=too_far))
    assert caught.value.code == "DELAY_TOO_LONG"
    raw = record.encode(TOPIC, b"x", properties=record.encode_properties(
        {record.PROP_DELAY: "42"}), sys_flag=record.SYS_FLAG_SCHEDULED)
    with pytest.raises(errors.InvalidArgument) as caught:
        broker.run(broker.schedule.send(TOPIC, 0, raw, 1))
    assert caught.value.code == "INVALID_DELAY"
    assert broker.real() == []


def test_a_new_deliverer_goes_on_from_the_committed_progress(broker):
    now = broker.clock.ms()
    broker.send(*[Message(TOPIC, f"m{i}".encode(), deliver_at_ms=now + 1000 + i * 700)
                  for i in range(10)])
    broker.clock.offset = 4.0
    broker.tick()
    first = len(broker.real())
    assert 0 < first < 10
    broker.offsets.persist()
    broker.deliverer = broker.new_deliverer()   # a restart: progress from the offset table
    broker.clock.offset = 20.0
    broker.tick()
    bodies = [bytes(r.body) for r in broker.real()]
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(10))  # none twice


def test_a_retry_waits_its_delay_level_in_the_schedule_topic(broker):
    groups = SubscriptionGroupTable()
    groups.put(SubscriptionGroupConfig("g", retry_max_times=5, retry_queue_nums=1))
    retry = RetryService(broker.messaging, groups, broker.topics, schedule=broker.schedule)
    result = broker.run(broker.messaging.send(
        TOPIC, 0, record.encode_message(record.OutgoingMessage(TOPIC, b"fails"))[0], 1))
    moved = broker.run(retry.send_back("g", result.physical_offsets[0]))
    assert moved.topic == retry_topic("g") and moved.reconsume_times == 1
    assert broker.store.wait_dispatched(5)
    assert broker.store.max_offset(SCHEDULE_TOPIC, delays.retry_delay_level(0) - 1) == 1
    broker.clock.offset = LEVELS[delays.retry_delay_level(0) - 1] / 1000 + 0.5
    assert broker.tick() == 1
    assert broker.store.wait_dispatched(5)
    got = broker.store.get_messages(retry_topic("g"), 0, 0, 10)
    (again,) = record.iter_records(got.records)
    assert bytes(again.body) == b"fails" and again.reconsume_times == 1
    assert again.properties[record.PROP_RETRY_TOPIC] == TOPIC


def test_retry_levels_follow_rocketmq():
    assert [delays.retry_delay_level(n) for n in (0, 1, 2, 15, 16, 40)] == \
        [3, 4, 5, 18, 18, 18]
