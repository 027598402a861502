"""Transactions through the HTTP gateway: open, send with the id, commit (visible exactly once,
also when committed twice, through another worker), rollback (never visible), an expired
transaction rolled back by the broker's check-back, and bad input (an unknown id, ending the
other way) answered with precise problem+json codes. Real processes: Redis, config center,
two name servers, one broker group (short check-back timings), the gateway with two workers."""

from __future__ import annotations

import pytest
import requests

from tests.support.cluster import running_cluster
from tests.support.http import problem
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "HttpTx"
CHECK_ENV = {"TIDEMQ_TRANSACTION_TIMEOUT_MS": "1000",
             "TIDEMQ_TRANSACTION_CHECK_INTERVAL_MS": "1000",
             "TIDEMQ_TRANSACTION_CHECK_MAX": "100"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Its own cluster, not a shared one: the short check-back timings would roll back another
    # module's deliberately pending transaction.
    with running_cluster(tmp_path_factory.mktemp("http-tx"), broker_names=("broker-a",),
                         env=CHECK_ENV) as cluster:
        # the gateway expires an open HTTP transaction after 3 s
        cluster.start_gateway(workers=2, extra=["--transaction-ttl-s", "3"])
        response = requests.post(f"{cluster.gateway_url}/v1/topics",
                                 json={"name": TOPIC, "queues": 2}, timeout=30)
        assert response.status_code == 201, response.text
        yield cluster



def open_transaction(cluster, **body) -> str:
    response = requests.post(f"{cluster.gateway_url}/v1/transactions", json=body or None,
                             timeout=30)
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "OPEN"
    return response.json()["id"]


def send(cluster, tx_id: str, *bodies: str) -> requests.Response:
    return requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages", json={
        "messages": [{"body": b} for b in bodies], "transaction_id": tx_id}, timeout=30)


def end(cluster, tx_id: str, verb: str) -> requests.Response:
    return requests.post(f"{cluster.gateway_url}/v1/transactions/{tx_id}/{verb}", timeout=30)


def visible(cluster) -> list[str]:
    bodies = []
    for q in range(2):
        response = requests.get(f"{cluster.gateway_url}/v1/topics/{TOPIC}/queues/broker-a/{q}"
                                "/messages?offset=0&max=100", timeout=30)
        assert response.status_code == 200, response.text
        bodies += [m["body"] for m in response.json()["messages"]]
    return sorted(bodies)


def test_commit_and_rollback_and_bad_ends(cluster):
    committed = open_transaction(cluster)
    assert send(cluster, committed, "c-1", "c-2").status_code == 201
    rolled_back = open_transaction(cluster, producer_group="http-tx-producers")
    assert send(cluster, rolled_back, "r-1").status_code == 201
    assert visible(cluster) == []   # prepared: stored, invisible

    for _ in range(3):  # several tries: the two workers each take some of them
        answer = end(cluster, committed, "commit")
        assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "COMMITTED" and answer.json()["already_resolved"]
    assert answer.json()["messages"] == 2
    assert end(cluster, rolled_back, "rollback").json()["state"] == "ROLLED_BACK"
    assert visible(cluster) == ["c-1", "c-2"]

    problem(end(cluster, rolled_back, "commit"), 409, "TRANSACTION_ALREADY_RESOLVED")
    problem(send(cluster, committed, "late"), 409, "TRANSACTION_ALREADY_RESOLVED")
    problem(end(cluster, "0" * 32, "commit"), 404, "TRANSACTION_NOT_FOUND")
    problem(end(cluster, "not-an-id", "rollback"), 404, "TRANSACTION_NOT_FOUND")
    problem(send(cluster, "f" * 32, "x"), 404, "TRANSACTION_NOT_FOUND")
    problem(requests.post(f"{cluster.gateway_url}/v1/transactions",
                          json={"producer_group": "bad group"}, timeout=30),
            400, "INVALID_PRODUCER_GROUP")
    problem(requests.post(f"{cluster.gateway_url}/v1/transactions",
                          json={"producer_grup": "typo"}, timeout=30), 400, "UNKNOWN_FIELD")
    problem(requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                          json={"messages": [{"body": "x"}], "transaction_id": 7}, timeout=30),
            400, "INVALID_REQUEST")
    # a request failing part-way: its first message was prepared, then rolled back
    mixed = open_transaction(cluster)
    problem(requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages", json={
        "messages": [{"body": "first-part"}, {"body": "delayed", "delay_ms": 1000}],
        "transaction_id": mixed}, timeout=30), 400, "TRANSACTION_WITH_DELAY")
    assert end(cluster, mixed, "commit").json()["messages"] == 0
    assert visible(cluster) == ["c-1", "c-2"]


def test_an_expired_transaction_is_rolled_back_by_the_check_back(cluster):
    before = visible(cluster)
    forgotten = open_transaction(cluster)
    assert send(cluster, forgotten, "expired-1").status_code == 201
    # the gateway answers the broker's check-backs UNKNOWN while open, ROLLBACK once expired
    described = requests.get(f"{cluster.gateway_url}/v1/transactions/{forgotten}", timeout=30)
    assert (described.json()["state"], described.json()["messages"]) == ("OPEN", 1)
    wait_until(lambda: requests.get(f"{cluster.gateway_url}/v1/transactions/{forgotten}",
                                    timeout=30).status_code == 404, 30, interval=0.5,
               message="the open transaction expired")
    problem(end(cluster, forgotten, "commit"), 404, "TRANSACTION_NOT_FOUND")
    wait_until(lambda: _broker_state(cluster, "expired-1") == "ROLLED_BACK", 30, interval=0.5,
               message="the broker rolled the expired transaction's message back")
    assert visible(cluster) == before


def _broker_state(cluster, body: str) -> str:
    """The broker's state of the half message with `body` (read from its half topic)."""
    from tidemq.client import MessageQueue, PullConsumer, TransactionProducer
    from tidemq.client.message import SendResult, SendStatus
    from tidemq.client.transaction import TransactionResolution

    with PullConsumer(cluster.namesrv_addrs, consumer_group="tx-inspect") as puller:
        result = puller.pull(MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", "broker-a", 0), 0, 100)
    half = next(m for m in result.messages if m.body == body.encode())
    prepared = SendResult(SendStatus.SEND_OK, half.msg_id, half.unique_id, "broker-a", 0, 0)
    with TransactionProducer(cluster.namesrv_addrs,
                             producer_group="tidemq-gateway-http") as inspector:
        return inspector.end(prepared, TransactionResolution.UNKNOWN, topic=TOPIC).state
