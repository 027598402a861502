"""An AckMessage with several entries through gateway-grpc: one batch Ack per broker group
behind it (counted in the trace of the call), each entry answered with its own status — a
damaged receipt fails alone and gives the response its status, as in RocketMQ's proxy."""

from __future__ import annotations

import secrets

import grpc
import pytest
import requests
from rocketmq import Producer
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc
from tidemq.gatewaygrpc.handles import GatewayReceipt

from tests.integration.rocketmq.clients import drain, message, simple_consumer, started
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "RmqBatchAck", "rmq-batch-ack"


def test_an_ack_of_many_entries_is_one_broker_call_per_group(config, endpoint, rmq_cluster):
    with started(Producer(config, (TOPIC,))) as producer:
        for i in range(8):
            producer.send(message(TOPIC, f"a-{i}".encode()))
    with simple_consumer(config, GROUP, TOPIC) as consumer:
        got = drain(consumer, 8, ack=False)
    brokers = {GatewayReceipt.decode(m.receipt_handle).broker_name for m in got}
    assert brokers == {"broker-a", "broker-b"}

    trace_id = secrets.token_hex(16)
    request = service_pb2.AckMessageRequest(
        group=definition_pb2.Resource(name=GROUP), topic=definition_pb2.Resource(name=TOPIC),
        entries=[service_pb2.AckMessageEntry(message_id=m.message_id,
                                             receipt_handle=m.receipt_handle) for m in got])
    request.entries.add(message_id="damaged", receipt_handle="not-a-receipt")
    with grpc.insecure_channel(endpoint) as channel:
        reply = service_pb2_grpc.MessagingServiceStub(channel).AckMessage(
            request, timeout=10,
            metadata=[("traceparent", f"00-{trace_id}-{secrets.token_hex(8)}-01")])
    codes = [e.status.code for e in reply.entries]
    assert codes == [definition_pb2.OK] * 8 + [definition_pb2.INVALID_RECEIPT_HANDLE]
    assert [e.message_id for e in reply.entries] == [m.message_id for m in got] + ["damaged"]
    assert reply.status.code == definition_pb2.INVALID_RECEIPT_HANDLE

    collector = rmq_cluster.extra["collector_url"]

    def broker_acks() -> list[dict]:
        answer = requests.get(f"{collector}/api/traces/{trace_id}", timeout=5)
        spans = answer.json().get("spans", []) if answer.ok else []
        return [s for s in spans if s["service"] == "broker" and s["name"].endswith("/Ack")]

    wait_until(lambda: len(broker_acks()) >= len(brokers), 30, interval=0.3,
               message="the brokers' Ack spans in the AckMessage trace")
    assert len(broker_acks()) == len(brokers)   # not one per message
