"""FIFO message groups in the producer: a group's messages go to crc32(group) % the writable
queues, in send order, and are retried only there (never moved to another queue).

Routes and broker calls are the retry tests' stand-ins: the queue choice is the subject; the
real path (gateway → brokers, one queue per group) is tests/e2e/test_http_fifo_delay.py."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.client import Message
from tidemq.client.message import MessageQueue
from tidemq.client.producer import group_queue
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors

from tests.unit.client.test_producer_retries import ROUTE, make_producer

QUEUES = [MessageQueue("t", "broker-a", 0), MessageQueue("t", "broker-a", 1),
          MessageQueue("t", "broker-b", 0), MessageQueue("t", "broker-b", 1)]
ADDRS = {"broker-a": "a:1", "broker-b": "b:1"}


@given(st.text(min_size=1, max_size=40))
def test_a_group_maps_to_crc32_of_its_name_modulo_the_writable_queues(name):
    assert group_queue(ROUTE, name) == QUEUES[zlib.crc32(name.encode()) % 4]


def test_every_send_of_a_group_goes_to_its_queue():
    producer = make_producer({})
    for name in ("order-1", "order-2", "order-3"):
        expected = group_queue(ROUTE, name)
        results = [producer.send(Message("t", b"x", message_group=name)) for _ in range(5)]
        assert {(r.broker_name, r.queue_id) for r in results} == {
            (expected.broker_name, expected.queue_id)}


def test_send_many_keeps_each_groups_messages_in_one_queue_in_input_order():
    producer = make_producer({})
    names = [f"g{i % 7}" for i in range(60)]
    messages = [Message("t", f"{i}".encode(), message_group=name)
                for i, name in enumerate(names)] + [Message("t", b"plain")] * 8
    results = producer.send_many(messages)
    for name in set(names):
        mine = [r for r, n in zip(results, names, strict=False) if n == name]
        expected = group_queue(ROUTE, name)
        assert {(r.broker_name, r.queue_id) for r in mine} == {
            (expected.broker_name, expected.queue_id)}
        assert [r.queue_offset for r in mine] == sorted(r.queue_offset for r in mine)


def test_send_batch_goes_to_the_queue_of_its_first_messages_group():
    producer = make_producer({})
    results = producer.send_batch([Message("t", b"a", message_group="order-9"),
                                   Message("t", b"b", message_group="order-9")])
    expected = group_queue(ROUTE, "order-9")
    assert {(r.broker_name, r.queue_id) for r in results} == {
        (expected.broker_name, expected.queue_id)}


@pytest.mark.parametrize("send", ["send", "send_many"])
def test_a_group_is_retried_on_its_queue_never_moved_to_another(send):
    name = "order-1"
    home = group_queue(ROUTE, name)
    producer = make_producer({ADDRS[home.broker_name]: errors.ServiceUnavailable("down")})
    message = Message("t", b"x", message_group=name)
    with pytest.raises(errors.ServiceUnavailable):
        producer.send(message) if send == "send" else producer.send_many([message])
    assert len(producer.brokers.calls) == 3
    assert {(addr, queue_id) for addr, queue_id, _ in producer.brokers.calls} == {
        (ADDRS[home.broker_name], home.queue_id)}


def test_a_group_keeps_its_queue_while_its_broker_group_elects_a_master():
    electing = TopicRoute("t", ROUTE.queues, {
        "broker-a": BrokerGroup("c", "broker-a", {1: "a:2"}),  # a slave, no master
        "broker-b": ROUTE.brokers["broker-b"]})
    assert len(electing.write_queues()) == 2
    assert [group_queue(electing, f"g{i}") for i in range(50)] == [
        group_queue(ROUTE, f"g{i}") for i in range(50)]


def test_no_writable_queue_is_service_unavailable():
    route = TopicRoute("t", (QueueLayout("broker-a", 2, 2, 2),), ROUTE.brokers)  # read-only
    with pytest.raises(errors.ServiceUnavailable):
        group_queue(route, "g")


@pytest.mark.parametrize("name", ["a\x01b", "line\nbreak", "g" * 256])
def test_a_bad_message_group_is_invalid_message(name):
    with pytest.raises(errors.InvalidArgument) as info:
        Message("t", b"x", message_group=name).validate()
    assert info.value.code == "INVALID_MESSAGE"
