"""The official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs, pinned in node/) through
gateway-grpc: each test runs one scenario of node/conformance.mjs in a real `node` process and
asserts on the JSON line it prints (what was sent, received, acked, the errors and their codes).

The client checks every delivered body against its digest and drops a mismatch as "corrupted"
(`corrupted` in the result), so every consuming scenario also proves the digests. Install the
client with `make node-deps`; without node the tests skip locally and fail under CI=true.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tidemq.client import DeadLetters

from tests.integration.rocketmq.conftest import NODE_FIFO_DLQ_GROUP, NODE_FIFO_PUSH_GROUP
from tests.support.processes import wait_until
from tests.support.tools import IN_CI

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).parent / "node"
INSTALL = "make node-deps (npm ci --prefix tests/integration/rocketmq/node)"
SCENARIO_TIMEOUT_MS = 60_000   # each scenario's own deadline, polled inside the script
OK, ILLEGAL_TOPIC, TOPIC_NOT_FOUND = 20000, 40002, 40402   # apache.rocketmq.v2.Code


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (Debian: apt-get install nodejs npm), then " + INSTALL
    if not (PROJECT / "node_modules" / "rocketmq-client-nodejs").is_dir():
        return f"the Node.js client is not installed: {INSTALL}"
    return None


@pytest.fixture(scope="module")
def node(request):
    """Runs one scenario: node conformance.mjs <scenario> ... -> its JSON result."""
    if missing := _missing():   # checked before the cluster starts
        if IN_CI:   # .ci/run installs node and `make test` the client: a skip would hide a hole
            pytest.fail(missing)
        pytest.skip(missing)
    endpoint = request.getfixturevalue("endpoint")

    def run(scenario: str, topic: str, group: str = "node-conformance") -> dict:
        done = subprocess.run(
            ["node", str(PROJECT / "conformance.mjs"), scenario, "--endpoint", endpoint,
             "--topic", topic, "--group", group, "--timeout-ms", str(SCENARIO_TIMEOUT_MS)],
            capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_MS / 1000 + 60)
        sys.stderr.write(done.stderr[-4000:])
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


def _clean(result: dict) -> dict:
    assert result["errors"] == [], result["errors"]
    assert result["corrupted"] == [], result["corrupted"]   # every body matched its digest
    return result


def _bodies(messages: list[dict]) -> list[str]:
    return sorted(m["body"] for m in messages)


def test_producer_normal_messages_reach_a_simple_consumer(node):
    result = _clean(node("normal", "NodeNormal", "node-normal"))
    assert _bodies(result["received"]) == [f"n-{i}" for i in range(5)]
    assert {m["messageId"] for m in result["received"]} == {s["messageId"]
                                                            for s in result["sent"]}
    third = next(m for m in result["received"] if m["body"] == "n-3")
    assert third["tag"] == "t" and third["keys"] == ["k3"]
    assert third["properties"] == {"shop": "7"}
    assert all(m["deliveryAttempt"] == 1 and not m["corrupted"] for m in result["received"])
    assert sorted(result["acked"]) == _bodies(result["received"])


def test_fifo_message_groups_arrive_in_send_order(node):
    result = _clean(node("fifo", "NodeFifo", "node-fifo"))
    for group in ("g1", "g2", "g3"):
        seen = [int(m["body"].split(":")[1]) for m in result["received"] if m["group"] == group]
        assert seen == list(range(6)), f"{group} out of order: {seen}"


def test_delivery_timestamp_holds_a_message_until_then(node):
    result = _clean(node("delay", "NodeDelay", "node-delay"))
    by_body = {m["body"]: m for m in result["received"]}
    assert set(by_body) == {"later", "now"}
    assert by_body["later"]["deliveryTimestamp"] == result["deliverAt"]
    assert by_body["later"]["receivedAt"] >= result["deliverAt"]


def test_transaction_commit_rollback_and_check_back(node):
    result = _clean(node("transaction", "NodeTxn", "node-txn"))
    assert _bodies(result["received"]) == ["checked", "committed", "last"]
    checked = {m["body"] for m in result["checked"]}
    assert checked >= {"checked", "checked-out"} and "committed" not in checked


def test_simple_consumer_tag_filter_and_invisible_duration(node):
    result = _clean(node("simple", "NodeSimple", "node-simple"))
    first, again = result["received"][:3], result["redelivered"]
    assert _bodies(first) == ["m-0", "m-2", "m-4"]    # only the "even" tag
    assert _bodies(again) == _bodies(first[1:])        # released after 1 s, the kept one not
    assert all(m["deliveryAttempt"] == 2 for m in again)
    assert sorted(result["acked"]) == ["m-0", "m-2", "m-4"]   # the kept one by its new handle


def test_sql92_filter_over_user_properties(node):
    result = _clean(node("sql", "NodeSql", "node-sql"))
    assert _bodies(result["received"]) == ["s-4", "s-5"]


def test_push_consumer_concurrent_redelivers_a_failure(node):
    """Before gateway-grpc sent the MD5 digest as upper-case hex, this client's PushConsumer
    discarded every message as corrupted. The client 1.0.8 reads no backoff from the gateway's
    customized one (RocketMQ's delay levels), so it nacks with 0 ms: "visible again
    now", which gateway-grpc once refused (BAD_REQUEST, the nack retried every second)."""
    result = _clean(node("push", "NodePush", "node-push"))
    attempts = Counter(m["body"] for m in result["received"])
    assert set(attempts) == {f"p-{i}" for i in range(10)}
    assert attempts["p-0"] == 2 and all(n == 1 for b, n in attempts.items() if b != "p-0")
    assert sorted(m["deliveryAttempt"] for m in result["received"] if m["body"] == "p-0") == [1, 2]
    assert result["nacked"] == [{"code": OK, "invisibleMs": 0}]


def test_fifo_push_consumer_of_an_orderly_group_keeps_group_order(node):
    result = _clean(node("pushFifo", "NodeFifoPush", NODE_FIFO_PUSH_GROUP))
    for group in ("g1", "g2", "g3"):
        seen = [int(m["body"].split(":")[1]) for m in result["received"] if m["group"] == group]
        assert seen == list(range(6)), f"{group} out of order: {seen}"


def test_fifo_push_consumer_dead_letters_a_failing_message(node, rmq_cluster):
    """The group allows two attempts (retry_max_times 1), but the client 1.0.8 reads no maximum
    from a customized backoff: it takes one and forwards the message after its first failure."""
    result = _clean(node("pushDlq", "NodeFifoDlq", NODE_FIFO_DLQ_GROUP))
    assert result["maxAttempts"] is None
    assert [m["deliveryAttempt"] for m in result["received"]] == [1]
    assert result["forwarded"] == [{"code": OK, "invisibleMs": None}]

    def dead_letters() -> list:
        with DeadLetters(rmq_cluster.namesrv_addrs, NODE_FIFO_DLQ_GROUP) as dlq:
            return dlq.list()

    dead = wait_until(dead_letters, 30, interval=0.2, message="poison in the DLQ")
    assert [m.body for m in dead] == [b"poison"] and dead[0].origin_topic == "NodeFifoDlq"
    assert dead[0].properties.get("RMQ_MESSAGE_ID") == result["sent"][0]["messageId"]


def test_bad_input_gets_its_codes(node):
    result = node("badInput", "NodeNormal")
    errors = {e["op"]: e for e in result["errors"]}
    assert set(errors) == {"startup:unknown-topic", "send:NodeNoSuchTopic", "send:bad topic!"}
    # startup retries the route three times, then throws without the code (client 1.0.8)
    assert "Failed to fetch topic routes" in errors["startup:unknown-topic"]["message"]
    assert errors["send:NodeNoSuchTopic"]["code"] == TOPIC_NOT_FOUND
    assert errors["send:NodeNoSuchTopic"]["name"] == "NotFoundException"
    # refused by name, without a lookup (it was TOPIC_NOT_FOUND from the name servers)
    assert errors["send:bad topic!"]["code"] == ILLEGAL_TOPIC
    assert errors["send:bad topic!"]["name"] == "BadRequestException"
