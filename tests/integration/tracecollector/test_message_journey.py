"""Acceptance of issue 14's message traces, with real processes: Redis, config center, two
name servers, one broker group, the HTTP gateway, the trace collector, and a push consumer in
its own traced process.

A message sent through the HTTP gateway and consumed by the push consumer yields one publish
span, one store span and one process span linked to it, all found by searching the message's
key; the message view lists each step. A message the listener gives back once also shows the
broker's retry and delayed-delivery events and a second, successful process span; a
transaction's commit or rollback is on its message's journey. A pop group's nack (its
invisible time changed), the retry that follows and its ack end the message's journey, with
the group and the time from store; so do a pop group's move to the DLQ, its re-drive and the
ack after it. The sampler's quiet list changes through the config center without a restart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import pytest
import requests
from tidemq.configclient.client import ConfigClient

from tests.support.cluster import TRACING_ENV, traced_cluster
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow  # the whole topology plus the collector and a consumer (~30 s)
TOPIC, GROUP = "TracedOrders", "g-traced"
ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
       "TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "300",
       "TIDEMQ_MESSAGE_DELAY_LEVEL": " ".join(["300ms"] * 18)}  # a retry waits 300 ms

CONSUMER = textwrap.dedent('''
    import sys
    from tidemq.common.tracing import init_tracing, shutdown_tracing
    namesrv, otlp, topic, group, offsets, fail_key = sys.argv[1:]
    init_tracing("it-consumer", otlp)
    from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer
    failed = set()

    def listener(batch):
        (message,) = batch
        if fail_key in message.keys and fail_key not in failed:
            failed.add(fail_key)
            return ConsumeStatus.RECONSUME_LATER  # given back once: a retry
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(namesrv, group, {topic: "*"}, listener,
                            consume_from=ConsumeFrom.FIRST, offset_store_dir=offsets,
                            session_timeout_ms=3000, heartbeat_interval_ms=500,
                            long_poll_s=1.0, reconsume_backoff_s=0.2)
    consumer.start()
    sys.stdin.read()  # until the test closes stdin
    consumer.shutdown()
    shutdown_tracing()
''')


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("journey"), extra_env=ENV,
                        broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=1)
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 2}, timeout=30)
        assert created.status_code == 201, created.text
        yield cluster


@pytest.fixture(scope="module")
def consumer(stack, tmp_path_factory):
    """The push consumer process; `fail_key` names the message it gives back once."""
    tmp = tmp_path_factory.mktemp("consumer")
    fail_key = f"retry-{uuid.uuid4().hex[:8]}"
    log = (tmp / "consumer.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, stack.namesrv_addrs, stack.otlp_endpoint, TOPIC,
         GROUP, str(tmp / "offsets"), fail_key],
        stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, **TRACING_ENV})
    try:
        yield fail_key
    finally:
        process.stdin.close()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


def _send(stack, key: str) -> dict:
    response = requests.post(f"{stack.gateway_url}/v1/topics/{TOPIC}/messages",
                             json={"messages": [{"body": f"order {key}", "key": key}]},
                             timeout=30)
    assert response.status_code == 201, response.text
    [result] = response.json()["results"]
    return result


def _get(stack, path: str, **params) -> dict:
    response = requests.get(f"{stack.extra['collector_url']}{path}", params=params, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def _spans_found_by_key(stack, key: str) -> list[dict]:
    traces = _get(stack, "/api/traces", key=key, limit=50)["traces"]
    return [span for summary in traces
            for span in _get(stack, f"/api/traces/{summary['trace_id']}")["spans"]]


def _in_order(wanted: list[str], kinds: list[str]) -> bool:
    remaining = iter(kinds)
    return all(kind in remaining for kind in wanted)


def _wait_for_steps(stack, key: str, wanted: list[str], message: str,
                    exact: bool = True) -> dict:
    """The message's journey once its steps are `wanted` (in order; with `exact=False`, among
    others: a rebalance may hand a message out once more); polls while spans are still coming,
    and says which steps it saw if they never match."""
    seen: list = []

    def steps():
        journeys = _get(stack, "/api/messages", key=key)["messages"]
        seen[:] = [[step["kind"] for step in journey["steps"]] for journey in journeys]
        # A read may hand a message out twice (at least once): one step per kind in a row.
        collapsed = [[kind for n, kind in enumerate(kinds) if n == 0 or kinds[n - 1] != kind]
                     for kinds in seen]
        if len(collapsed) != 1:
            return None
        matched = collapsed[0] == wanted if exact else _in_order(wanted, collapsed[0])
        return journeys[0] if matched else None

    try:
        return wait_until(steps, 30, interval=0.3, message=message)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; the journeys' steps were {seen}") from None


def test_gateway_publish_store_and_push_consumer_process_found_by_key(stack, consumer):
    key = f"order-{uuid.uuid4().hex[:8]}"
    sent = _send(stack, key)

    wanted = ["published", "stored", "delivered", "processed"]
    journey = _wait_for_steps(stack, key, wanted,
                              "publish, store, receive and process spans of the message")
    spans = _spans_found_by_key(stack, key)
    publishes = [s for s in spans if s["kind"] == "PRODUCER"]
    stores = [s for s in spans if "tidemq.queue_offset" in s["attributes"]]
    processes = [s for s in spans if s["name"] == f"{TOPIC} process"]
    assert len(publishes) == len(stores) == len(processes) == 1, [s["name"] for s in spans]
    [publish], [store], [process] = publishes, stores, processes
    assert publish["service"] == "gateway-http"
    assert publish["attributes"]["tidemq.message.keys"] == [key]
    assert publish["attributes"]["messaging.message.id"] == sent["unique_id"]
    assert store["service"] == "broker"
    assert store["attributes"]["messaging.message.id"] == sent["msg_id"]
    assert store["attributes"]["tidemq.unique_id"] == sent["unique_id"]
    assert store["attributes"]["tidemq.queue_offset"] == sent["queue_offset"]
    assert process["service"] == "it-consumer"
    assert (process["trace_id"], process["parent_span_id"]) == (
        publish["trace_id"], publish["span_id"])
    assert process["attributes"]["tidemq.consume.status"] == "CONSUME_SUCCESS"

    published, stored, delivered, processed = (
        next(step for step in journey["steps"] if step["kind"] == kind) for kind in wanted)
    assert journey["trace_id"] == publish["trace_id"]
    assert published["facts"]["via"].startswith("gateway-http: POST /v1/topics/")
    assert stored["facts"]["queue offset"] == str(sent["queue_offset"])
    assert delivered["facts"]["group"] == GROUP and delivered["service"] == "it-consumer"
    assert processed["facts"]["member"]  # which member of the group
    # the receive span links to the publish span (one read carries many messages' traces)
    receive = _get(stack, f"/api/traces/{delivered['trace_id']}")["spans"]
    [linked] = [s for s in receive if s["span_id"] == delivered["span_id"]]
    assert {"trace_id": publish["trace_id"], "span_id": publish["span_id"]}.items() <= \
        linked["links"][0].items()

    # The page the console links to lists each step, found by the msg id.
    page = requests.get(f"{stack.extra['collector_url']}/messages",
                        params={"msg_id": sent["msg_id"]}, timeout=10)
    assert page.status_code == 200
    for text in ("published by gateway-http", "stored by broker", "delivered to it-consumer",
                 "processed", f"/traces/{publish['trace_id']}"):
        assert text in page.text


def test_a_message_given_back_once_shows_the_retry_and_its_redelivery(stack, consumer):
    fail_key = consumer
    _send(stack, fail_key)
    wanted = ["published", "stored", "delivered", "processed", "retry", "delayed_delivery",
              "delivered", "processed"]
    journey = _wait_for_steps(stack, fail_key, wanted,
                              "the retry, its delayed delivery and the second processing",
                              exact=False)
    kinds = [step["kind"] for step in journey["steps"]]
    first = journey["steps"][kinds.index("processed")]
    retry = journey["steps"][kinds.index("retry")]
    second = journey["steps"][len(kinds) - 1 - kinds[::-1].index("processed")]
    assert first["status"] == "ERROR" and second["status"] != "ERROR"
    assert retry["service"] == "broker" and retry["facts"]["group"] == GROUP
    assert retry["facts"]["topic"] == f"%RETRY%{GROUP}"
    assert len(_get(stack, "/api/traces", key=fail_key, errors="true")["traces"]) == 1


def test_a_transaction_commit_and_a_rollback_are_on_their_messages_journeys(stack, consumer):
    keys = {}
    for verb in ("commit", "rollback"):
        opened = requests.post(f"{stack.gateway_url}/v1/transactions", timeout=30)
        assert opened.status_code == 201, opened.text
        tx_id, keys[verb] = opened.json()["id"], f"tx-{verb}-{uuid.uuid4().hex[:8]}"
        sent = requests.post(f"{stack.gateway_url}/v1/topics/{TOPIC}/messages", json={
            "messages": [{"body": "paid", "key": keys[verb]}], "transaction_id": tx_id},
            timeout=30)
        assert sent.status_code == 201, sent.text
        ended = requests.post(f"{stack.gateway_url}/v1/transactions/{tx_id}/{verb}", timeout=30)
        assert ended.status_code == 200, ended.text
    committed = ["published", "stored", "transaction_commit", "delivered", "processed"]
    # among others: a rebalance under load may hand the committed message out once more
    journey = _wait_for_steps(stack, keys["commit"], committed,
                              "the commit event, then the committed message consumed",
                              exact=False)
    assert "transaction_rollback" not in [step["kind"] for step in journey["steps"]]
    rolled_back = ["published", "stored", "transaction_rollback"]
    _wait_for_steps(stack, keys["rollback"], rolled_back, "the rollback event")


def _pop_key(stack, group: str, key: str) -> dict:
    """Pop `group` until the message with `key` comes (others of the topic are acked)."""
    def popped():
        response = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/pop",
                                 json={"max": 16, "invisible_ms": 30_000, "wait_ms": 1000},
                                 timeout=30)
        assert response.status_code == 200, response.text
        mine = None
        for message in response.json()["messages"]:
            if key in message["keys"]:
                mine = message
            else:
                _ack(stack, group, message["receipt_handle"])
        return mine

    return wait_until(popped, 30, interval=0.1, message=f"{group} pops the message {key}")


def _ack(stack, group: str, receipt_handle: str) -> None:
    response = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/ack",
                             json={"receipt_handle": receipt_handle}, timeout=30)
    assert response.status_code == 200, response.text


def test_a_pop_groups_nack_retry_and_ack_end_the_journey(stack, consumer):
    group = "g-pop-journey"
    created = requests.post(f"{stack.gateway_url}/v1/groups", json={"name": group}, timeout=30)
    assert created.status_code in (200, 201), created.text
    key = f"pop-{uuid.uuid4().hex[:8]}"
    sent = _send(stack, key)
    first = _pop_key(stack, group, key)
    nacked = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/invisible",
                           json={"receipt_handle": first["receipt_handle"],
                                 "invisible_ms": 1}, timeout=30)
    assert nacked.status_code == 200, nacked.text
    again = _pop_key(stack, group, key)  # revived through the group's retry topic
    assert again["delivery_count"] >= 2
    _ack(stack, group, again["receipt_handle"])

    wanted = ["published", "stored", "nack", "retry", "ack"]
    journey = _wait_for_steps(stack, key, wanted, "the pop group's nack, retry and ack",
                              exact=False)
    kinds = [step["kind"] for step in journey["steps"]]
    nack, ack = (journey["steps"][kinds.index(kind)] for kind in ("nack", "ack"))
    for step in (nack, ack):
        assert step["service"] == "broker" and step["facts"]["group"] == group
        assert step["facts"]["topic"] == TOPIC
        assert int(step["facts"]["store to ack/nack (ms)"]) >= 0
    assert ack["title"].startswith(f"acked by {group}, ")
    assert ack["title"].endswith(" after it was stored")
    assert nack["title"].startswith(f"invisible time changed by {group} (delivered again in ")
    assert sent["msg_id"] in journey["msg_ids"]
    page = requests.get(f"{stack.extra['collector_url']}/messages", params={"key": key},
                        timeout=10)
    assert f"acked by {group}" in page.text


def _nack(stack, group: str, receipt_handle: str) -> None:
    """Change the invisible time to 1 ms: the revive moves it on (retry, or the DLQ)."""
    response = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/invisible",
                             json={"receipt_handle": receipt_handle, "invisible_ms": 1},
                             timeout=30)
    assert response.status_code == 200, response.text


def test_a_pop_groups_dead_letter_and_its_redrive_are_on_the_journey(stack, consumer):
    group = "g-pop-dlq-journey"
    created = requests.post(f"{stack.gateway_url}/v1/groups",
                            json={"name": group, "retry_max_times": 1}, timeout=30)
    assert created.status_code in (200, 201), created.text
    key = f"pop-dlq-{uuid.uuid4().hex[:8]}"
    _send(stack, key)
    _nack(stack, group, _pop_key(stack, group, key)["receipt_handle"])
    _nack(stack, group, _pop_key(stack, group, key)["receipt_handle"])  # the retry: then DLQ
    _wait_for_steps(stack, key, ["published", "stored", "nack", "retry", "nack", "dead_letter"],
                    "two nacks, a retry, then the DLQ", exact=False)
    redriven = requests.post(f"{stack.gateway_url}/v1/groups/{group}/dlq/redrive",
                             json={"all": True}, timeout=30)
    assert redriven.status_code == 200, redriven.text
    _ack(stack, group, _pop_key(stack, group, key)["receipt_handle"])
    journey = _wait_for_steps(
        stack, key, ["published", "stored", "nack", "retry", "nack", "dead_letter", "redrive",
                     "ack"], "the re-drive and the ack after it", exact=False)
    kinds = [step["kind"] for step in journey["steps"]]
    dead = journey["steps"][kinds.index("dead_letter")]
    assert dead["facts"]["group"] == group and dead["facts"]["topic"] == f"%DLQ%{group}"
    assert journey["steps"][kinds.index("redrive")]["facts"]["topic"] == TOPIC
    assert journey["steps"][len(kinds) - 1 - kinds[::-1].index("ack")]["facts"]["group"] == group


def test_service_map_shows_the_calls_and_the_publish_to_consume_link(stack, consumer):
    def edges():
        found = {(e["caller"], e["callee"], e["kind"]): e
                 for e in _get(stack, "/api/service-map", since="10m")["edges"]}
        return found if ("gateway-http", "it-consumer", "receive") in found else None

    found = wait_until(edges, 30, interval=0.3, message="a publish → consume edge")
    assert found["gateway-http", "broker", "call"]["requests"] >= 1
    assert found["gateway-http", "it-consumer", "consume"]["requests"] >= 1


def test_the_quiet_list_changes_through_the_config_center_without_a_restart(stack):
    def register_traces() -> int:
        traces = _get(stack, "/api/traces", service="broker", limit=1000,
                      internal="true")["traces"]  # hidden by default even when recorded
        return sum((t["root_name"] or "").endswith("RegisterBroker") for t in traces)

    assert register_traces() == 0  # quiet by default
    with ConfigClient(stack.config_center.addr) as config:
        config.put("/tidemq/config/group/broker-a/trace_quiet_operations", b"Heartbeat,Pull")
    # the broker registers every 5 s in tests: the next registration is traced
    wait_until(lambda: register_traces() > 0, 30, interval=0.5,
               message="a RegisterBroker trace once the quiet list no longer names it")
    # recorded now, yet the default list still opens on users' traces
    default = _get(stack, "/api/traces", service="broker", limit=1000)["traces"]
    assert not [t for t in default if (t["root_name"] or "").endswith("RegisterBroker")]
