"""A SQL92 filter on pop through the HTTP gateway with real processes: only the messages whose
properties match are popped, and a bad filter is a problem+json 400 INVALID_FILTER naming its
position (Redis, config center, two name servers, one broker group, the gateway)."""

from __future__ import annotations

import pytest
import requests

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "HttpSqlPop", "g-http-sql"


def test_pop_with_a_sql_filter_over_http(shared_one_broker_gateway_cluster):
    cluster = shared_one_broker_gateway_cluster  # tests/conftest.py; topic and group are ours
    base = cluster.gateway_url
    created = requests.post(f"{base}/v1/topics", json={"name": TOPIC, "queues": 2},
                            timeout=30)
    assert created.status_code == 201, created.text
    messages = [{"body": f"order-{i}", "tag": "paid" if i % 2 else "new",
                 "properties": {"amount": str(i * 10), **({"region": "eu"} if i % 3 else {})}}
                for i in range(12)]
    sent = requests.post(f"{base}/v1/topics/{TOPIC}/messages", json={"messages": messages},
                         timeout=30)
    assert sent.status_code == 201, sent.text
    # amount > 30, region eu (i % 3 != 0), tag paid (odd i): 5, 7, 11
    selector = {"filter_type": "SQL92",
                "filter": "amount > 30 AND region = 'eu' AND TAGS = 'paid'"}
    pop_url = f"{base}/v1/groups/{GROUP}/topics/{TOPIC}/pop"
    got: dict[str, dict] = {}

    def popped_all() -> bool:
        response = requests.post(pop_url, json={"max": 32, "wait_ms": 500, **selector},
                                 timeout=30)
        assert response.status_code == 200, response.text
        for message in response.json()["messages"]:
            got[message["body"]] = message
        return len(got) >= 3

    wait_until(popped_all, 60, interval=0.1, message="the matching messages popped")
    assert set(got) == {"order-5", "order-7", "order-11"}
    assert all(m["properties"]["region"] == "eu" for m in got.values())
    for message in got.values():
        ack = requests.post(f"{base}/v1/groups/{GROUP}/topics/{TOPIC}/ack",
                            json={"receipt_handle": message["receipt_handle"]}, timeout=30)
        assert ack.ok, ack.text
    again = requests.post(pop_url, json={"max": 32, "wait_ms": 300, **selector}, timeout=30)
    assert again.json()["messages"] == []

    bad = requests.post(pop_url, json={"filter_type": "SQL92", "filter": "amount >> 5"},
                        timeout=30)
    assert bad.status_code == 400, bad.text
    assert bad.headers["Content-Type"].startswith("application/problem+json")
    problem = bad.json()
    assert problem["code"] == "INVALID_FILTER" and "position 8" in problem["detail"]

    # The same filter on a queue read: only matching messages, offsets move past the rest.
    read: dict[str, dict] = {}
    for queue_id in (0, 1):
        response = requests.get(
            f"{base}/v1/topics/{TOPIC}/queues/broker-a/{queue_id}/messages",
            params={"offset": 0, "max": 32, **selector}, timeout=30)
        assert response.status_code == 200, response.text
        read.update({m["body"]: m for m in response.json()["messages"]})
    assert set(read) == {"order-5", "order-7", "order-11"}
    tagged = requests.get(f"{base}/v1/topics/{TOPIC}/queues/broker-a/0/messages",
                          params={"tag": "paid", "filter_type": "SQL92", "filter": "a > 1"},
                          timeout=30)
    assert tagged.status_code == 400 and tagged.json()["code"] == "INVALID_FILTER"
