"""The official RocketMQ 5 Python client's Producer against gateway-grpc: sync and async
sends, FIFO by message group, delay by delivery timestamp, transactions with a checker."""

from __future__ import annotations

import time

import pytest
from rocketmq import Message, Producer, SimpleConsumer, FilterExpression

from tests.support.processes import wait_until


def _message(topic: str, body: bytes, tag: str = "", keys: str = "") -> Message:
    message = Message()
    message.topic, message.body = topic, body
    if tag:
        message.tag = tag
    if keys:
        message.keys = keys
    return message


def _drain(consumer, want: int, timeout: float = 30.0) -> list:
    got = []

    def enough():
        for message in consumer.receive(32, 15) or []:
            got.append(message)
            consumer.ack(message)
        return len(got) >= want

    wait_until(enough, timeout, interval=0.05, message=f"{want} messages received")
    return got


def test_sync_and_async_send_reach_a_simple_consumer(config):
    producer = Producer(config, ("RmqNormal",))
    producer.startup()
    consumer = SimpleConsumer(config, "rmq-normal", {"RmqNormal": FilterExpression()}, 2)
    consumer.startup()
    try:
        receipts = [producer.send(_message("RmqNormal", f"sync-{i}".encode(), "t", f"k{i}"))
                    for i in range(5)]
        futures = [producer.send_async(_message("RmqNormal", f"async-{i}".encode()))
                   for i in range(5)]
        receipts += [f.result(timeout=10) for f in futures]
        assert len({r.message_id for r in receipts}) == 10
        got = _drain(consumer, 10)
        assert sorted(m.body for m in got) == sorted(
            [f"sync-{i}".encode() for i in range(5)] + [f"async-{i}".encode() for i in range(5)])
        sent_ids = {r.message_id for r in receipts}
        assert {m.message_id for m in got} == sent_ids
        tagged = [m for m in got if m.body.startswith(b"sync")]
        assert all(m.tag == "t" and m.delivery_attempt == 1 for m in tagged)
    finally:
        consumer.shutdown()
        producer.shutdown()
