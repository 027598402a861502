"""gateway-grpc is traced like every service: a send of the official client is one trace
from the gateway's server span down to the broker's, and a SimpleConsumer's ack ends the
message's journey."""

from __future__ import annotations

import uuid

import pytest
import requests
from rocketmq import Producer

from tests.integration.rocketmq.clients import message, simple_consumer, started
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_a_send_is_traced_through_the_gateway_to_the_broker(config, rmq_cluster):
    collector = rmq_cluster.extra["collector_url"]
    with started(Producer(config, ("RmqTraced",))) as producer:
        producer.send(message("RmqTraced", b"traced"))
    found: list[dict] = []

    def traced() -> bool:
        listed = requests.get(f"{collector}/api/traces",
                              params={"service": "gateway-grpc", "limit": 1000},
                              timeout=5).json()["traces"]
        for summary in listed:
            spans = requests.get(f"{collector}/api/traces/{summary['trace_id']}",
                                 timeout=5).json()["spans"]
            if any("SendMessage" in span["name"] for span in spans) and \
                    {"gateway-grpc", "broker"} <= {span["service"] for span in spans}:
                found.extend(spans)
                return True
        return False

    wait_until(traced, 30, interval=0.3, message="a SendMessage trace reaching the broker")
    assert {span["service"] for span in found} >= {"gateway-grpc", "broker"}


def test_a_simple_consumers_ack_ends_the_messages_journey(config, rmq_cluster):
    """Received and acked through gateway-grpc (ReceiveMessage, AckMessage): the broker's
    ack event puts the group and the time from store on the message's journey, as for
    the HTTP gateway's pop consumers."""
    collector = rmq_cluster.extra["collector_url"]
    group, key = "rmq-journey", f"grpc-{uuid.uuid4().hex[:8]}"
    with simple_consumer(config, group, "RmqTraced") as consumer:
        with started(Producer(config, ("RmqTraced",))) as producer:
            producer.send(message("RmqTraced", key.encode(), keys=key))

        def acked_mine() -> bool:
            mine = False
            for received in consumer.receive(32, 15) or []:
                consumer.ack(received)
                mine = mine or bytes(received.body) == key.encode()
            return mine

        wait_until(acked_mine, 30, interval=0.05, message=f"{group} receives and acks {key}")

    seen: list[str] = []

    def journey():
        found = requests.get(f"{collector}/api/messages", params={"key": key},
                             timeout=5).json()["messages"]
        steps = found[0]["steps"] if found else []
        seen[:] = [s["kind"] for s in steps]
        wanted = iter(seen)
        if all(kind in wanted for kind in ("published", "stored", "delivered", "ack")):
            return {s["kind"]: s for s in steps}
        return None

    try:
        steps = wait_until(journey, 30, interval=0.3, message="the message's whole journey")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; its steps were {seen}") from None
    delivered, ack = steps["delivered"], steps["ack"]
    assert delivered["service"] == "gateway-grpc" and delivered["facts"]["group"] == group
    assert ack["service"] == "broker" and ack["facts"]["group"] == group
    assert ack["facts"]["topic"] == "RmqTraced"
    assert ack["title"].startswith(f"acked by {group}, ")
