"""gateway-grpc is traced like every service: a send of the official client is one trace
from the gateway's server span down to the broker's."""

from __future__ import annotations

import pytest
import requests
from rocketmq import Producer

from tests.integration.rocketmq.clients import message, started
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_a_send_is_traced_through_the_gateway_to_the_broker(config, rmq_cluster):
    collector = rmq_cluster.extra["collector_url"]
    with started(Producer(config, ("RmqNormal",))) as producer:
        producer.send(message("RmqNormal", b"traced"))
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
