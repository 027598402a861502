"""Consuming through the HTTP gateway as a group: pop / ack / invisible with receipt handles,
the dead-letter queue and its re-drive, bad input answered with precise problem+json codes.
Real processes: Redis, config center, two name servers, one broker group, the gateway (the
session's shared one-broker cluster)."""

from __future__ import annotations

import pytest
import requests
from tidemq.client.group import DirectClient
from tidemq.common.receipt import ReceiptHandle
from tidemq.v1 import broker_pb2

from tests.support.http import problem
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, DLQ_GROUP = "HttpPop", "g-http", "g-http-dlq"


@pytest.fixture(scope="module")
def cluster(shared_one_broker_gateway_cluster):
    """The shared one-broker cluster (tests/conftest.py): this module's topic and groups are
    its own."""
    cluster = shared_one_broker_gateway_cluster
    response = requests.post(f"{cluster.gateway_url}/v1/topics",
                             json={"name": TOPIC, "queues": 2}, timeout=30)
    assert response.status_code == 201, response.text
    return cluster


def send(cluster, *bodies: str) -> None:
    response = requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                             json={"messages": [{"body": b} for b in bodies]}, timeout=30)
    assert response.status_code == 201, response.text


def pop(cluster, group, **body) -> list[dict]:
    response = requests.post(f"{cluster.gateway_url}/v1/groups/{group}/topics/{TOPIC}/pop",
                             json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def post(cluster, group, verb, **body) -> requests.Response:
    return requests.post(f"{cluster.gateway_url}/v1/groups/{group}/topics/{TOPIC}/{verb}",
                         json=body, timeout=30)


def pop_until(cluster, group, count, **body) -> dict[str, dict]:
    got: dict[str, dict] = {}

    def more():
        for message in pop(cluster, group, wait_ms=1000, **body):
            got[message["body"]] = message
        return len(got) >= count

    wait_until(more, 60, interval=0.1, message=f"{count} messages popped over HTTP")
    return got


def test_pop_ack_invisible_and_bad_handles(cluster):
    send(cluster, "a", "b", "c", "d")
    got = pop_until(cluster, GROUP, 4, max=16, invisible_ms=3000)
    assert set(got) == {"a", "b", "c", "d"}
    assert all(m["delivery_count"] == 1 and m["topic"] == TOPIC for m in got.values())

    assert post(cluster, GROUP, "ack", receipt_handle=got["a"]["receipt_handle"]).json() == {
        "acked": True}
    assert post(cluster, GROUP, "ack", receipt_handle=got["a"]["receipt_handle"]).ok  # no-op
    changed = post(cluster, GROUP, "invisible", receipt_handle=got["b"]["receipt_handle"],
                   invisible_ms=120_000)
    assert changed.status_code == 200, changed.text
    problem(post(cluster, GROUP, "ack", receipt_handle=got["b"]["receipt_handle"]), 412,
            "RECEIPT_HANDLE_EXPIRED")  # replaced by the change

    problem(post(cluster, GROUP, "ack", receipt_handle="garbage"), 400,
            "INVALID_RECEIPT_HANDLE")
    forged = ReceiptHandle("broker-a", 10**9, TOPIC, 0, 0).encode()
    problem(post(cluster, GROUP, "ack", receipt_handle=forged), 404,
            "RECEIPT_HANDLE_NOT_FOUND")
    problem(post(cluster, GROUP, "invisible", receipt_handle=got["c"]["receipt_handle"],
                 invisible_ms=-5), 400, "INVALID_INVISIBLE_DURATION")
    problem(requests.post(f"{cluster.gateway_url}/v1/groups/{GROUP}/topics/{TOPIC}/pop",
                          json={"invisible_ms": -1}, timeout=30), 400,
            "INVALID_INVISIBLE_DURATION")
    problem(post(cluster, GROUP, "ack"), 400, "INVALID_RECEIPT_HANDLE")

    again = pop_until(cluster, GROUP, 2, invisible_ms=60_000)  # c and d expire and come back
    assert set(again) == {"c", "d"}
    assert all(m["delivery_count"] == 2 for m in again.values())
    problem(post(cluster, GROUP, "ack", receipt_handle=got["d"]["receipt_handle"]), 412,
            "RECEIPT_HANDLE_EXPIRED")
    for message in again.values():
        assert post(cluster, GROUP, "ack", receipt_handle=message["receipt_handle"]).ok
    assert post(cluster, GROUP, "ack", receipt_handle=changed.json()["receipt_handle"]).ok
    assert pop(cluster, GROUP, wait_ms=300) == []


def test_a_batch_ack_answers_each_handle_and_acks_the_good_ones(cluster):
    group, mine = "g-http-batch", {"batch-1", "batch-2", "batch-3"}
    send(cluster, *sorted(mine))
    got: dict[str, dict] = {}

    def popped_mine():  # a new group also gets what the other tests sent: take it all
        for message in pop(cluster, group, max=32, wait_ms=1000, invisible_ms=60_000):
            got[message["body"]] = message
        return mine <= set(got)

    wait_until(popped_mine, 60, interval=0.1, message="the batch's messages popped over HTTP")
    handles = [m["receipt_handle"] for m in got.values()]
    forged = ReceiptHandle("broker-a", 10**9, TOPIC, 0, 0).encode()
    asked = [*handles, "garbage", forged, handles[0]]
    answer = post(cluster, group, "ack", receipt_handles=asked)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["receipt_handle"] for r in results] == asked
    assert [(r["acked"], r["code"]) for r in results] == [(True, "")] * len(handles) + [
        (False, "INVALID_RECEIPT_HANDLE"), (False, "RECEIPT_HANDLE_NOT_FOUND"), (True, "")]
    assert all(r["detail"] for r in results if not r["acked"])
    for message in got.values():  # acked: no longer in flight
        problem(post(cluster, group, "invisible", receipt_handle=message["receipt_handle"],
                     invisible_ms=1000), 412, "RECEIPT_HANDLE_EXPIRED")
    problem(post(cluster, group, "ack", receipt_handle=handles[0], receipt_handles=handles), 400,
            "INVALID_ARGUMENT")


def test_dead_letters_listed_and_redriven(cluster):
    created = requests.post(f"{cluster.gateway_url}/v1/groups",
                            json={"name": DLQ_GROUP, "retry_max_times": 0}, timeout=30)
    assert created.status_code == 201, created.text
    broker = DirectClient(cluster.brokers["broker-a"].addr)

    def applied():
        reply = broker.call("GetSubscriptionGroups",
                            broker_pb2.GetSubscriptionGroupsRequest(groups=[DLQ_GROUP]))
        return reply.groups[0].defined

    wait_until(applied, 20, message="the broker to apply the group definition")
    for message in pop(cluster, DLQ_GROUP, max=32):  # start past what the other test sent
        assert post(cluster, DLQ_GROUP, "ack", receipt_handle=message["receipt_handle"]).ok
    send(cluster, "doomed")
    (first,) = pop_until(cluster, DLQ_GROUP, 1, invisible_ms=500).values()
    assert first["body"] == "doomed"

    url = f"{cluster.gateway_url}/v1/groups/{DLQ_GROUP}/dlq"
    wait_until(lambda: requests.get(url, timeout=30).json()["messages"], 30, interval=0.2,
               message="the expired message in the DLQ")
    (dead,) = requests.get(url, timeout=30).json()["messages"]
    assert dead["body"] == "doomed" and dead["origin_topic"] == TOPIC
    assert dead["reconsume_times"] == 1

    problem(requests.post(f"{url}/redrive", json={"msg_ids": []}, timeout=30), 400,
            "INVALID_REQUEST")
    problem(requests.post(f"{url}/redrive", json={"msg_ids": ["NOPE"]}, timeout=30), 404,
            "DEAD_LETTER_NOT_FOUND")
    redriven = requests.post(f"{url}/redrive", json={"all": True}, timeout=30).json()["redriven"]
    assert [(r["topic"], r["broker_name"]) for r in redriven] == [(TOPIC, "broker-a")]
    assert requests.get(url, timeout=30).json()["messages"] == []
    (back,) = pop_until(cluster, DLQ_GROUP, 1).values()
    assert back["body"] == "doomed" and back["delivery_count"] == 1


def test_openapi_describes_consumption(cluster):
    spec = requests.get(f"{cluster.gateway_url}/openapi.json", timeout=30).json()
    for path in ("/v1/groups/{group}/topics/{topic}/pop", "/v1/groups/{group}/topics/{topic}/ack",
                 "/v1/groups/{group}/topics/{topic}/invisible", "/v1/groups/{group}/dlq",
                 "/v1/groups/{group}/dlq/redrive", "/v1/topics/{topic}/messages"):
        assert path in spec["paths"]
