"""Small helpers around the official RocketMQ 5 Python client, used unmodified."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rocketmq import FilterExpression, Message, SimpleConsumer

from tests.support.processes import wait_until


def message(topic: str, body: bytes, *, tag: str = "", keys: str = "", group: str = "",
            deliver_at_ms: int = 0, properties: dict | None = None) -> Message:
    built = Message()
    built.topic, built.body = topic, body
    if tag:
        built.tag = tag
    if keys:
        built.keys = keys
    if group:
        built.message_group = group
    if deliver_at_ms:
        built.delivery_timestamp = deliver_at_ms
    for name, value in (properties or {}).items():
        built.add_property(name, value)
    return built


@contextmanager
def started(client) -> Iterator:
    client.startup()
    try:
        yield client
    finally:
        client.shutdown()


@contextmanager
def simple_consumer(config, group: str, topic: str,
                    expression: FilterExpression | None = None) -> Iterator[SimpleConsumer]:
    with started(SimpleConsumer(config, group, {topic: expression or FilterExpression()},
                                2)) as consumer:
        yield consumer


def drain(consumer, want: int, timeout: float = 30.0, *, ack: bool = True) -> list:
    """Receive (and ack) until `want` messages came; all of them, in arrival order."""
    got: list = []

    def enough() -> bool:
        for received in consumer.receive(32, 15) or []:
            got.append(received)
            if ack:
                consumer.ack(received)
        return len(got) >= want

    wait_until(enough, timeout, interval=0.05, message=f"{want} messages received")
    return got
