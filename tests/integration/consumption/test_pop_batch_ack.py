"""Batch ack through the SDK against real brokers: messages popped from two broker groups are
acked with one Ack call per group; a stale handle and a malformed one fail alone, each with the
error a single ack raises; the acked messages are done (not in flight any more). The broker
refuses a request with both forms, or over the batch limit. A pop group's lag as the admin
API describes it."""

from __future__ import annotations

import dataclasses

import pytest
from tidemq.client import Message, Producer, SimpleConsumer
from tidemq.client.admin import Admin
from tidemq.client.group import DirectClient
from tidemq.common import errors
from tidemq.common.receipt import MAX_ACK_BATCH, ReceiptHandle
from tidemq.v1 import broker_pb2

from tests.support.cluster import create_topic_in_config_center, wait_for_route
from tests.support.pop import pop_until
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "PopBatchAck", "g-pop-batch"


def test_ack_many_sends_one_call_per_broker_group_and_reports_each_message(shared_cluster,
                                                                            monkeypatch):
    cluster = shared_cluster  # tests/conftest.py: topic and group are ours
    create_topic_in_config_center(cluster, TOPIC, 2)
    wait_for_route(cluster, TOPIC, 2)
    with Producer(cluster.namesrv_addrs) as producer:
        for i in range(12):
            producer.send(Message(TOPIC, f"b-{i}".encode()))

    consumer = SimpleConsumer(cluster.namesrv_addrs, GROUP, TOPIC, timeout=10)
    received = pop_until(consumer, 12, invisible_s=60)
    assert len(received) == 12
    brokers = {m.message.broker_name for m in received.values()}
    assert brokers == {"broker-a", "broker-b"}
    changed = received[b"b-0"]
    stale = changed.receipt_handle
    consumer.change_invisible_duration(changed, 60)  # `stale` is dead from now on

    ack_calls: list[set[str]] = []
    real_start = DirectClient.start

    def counted_start(self, method, request, **kwargs):  # a batch's calls are all started
        if method == "Ack":
            ack_calls.append({ReceiptHandle.decode(h).broker_name
                              for h in request.receipt_handles})
        return real_start(self, method, request, **kwargs)

    monkeypatch.setattr(DirectClient, "start", counted_start)
    batch = list(received.values())
    handles = [m.receipt_handle for m in batch] + [stale, "not-a-handle"]
    results = consumer.ack_handles(handles)
    monkeypatch.undo()

    assert sorted(ack_calls, key=sorted) == [{"broker-a"}, {"broker-b"}]
    assert [r.receipt_handle for r in results] == handles
    assert all(r.ok for r in results[:12])
    assert isinstance(results[12].error, errors.PreconditionFailed)
    assert results[12].error.code == "RECEIPT_HANDLE_EXPIRED"
    assert isinstance(results[13].error, errors.InvalidArgument)
    assert results[13].error.code == "INVALID_RECEIPT_HANDLE"
    for message in batch:  # acked: no longer in flight, so its invisible time is fixed
        with pytest.raises(errors.PreconditionFailed, match="acked already"):
            consumer.change_invisible_duration(message, 30)
    assert all(r.ok for r in consumer.ack_many(batch))  # acking again is a no-op

    # ack_async: each ack answered on its own, every handle sent once (coalesced into
    # calls per broker group: tests/unit/client/test_ack_lanes.py)
    with Producer(cluster.namesrv_addrs) as producer:
        for i in range(6):
            producer.send(Message(TOPIC, f"async-{i}".encode()))
    later = pop_until(consumer, 6, invisible_s=60)
    assert sorted(later) == [f"async-{i}".encode() for i in range(6)]
    sent: list[str] = []
    real_start = DirectClient.start

    def counted_start(self, method, request, **kwargs):
        sent.extend(request.receipt_handles)
        return real_start(self, method, request, **kwargs)

    monkeypatch.setattr(DirectClient, "start", counted_start)
    acks = [consumer.ack_async(m) for m in later.values()]
    stale_ack = consumer.ack_async(changed_copy(changed, stale))
    assert [f.result(timeout=30) for f in acks] == [None] * 6
    with pytest.raises(errors.PreconditionFailed, match="acked already|expired"):
        stale_ack.result(timeout=30)
    monkeypatch.undo()
    assert sorted(sent) == sorted([m.receipt_handle for m in later.values()] + [stale])
    for message in later.values():
        with pytest.raises(errors.PreconditionFailed, match="acked already"):
            consumer.change_invisible_duration(message, 30)

    broker = DirectClient(cluster.brokers["broker-a"].addr)
    with pytest.raises(errors.InvalidArgument, match="not both"):
        broker.call("Ack", broker_pb2.AckRequest(
            consumer_group=GROUP, receipt_handle=stale, receipt_handles=[stale]))
    with pytest.raises(errors.InvalidArgument, match=str(MAX_ACK_BATCH)):
        broker.call("Ack", broker_pb2.AckRequest(
            consumer_group=GROUP, receipt_handles=[stale] * (MAX_ACK_BATCH + 1)))


def changed_copy(received, receipt_handle: str):
    """The same message under another (here: a dead) receipt handle."""
    return dataclasses.replace(received, receipt_handle=receipt_handle)


def test_a_pop_groups_lag_is_described_from_the_brokers_pop_books(shared_one_broker_cluster):
    """`tidemq group describe` / the console: a pop group commits no offset, so its progress
    per queue is the pop cursor plus what is popped and not acked."""
    cluster = shared_one_broker_cluster  # tests/conftest.py: topic and group are ours
    create_topic_in_config_center(cluster, "PopLag", 2)
    wait_for_route(cluster, "PopLag", 1)
    with Producer(cluster.namesrv_addrs) as producer:
        for i in range(10):
            producer.send(Message("PopLag", f"l-{i}".encode()))
    consumer = SimpleConsumer(cluster.namesrv_addrs, "g-pop-lag", "PopLag", timeout=10)
    popped: list = []
    wait_until(lambda: popped.extend(consumer.receive(3, invisible_duration_s=60,
                                                       wait_s=1)) or len(popped) >= 6,
               30, message="six messages popped")
    assert all(r.ok for r in consumer.ack_many(popped[:2]))
    with Admin(cluster.namesrv_addrs) as admin:
        described = admin.group_describe("g-pop-lag")
    by_queue = {o.queue_id: o for o in described.offsets if o.topic == "PopLag"}
    assert sum(o.committed for o in by_queue.values()) == len(popped)
    assert sum(o.unacked for o in by_queue.values()) == len(popped) - 2
    assert described.total_lag == 10 - 2  # not popped + popped and not acked


def test_a_receive_carries_the_pop_reply_it_came_in(shared_cluster):
    """`receive` answers a ReceivedBatch: the ReceivedMessages, and the Pop reply's broker
    group, records and handles as they came (what the HTTP gateway renders in C)."""
    from tidemq.client import ReceivedBatch
    from tidemq.client.message import decode_records

    cluster = shared_cluster
    create_topic_in_config_center(cluster, "PopReplyKept", 1)
    wait_for_route(cluster, "PopReplyKept", 2)
    with Producer(cluster.namesrv_addrs) as producer:
        producer.send_many([Message("PopReplyKept", f"r-{i}".encode()) for i in range(3)])
    consumer = SimpleConsumer(cluster.namesrv_addrs, "g-pop-reply", "PopReplyKept", timeout=10)
    batches: list = []
    wait_until(lambda: batches.append(consumer.receive(32, wait_s=1)) or batches[-1], 30,
               message="a pop answered")
    batch = batches[-1]
    assert type(batch) is ReceivedBatch and len(batch) == len(batch.receipt_handles) >= 1
    assert batch.receipt_handles == [r.receipt_handle for r in batch]
    assert decode_records(batch.records, batch.broker_name) == [r.message for r in batch]
    assert {r.message.broker_name for r in batch} == {batch.broker_name}
    assert all(result.ok for result in consumer.ack_many(batch))
