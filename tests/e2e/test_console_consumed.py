"""The console charts' "out" figures count what was consumed, however: messages popped over
HTTP (a pop group commits no offsets) and read by a pull (the HTTP fetch of a queue) are
counted by the brokers that handed them out, and `/console/series` reads the same numbers
back, per broker group. Real processes: the session's shared two-broker cluster with the HTTP
gateway."""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, SENT, QUEUES = "ConsoleConsumed", "console-consumed-popper", 16, 4


@pytest.fixture(scope="module")
def cluster(shared_gateway_cluster):
    cluster = shared_gateway_cluster
    response = requests.post(f"{cluster.gateway_url}/v1/topics",
                             json={"name": TOPIC, "queues": QUEUES}, timeout=30)
    assert response.status_code == 201, response.text
    return cluster


def test_pops_and_pulls_are_counted_per_broker_group(cluster):
    sent = requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                         json={"messages": [{"body": str(i)} for i in range(SENT)]},
                         timeout=30)
    assert sent.status_code == 201, sent.text
    queues = {(r["broker_name"], r["queue_id"]) for r in sent.json()["results"]}
    assert len(queues) == 2 * QUEUES  # QUEUES on each of the two broker groups

    popped: dict[str, dict] = {}

    def pop_all():
        response = requests.post(f"{cluster.gateway_url}/v1/groups/{GROUP}/topics/{TOPIC}/pop",
                                 json={"max": 32, "invisible_ms": 300_000, "wait_ms": 500},
                                 timeout=30)
        assert response.status_code == 200, response.text
        for message in response.json()["messages"]:
            assert message["msg_id"] not in popped  # invisible for 5 min: never handed twice
            popped[message["msg_id"]] = message
        return len(popped) == SENT

    wait_until(pop_all, 60, interval=0.1, message=f"{SENT} messages popped")
    expected = Counter(m["broker_name"] for m in popped.values())

    broker, queue_id = sorted(queues)[0]  # a pull: the HTTP fetch of one queue from 0
    fetched = requests.get(
        f"{cluster.gateway_url}/v1/topics/{TOPIC}/queues/{broker}/{queue_id}/messages",
        params={"offset": 0, "max": 100}, timeout=30)
    assert fetched.status_code == 200, fetched.text
    expected[broker] += len(fetched.json()["messages"])

    counted = requests.get(f"{cluster.gateway_url}/v1/cluster/consumed", timeout=30).json()
    assert counted["unanswered"] == []
    assert counted["consumed"][TOPIC] == dict(expected)
    sample = requests.get(f"{cluster.gateway_url}/console/series", timeout=30)
    assert sample.status_code == 200, sample.text
    assert sample.json()["consumed"][TOPIC] == dict(expected)
    assert sum(sample.json()["consumed"][TOPIC].values()) == SENT + len(
        fetched.json()["messages"])
