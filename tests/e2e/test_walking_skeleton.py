"""Walking skeleton acceptance: topic → 1000 messages through the HTTP gateway → read back.

Real processes only: Redis, config center, two name servers, two broker groups, the gateway
under gunicorn with two workers, and the trace collector receiving every service's spans.
"""

from __future__ import annotations

import base64
from collections import defaultdict

import pytest
import requests

from tests.support.cluster import traced_cluster
from tests.support.http import problem
from tests.support.processes import wait_until

TOPIC = "WalkingSkeleton"
MESSAGES = 1000
BATCH = 100
pytestmark = pytest.mark.slow  # the whole topology plus the trace collector (~25 s)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # Its own cluster, not a shared one: the last test kills both brokers.
    with traced_cluster(tmp_path_factory.mktemp("e2e")) as cluster:
        # A long breaker reset so "open" cannot lapse mid-test on a loaded machine.
        cluster.start_gateway(workers=2, extra=["--breaker-reset-s", "120"])
        yield cluster



def fetch_queue(url: str, broker: str, queue_id: int) -> list[dict]:
    messages, offset = [], 0
    while True:
        response = requests.get(f"{url}/v1/topics/{TOPIC}/queues/{broker}/{queue_id}/messages",
                                params={"offset": offset, "max": 256}, timeout=10)
        assert response.status_code == 200, response.text
        body = response.json()
        if not body["messages"]:
            return messages
        messages.extend(body["messages"])
        offset = body["next_offset"]


def test_topic_to_messages_to_readback(stack):
    url = stack.gateway_url
    created = requests.post(f"{url}/v1/topics", json={"name": TOPIC, "queues": 4}, timeout=30)
    assert created.status_code == 201, created.text
    assert sorted(created.json()["brokers"]) == ["broker-a", "broker-b"]
    problem(requests.post(f"{url}/v1/topics", json={"name": TOPIC, "queues": 4}, timeout=10),
            409, "TOPIC_ALREADY_EXISTS")
    assert TOPIC in [t["name"] for t in requests.get(f"{url}/v1/topics", timeout=10).json()["topics"]]

    acked: dict[str, tuple[str, int, int]] = {}
    trace_ids = []
    for start in range(0, MESSAGES, BATCH):
        batch = [{"body": f"msg-{i:05d}", "key": f"k{i}", "tag": "skeleton"}
                 for i in range(start, start + BATCH)]
        response = requests.post(f"{url}/v1/topics/{TOPIC}/messages",
                                 json={"messages": batch}, timeout=30)
        assert response.status_code == 201, response.text
        trace_ids.append(response.headers["X-Trace-Id"])
        for item, result in zip(batch, response.json()["results"], strict=True):
            assert result["status"] == "SEND_OK"
            acked[item["body"]] = (result["broker_name"], result["queue_id"],
                                   result["queue_offset"])
    assert len(acked) == MESSAGES

    def fully_indexed():  # brokers build consume queues asynchronously after the ack
        described = requests.get(f"{url}/v1/topics/{TOPIC}", timeout=10).json()
        total = sum(q["max_offset"] - q["min_offset"] for q in described["queues"])
        assert total <= MESSAGES and described["unavailable_brokers"] == []
        return described if total == MESSAGES else None

    described = wait_until(fully_indexed, 15, interval=0.05, message="all messages indexed")
    queues = [(q["broker_name"], q["queue_id"]) for q in described["queues"]]
    assert len(queues) == 8

    seen: dict[str, tuple[str, int, int]] = {}
    for broker, queue_id in queues:
        messages = fetch_queue(url, broker, queue_id)
        assert [m["queue_offset"] for m in messages] == list(range(len(messages)))
        indexes = [int(m["body"].split("-")[1]) for m in messages]
        assert indexes == sorted(indexes), f"{broker}#{queue_id} is out of send order"
        for m in messages:
            assert m["body"] not in seen, f"{m['body']} read twice"
            assert m["tag"] == "skeleton" and m["keys"] == [f"k{int(m['body'][4:])}"]
            seen[m["body"]] = (broker, queue_id, m["queue_offset"])
    assert seen == acked  # every body exactly once, where the gateway said it was stored

    # The first send is one trace: gateway-http → name-server (route lookup) → broker (Send).
    collector = stack.extra["collector_url"]

    def trace_services():
        response = requests.get(f"{collector}/api/traces/{trace_ids[0]}", timeout=5)
        if response.status_code != 200:
            return False
        services = {span["service"] for span in response.json()["spans"]}
        return services if {"gateway-http", "name-server", "broker"} <= services else False

    wait_until(trace_services, 30, interval=0.2, message="the send trace to reach every service")
    # The broker's Send spans say where the batch was stored (topic, queue, offsets, count).
    spans = requests.get(f"{collector}/api/traces/{trace_ids[0]}", timeout=5).json()["spans"]
    stored = [span["attributes"] for span in spans
              if span["service"] == "broker" and span["name"].endswith("/Send")]
    first_batch = [acked[f"msg-{i:05d}"] for i in range(BATCH)]
    assert stored and sum(a["messaging.batch.message_count"] for a in stored) == BATCH
    assert {(int(a["messaging.destination.partition.id"]), a["tidemq.queue_offset"])
            for a in stored} <= {(queue, offset) for _, queue, offset in first_batch}
    assert all(a["messaging.destination.name"] == TOPIC for a in stored)
    # The indexing poll above made many newer gateway traces: ask for the whole page.
    listed = requests.get(f"{collector}/api/traces",
                          params={"service": "gateway-http", "limit": 1000},
                          timeout=5).json()["traces"]
    assert trace_ids[0] in {t["trace_id"] for t in listed}


def test_bad_input_is_a_precise_4xx(stack):
    url = stack.gateway_url
    problem(requests.post(f"{url}/v1/topics/NoSuchTopic/messages",
                          json={"messages": [{"body": "x"}]}, timeout=10), 404, "TOPIC_NOT_EXIST")
    problem(requests.get(f"{url}/v1/topics/NoSuchTopic", timeout=10), 404, "TOPIC_NOT_EXIST")
    problem(requests.post(f"{url}/v1/topics/{TOPIC}/messages", data=b"", timeout=10),
            400, "EMPTY_BODY")
    problem(requests.post(f"{url}/v1/topics/{TOPIC}/messages", data=b'{"messages": [',
                          timeout=10), 400, "MALFORMED_JSON")
    problem(requests.post(f"{url}/v1/topics/{TOPIC}/messages",
                          json={"messages": [{"body": ""}]}, timeout=10), 400, "MESSAGE_BODY_EMPTY")
    problem(requests.post(f"{url}/v1/topics", json={"name": "bad/name", "queues": 4}, timeout=10),
            400, "INVALID_TOPIC")
    big = base64.b64encode(b"\0" * (4 * 1024 * 1024 + 1)).decode()
    problem(requests.post(f"{url}/v1/topics/{TOPIC}/messages",
                          json={"messages": [{"body": big, "encoding": "base64"}]}, timeout=30),
            413, "MESSAGE_TOO_LARGE")
    problem(requests.get(f"{url}/v1/topics/{TOPIC}/queues/broker-z/0/messages", timeout=10),
            404, "BROKER_NOT_FOUND")
    metrics = requests.get(f"{url}/metrics", timeout=10).text
    assert 'tidemq_gateway_http_requests_total{endpoint="/v1/topics/<topic>/messages"' in metrics


def test_a_dead_broker_is_503_then_fails_fast_once_its_breaker_opens(stack):
    url = stack.gateway_url
    stack.brokers["broker-b"].kill()
    fetch = f"{url}/v1/topics/{TOPIC}/queues/broker-b/0/messages"
    codes = []
    for _ in range(30):  # each failure counts against the breaker shared in Redis
        codes.append(problem_code(requests.get(fetch, timeout=10), 503))
        if codes[-1] == "CIRCUIT_OPEN":
            break
    assert codes[0] == "SERVICE_UNAVAILABLE" and codes[-1] == "CIRCUIT_OPEN", codes
    # Shared through Redis: whichever worker takes a new connection answers fast-fail.
    assert {problem_code(requests.get(fetch, timeout=10), 503) for _ in range(6)} == {"CIRCUIT_OPEN"}

    # Sends steer around the open breaker to the live group.
    sent = requests.post(f"{url}/v1/topics/{TOPIC}/messages",
                         json={"messages": [{"body": f"after-{i}"} for i in range(20)]},
                         timeout=30)
    assert sent.status_code == 201, sent.text
    assert {r["broker_name"] for r in sent.json()["results"]} == {"broker-a"}
    by_queue = defaultdict(int)
    for r in sent.json()["results"]:
        by_queue[r["queue_id"]] += 1
    assert sum(by_queue.values()) == 20

    stack.brokers["broker-a"].kill()
    send_codes = []
    for _ in range(30):
        send_codes.append(problem_code(requests.post(
            f"{url}/v1/topics/{TOPIC}/messages", json={"messages": [{"body": "lost"}]},
            timeout=10), 503))
        if send_codes[-1] == "CIRCUIT_OPEN":
            break
    assert send_codes[-1] == "CIRCUIT_OPEN", send_codes


def problem_code(response: requests.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    return response.json()["code"]
