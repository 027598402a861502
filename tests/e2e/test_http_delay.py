"""Delayed messages through the HTTP gateway, with real processes (Redis, config center, two
name servers, one broker, the gateway under gunicorn): a message sent with `delay_ms` or
`deliver_at` reaches its queue no earlier than its time (its store timestamp says when the
broker's timer put it there); a due time beyond the broker's max_delay_ms (3 days) is a
problem+json DELAY_TOO_LONG, nothing stored."""

from __future__ import annotations

import time

import pytest
import requests

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, QUEUES = "HttpDelay", 2
YEAR_MS = 365 * 24 * 3600 * 1000


@pytest.fixture(scope="module")
def cluster(shared_one_broker_gateway_cluster):
    """The shared one-broker cluster (tests/conftest.py); the topic is this module's own."""
    cluster = shared_one_broker_gateway_cluster
    response = requests.post(f"{cluster.gateway_url}/v1/topics",
                             json={"name": TOPIC, "queues": QUEUES}, timeout=30)
    assert response.status_code == 201, response.text
    return cluster


def send(cluster, messages: list[dict]) -> requests.Response:
    return requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                         json={"messages": messages}, timeout=30)


def stored(cluster) -> dict[str, dict]:
    found = {}
    for queue_id in range(QUEUES):
        reply = requests.get(
            f"{cluster.gateway_url}/v1/topics/{TOPIC}/queues/broker-a/{queue_id}/messages",
            params={"offset": 0, "max": 100}, timeout=30)
        reply.raise_for_status()
        found.update({m["body"]: m for m in reply.json()["messages"]})
    return found


def test_delayed_messages_reach_their_queue_at_their_time(cluster):
    before = int(time.time() * 1000)
    at = before + 2500
    response = send(cluster, [{"body": "in-1.5s", "delay_ms": 1500},
                              {"body": "at-2.5s", "deliver_at": at},
                              {"body": "now"}])
    assert response.status_code == 201, response.text
    wait_until(lambda: {"in-1.5s", "at-2.5s", "now"} <= set(stored(cluster)), 30,
               interval=0.1, message="the delayed messages in their queues")
    messages = stored(cluster)
    assert messages["in-1.5s"]["store_timestamp"] >= before + 1500
    assert messages["at-2.5s"]["store_timestamp"] >= at
    assert messages["now"]["store_timestamp"] < at   # not held with the others


@pytest.mark.parametrize("message", [
    {"body": "x", "deliver_at": int(time.time() * 1000) + 5 * YEAR_MS},
    {"body": "x", "delay_ms": 4 * 24 * 3600 * 1000},
])
def test_a_due_time_beyond_max_delay_is_refused(cluster, message):
    response = send(cluster, [message])
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.json()["code"] == "DELAY_TOO_LONG"
    assert "max_delay_ms" in response.json()["detail"]
