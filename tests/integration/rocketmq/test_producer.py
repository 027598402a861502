"""The official RocketMQ 5 Python client's Producer against gateway-grpc: sync and async
sends, FIFO by message group, delay by delivery timestamp, recall, and a batch of several
messages all-or-nothing."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq import Producer
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from tests.integration.rocketmq.clients import drain, message, simple_consumer, started
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_sync_and_async_send_reach_a_simple_consumer(config):
    with started(Producer(config, ("RmqNormal",))) as producer, \
            simple_consumer(config, "rmq-normal", "RmqNormal") as consumer:
        receipts = [producer.send(message("RmqNormal", f"sync-{i}".encode(), tag="t",
                                          keys=f"k{i}", properties={"shop": "7"}))
                    for i in range(5)]
        futures = [producer.send_async(message("RmqNormal", f"async-{i}".encode()))
                   for i in range(5)]
        receipts += [f.result(timeout=10) for f in futures]
        got = drain(consumer, 10)
    assert sorted(m.body for m in got) == sorted(
        [f"sync-{i}".encode() for i in range(5)] + [f"async-{i}".encode() for i in range(5)])
    assert {m.message_id for m in got} == {r.message_id for r in receipts}
    tagged = {m.body: m for m in got if m.body.startswith(b"sync")}
    assert tagged[b"sync-3"].tag == "t" and tagged[b"sync-3"].keys == {"k3"}
    assert tagged[b"sync-3"].properties == {"shop": "7"}
    assert all(m.delivery_attempt == 1 and not m.corrupted for m in got)


def test_fifo_messages_of_a_group_arrive_in_send_order(config):
    groups = ("order-1", "order-2", "order-3")
    with started(Producer(config, ("RmqFifo",))) as producer:
        for i in range(8):
            for group in groups:
                producer.send(message("RmqFifo", f"{group}:{i}".encode(), group=group))
    with simple_consumer(config, "rmq-fifo", "RmqFifo") as consumer:
        got = drain(consumer, 24)
    for group in groups:
        seen = [int(m.body.split(b":")[1]) for m in got if m.message_group == group]
        assert seen == list(range(8)), f"{group} out of order: {seen}"


def test_delivery_timestamp_holds_a_message_until_then(config):
    with started(Producer(config, ("RmqDelay",))) as producer, \
            simple_consumer(config, "rmq-delay", "RmqDelay") as consumer:
        deliver_at = int(time.time() * 1000) + 2000
        producer.send(message("RmqDelay", b"later", deliver_at_ms=deliver_at))
        producer.send(message("RmqDelay", b"now"))
        received_ms: dict[bytes, int] = {}

        def both() -> bool:
            for received in consumer.receive(32, 15) or []:
                received_ms[received.body] = int(time.time() * 1000)
                consumer.ack(received)
                if received.body == b"later":
                    assert received.delivery_timestamp == deliver_at
            return len(received_ms) == 2

        # each receive long-polls one broker group for up to 5 s: under CI's load, 30 s once
        # did not cover the queues of both
        wait_until(both, 60, interval=0.05, message="both messages received")
    assert received_ms[b"later"] >= deliver_at   # held until its time (the other was not)


def test_recall_takes_back_a_scheduled_message_before_it_is_delivered(config):
    """The client's recall_message with the handle in its send receipt (RocketMQ 5.3)."""
    with started(Producer(config, ("RmqRecall",))) as producer, \
            simple_consumer(config, "rmq-recall", "RmqRecall") as consumer:
        deliver_at = int(time.time() * 1000) + 3000
        recalled = producer.send(message("RmqRecall", b"recalled", deliver_at_ms=deliver_at))
        kept = producer.send(message("RmqRecall", b"kept", deliver_at_ms=deliver_at))
        assert recalled.recall_handle and kept.recall_handle
        assert not producer.send(message("RmqRecall", b"now")).recall_handle
        assert producer.recall_message("RmqRecall", recalled.recall_handle) == \
            recalled.message_id
        with pytest.raises(Exception, match="INVALID_RECALL_HANDLE"):
            producer.recall_message("RmqRecall", "forged")
        got = drain(consumer, 2)   # "now", then "kept" once due
        assert sorted(m.body for m in got) == [b"kept", b"now"]
        with pytest.raises(Exception, match="MESSAGE_ALREADY_DELIVERED"):
            producer.recall_message("RmqRecall", kept.recall_handle)
        assert not consumer.receive(32, 2)   # nothing else came: not the recalled one


def test_a_send_of_several_messages_is_all_or_nothing(config, endpoint):
    """A SendMessage of several messages is one batch: stored together on one queue, or, if
    any message is refused, none of them (the raw RPC: the client sends one at a time)."""
    def raw(body: bytes, message_id: str) -> definition_pb2.Message:
        built = definition_pb2.Message(body=body)
        built.topic.name = "RmqBatch"
        built.system_properties.message_id = message_id
        built.system_properties.message_type = definition_pb2.NORMAL
        return built

    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        stored = stub.SendMessage(service_pb2.SendMessageRequest(messages=[
            raw(b"a", "id-a"), raw(b"b", "id-b"), raw(b"c", "id-c")]), timeout=10)
        refused = stub.SendMessage(service_pb2.SendMessageRequest(messages=[
            raw(b"d", "id-d"), raw(b"", "id-e")]), timeout=10)
    assert stored.status.code == definition_pb2.OK, stored.status
    assert [e.message_id for e in stored.entries] == ["id-a", "id-b", "id-c"]
    first = stored.entries[0].offset
    assert [e.offset for e in stored.entries] == [first, first + 1, first + 2]
    assert refused.status.code == definition_pb2.MESSAGE_BODY_EMPTY, refused.status
    assert not refused.entries
    with simple_consumer(config, "rmq-batch", "RmqBatch") as consumer:
        got = drain(consumer, 3)
        assert sorted(m.body for m in got) == [b"a", b"b", b"c"]
        assert not consumer.receive(32, 2), "a message of the refused batch was stored"
