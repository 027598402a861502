"""Deadlines end to end (issue #37): a SYNC_MASTER whose in-sync slaves cannot confirm a send
(both frozen) answers FLUSH_SLAVE_TIMEOUT before the caller's deadline — over gRPC, over the
wire protocol and through the SDK's Producer — although its configured replica wait (5 s) is
longer than the call's 1 s. Without that the caller would see DEADLINE_EXCEEDED, not knowing
whether the message was stored. The message stays in the master's log and is delivered once
the slaves have it (at least once: a client that resends it stores it twice)."""

from __future__ import annotations

import os
import signal
import time

import grpc
from tidemq.client import Message, Producer, SendStatus
from tidemq.common import record
from tidemq.common.wire.client import WireConnection
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.v1 import broker_pb2, broker_pb2_grpc, common_pb2

from tests.integration.replication.replica_group import (
    TOPIC,
    broker_call,
    start_group,
    wait_in_sync,
)
from tests.support.processes import freeze, wait_until

# Below the broker's replica wait (5 s), long enough that the broker's margin (10 %, 0.3 s)
# covers a loaded machine's scheduling delays: at 1 s (0.1 s of margin) a loaded CI machine
# saw the client's deadline first.
CALL_DEADLINE_S = 3.0


def send_request(body: bytes) -> broker_pb2.SendRequest:
    payload = record.encode_message(record.OutgoingMessage(TOPIC, body))[0]
    return broker_pb2.SendRequest(topic=TOPIC, queue_id=0, records=payload, record_count=1)


def pulled_bodies(addr: str) -> set[bytes]:
    """Every body the replica serves of the topic's two queues (the SDK picks a queue)."""
    bodies = set()
    for queue_id in (0, 1):
        answer = broker_call(addr, "Pull", broker_pb2.PullRequest(
            consumer_group="deadline-check", topic=TOPIC, queue_id=queue_id, queue_offset=0,
            max_messages=32))
        if answer.record_count:
            bodies.update(bytes(m.body) for m in record.iter_records(answer.records))
    return bodies


def test_a_send_the_slaves_cannot_confirm_answers_flush_slave_timeout_before_its_deadline(
        cluster):
    # A long lag limit keeps the frozen slaves in the in-sync set (else the master would
    # shrink it and refuse sends NOT_ENOUGH_REPLICAS instead); the replica wait is the default.
    group = start_group(cluster, extra=["--sync-replication-timeout-ms", "5000",
                                        "--replica-lag-max-ms", "120000"])
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    broker = group.replicas[master]
    slaves = [group.replicas[r] for r in range(3) if r != master]
    channel = grpc.insecure_channel(broker.addr)
    stub = broker_pb2_grpc.BrokerServiceStub(channel)
    wire = WireConnection(f"127.0.0.1:{broker.info['wire_port']}")
    # Every client connected and the route known before the slaves stop: the 1 s is the send's.
    assert stub.Send(send_request(b"confirmed"), timeout=10).status == common_pb2.SEND_OK
    producer = Producer(cluster.namesrv_addrs, send_timeout=CALL_DEADLINE_S, retries=0)
    assert producer.send(Message(TOPIC, b"warm-up")).status is SendStatus.SEND_OK
    answers = {}
    for slave in slaves:
        freeze(slave.pid)
    try:
        started = time.monotonic()
        reply = stub.Send(send_request(b"over-grpc"), timeout=CALL_DEADLINE_S)
        answers["grpc"] = (common_pb2.SendStatus.Name(reply.status), time.monotonic() - started)
        started = time.monotonic()
        reply = wire.call(BROKER_METHODS["Send"], send_request(b"over-the-wire"),
                          timeout_s=CALL_DEADLINE_S)
        answers["wire"] = (common_pb2.SendStatus.Name(reply.status), time.monotonic() - started)
        started = time.monotonic()
        result = producer.send(Message(TOPIC, b"through-the-sdk"))
        answers["sdk"] = (result.status.name, time.monotonic() - started)
    finally:
        for slave in slaves:
            os.kill(slave.pid, signal.SIGCONT)
        producer.close()
        wire.close()
        channel.close()
    # An answer at all is one before the deadline (the client fails the call at its deadline);
    # the times are only reported.
    assert {how: status for how, (status, _) in answers.items()} == {
        "grpc": "FLUSH_SLAVE_TIMEOUT", "wire": "FLUSH_SLAVE_TIMEOUT",
        "sdk": "FLUSH_SLAVE_TIMEOUT"}, answers
    # Stored on the master all along: served once the slaves confirm it.
    expected = {b"confirmed", b"warm-up", b"over-grpc", b"over-the-wire", b"through-the-sdk"}
    wait_until(lambda: pulled_bodies(broker.addr) == expected, 30,
               message="the timed-out sends to be delivered once the slaves have them")
