"""Producer retry policy with the route and broker calls replaced by stand-ins.

The broker is not the subject here: these tests pin which broker group each attempt goes to,
how many attempts are made and which errors are retried (the real path is covered in
tests/integration/client).
"""

from __future__ import annotations

import pytest
from tidemq.client import Message, Producer
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors
from tidemq.v1 import broker_pb2

ROUTE = TopicRoute(
    "t",
    (QueueLayout("broker-a", 2, 2, 6), QueueLayout("broker-b", 2, 2, 6)),
    {"broker-a": BrokerGroup("c", "broker-a", {0: "a:1"}),
     "broker-b": BrokerGroup("c", "broker-b", {0: "b:1"})},
)


class StubRoutes:
    def __init__(self) -> None:
        self.refreshes = 0

    def get(self, topic):
        if topic != "t":
            raise errors.TopicNotExist(f"topic {topic!r} does not exist")
        return ROUTE

    def refresh(self, topic):
        self.refreshes += 1
        return self.get(topic)

    def invalidate(self, topic):
        pass


class StubBrokers:
    """Answers Send like a broker, or raises the error configured for an address."""

    def __init__(self, failures: dict[str, errors.TideMQError]) -> None:
        self.failures = failures
        self.calls: list[tuple[str, int, int]] = []

    def get(self, addr):
        stub = self

        class Client:
            def call_unless(self, method, request, *, timeout, abandon, check_every_s,
                            bulk=b""):
                return self.call(method, request, timeout)

            def call(self, method, request, timeout=None, idempotent=False):
                assert method == "Send" and timeout and timeout > 0
                stub.calls.append((addr, request.queue_id, request.record_count))
                if addr in stub.failures:
                    raise stub.failures[addr]
                return broker_pb2.SendResponse(
                    broker_name="broker-a" if addr == "a:1" else "broker-b",
                    queue_id=request.queue_id, first_queue_offset=10,
                    physical_offsets=list(range(request.record_count)),
                    store_host=b"\x7f\0\0\1\0\0\x27\x0f")

        return Client()


def make_producer(failures):
    producer = Producer("127.0.0.1:1", retries=2, send_timeout=5.0)
    producer.routes = StubRoutes()
    producer.brokers = StubBrokers(failures)
    return producer


def test_a_failed_group_is_skipped_on_retry_and_then_avoided():
    producer = make_producer({"a:1": errors.ServiceUnavailable("connection refused")})
    results = [producer.send(Message("t", b"x")) for _ in range(10)]
    assert {r.broker_name for r in results} == {"broker-b"}
    a_calls = [c for c in producer.brokers.calls if c[0] == "a:1"]
    assert len(a_calls) <= 1  # after one failure broker-a is avoided for 600 s
    assert not producer.faults.is_available("broker-a")
    assert producer.routes.refreshes == len(a_calls)


def test_attempts_are_bounded_by_retries_and_the_last_error_is_raised():
    down = errors.ServiceUnavailable("connection refused")
    producer = make_producer({"a:1": down, "b:1": down})
    with pytest.raises(errors.ServiceUnavailable) as info:
        producer.send(Message("t", b"x"))
    assert len(producer.brokers.calls) == 3
    assert "3 attempt(s)" in info.value.message


def test_an_open_breaker_keeps_its_code():
    producer = make_producer({"a:1": errors.BreakerOpen("open"), "b:1": errors.BreakerOpen("open")})
    with pytest.raises(errors.BreakerOpen) as info:
        producer.send(Message("t", b"x"))
    assert info.value.code == "CIRCUIT_OPEN" and info.value.http_status == 503


def test_application_errors_are_not_retried():
    producer = make_producer({"a:1": errors.InvalidArgument("bad record"),
                              "b:1": errors.InvalidArgument("bad record")})
    with pytest.raises(errors.InvalidArgument):
        producer.send(Message("t", b"x"))
    assert len(producer.brokers.calls) == 1


def test_unknown_topic_is_topic_not_exist_without_any_send():
    producer = make_producer({})
    with pytest.raises(errors.TopicNotExist):
        producer.send(Message("other", b"x"))
    assert producer.brokers.calls == []


def test_send_many_is_one_batch_per_queue_in_input_order():
    producer = make_producer({})
    results = producer.send_many([Message("t", f"{i}".encode()) for i in range(40)])
    assert len(producer.brokers.calls) == 4
    assert sorted(c[2] for c in producer.brokers.calls) == [10, 10, 10, 10]
    per_queue: dict[tuple[str, int], list[int]] = {}
    for r in results:
        per_queue.setdefault((r.broker_name, r.queue_id), []).append(r.queue_offset)
    assert all(offsets == list(range(10, 20)) for offsets in per_queue.values())
    assert len({r.unique_id for r in results}) == 40
    assert all(len(r.msg_id) == 32 for r in results)


def test_batches_of_several_topics_are_rejected():
    producer = make_producer({})
    with pytest.raises(errors.InvalidArgument):
        producer.send_batch([Message("t", b"x"), Message("u", b"y")])
    with pytest.raises(errors.InvalidArgument):
        producer.send_batch([])


def test_send_many_sends_nothing_when_one_message_is_invalid():
    producer = make_producer({})
    messages = [Message("t", f"{i}".encode()) for i in range(39)] + [Message("t", b"")]
    with pytest.raises(errors.InvalidArgument) as refused:
        producer.send_many(messages)
    assert refused.value.code == "MESSAGE_BODY_EMPTY" and producer.brokers.calls == []
