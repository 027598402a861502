"""FIFO message groups and delay fields through the HTTP gateway, with real processes (Redis,
config center, two name servers, two broker groups, the gateway under gunicorn): the messages
of one group land in one queue in send order, across requests and mixed with other groups
and ungrouped messages; bad delays and unknown fields are answered with precise codes."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.slow
TOPIC = "HttpFifo"
GROUPS = [f"order-{i}" for i in range(6)]


@pytest.fixture(scope="module")
def cluster(shared_gateway_cluster):
    """The shared two-broker cluster (tests/conftest.py); the topic is this module's own."""
    cluster = shared_gateway_cluster
    response = requests.post(f"{cluster.gateway_url}/v1/topics",
                             json={"name": TOPIC, "queues": 4}, timeout=30)
    assert response.status_code == 201, response.text
    assert len(response.json()["brokers"]) == 2
    return cluster


def send(cluster, messages: list[dict]) -> requests.Response:
    return requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                         json={"messages": messages}, timeout=30)


def test_a_groups_messages_land_in_one_queue_in_send_order(cluster):
    sent: dict[str, list[tuple[str, str, int, int]]] = {g: [] for g in GROUPS}
    for request_no in range(5):
        messages = []
        for seq in range(12):
            group = GROUPS[(request_no + seq) % len(GROUPS)]
            messages.append({"body": f"{group}:{request_no}:{seq}", "message_group": group})
            messages.append({"body": f"plain:{request_no}:{seq}"})  # round-robin, in between
        response = send(cluster, messages)
        assert response.status_code == 201, response.text
        for message, result in zip(messages, response.json()["results"], strict=True):
            if "message_group" in message:
                sent[message["message_group"]].append((message["body"], result["broker_name"],
                                                       result["queue_id"],
                                                       result["queue_offset"]))
    queues_used = set()
    for group, results in sent.items():
        queues = {(broker, queue_id) for _, broker, queue_id, _ in results}
        assert len(queues) == 1, f"{group} was spread over {queues}"
        offsets = [offset for *_, offset in results]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        queues_used |= queues

        (broker, queue_id), = queues
        fetched = requests.get(
            f"{cluster.gateway_url}/v1/topics/{TOPIC}/queues/{broker}/{queue_id}/messages",
            params={"offset": 0, "max": 1000}, timeout=30).json()["messages"]
        in_queue = [m["body"] for m in fetched if m["message_group"] == group]
        assert in_queue == [body for body, *_ in results]  # the send order, nothing lost
    assert len(queues_used) > 1  # the groups are spread over queues, each kept in one


@pytest.mark.parametrize(("message", "code"), [
    ({"body": "x", "delay_ms": -1}, "INVALID_DELAY"),
    ({"body": "x", "deliver_at": -1}, "INVALID_DELAY"),
    ({"body": "x", "delay_ms": 1000, "deliver_at": 1795000000000}, "INVALID_DELAY"),
    ({"body": "x", "delay_ms": "1000"}, "INVALID_DELAY"),
    ({"body": "x", "dealy_ms": 1000}, "UNKNOWN_FIELD"),
    ({"body": "x", "message_group": ["a"]}, "INVALID_MESSAGE"),
])
def test_bad_delays_and_unknown_fields_are_precise_problems(cluster, message, code):
    response = send(cluster, [{"body": "fine"}, message])
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.json()["code"] == code
    assert "messages[1]" in response.json()["detail"]


def test_openapi_describes_the_send_fields(cluster):
    spec = requests.get(f"{cluster.gateway_url}/openapi.json", timeout=30).json()
    message = spec["components"]["schemas"]["SendMessage"]
    assert {"message_group", "delay_ms", "deliver_at"} <= set(message["properties"])
    assert message["additionalProperties"] is False
