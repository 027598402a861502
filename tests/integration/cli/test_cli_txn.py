"""`tidemq txn send|end` against real processes: a committed message is visible, an open one is
not until `txn end` commits it, a repeat is answered as such and a conflict refused."""

from __future__ import annotations

import json

import pytest
from tidemq.client import MessageQueue, PullConsumer
from tidemq.client.cli import app
from typer.testing import CliRunner

from tests.support.cluster import create_topic_in_config_center, wait_for_route

pytestmark = pytest.mark.slow
TOPIC = "CliTx"


def test_txn_send_and_end(shared_one_broker_cluster):
    cluster = shared_one_broker_cluster  # tests/conftest.py: topic and group are ours
    create_topic_in_config_center(cluster, TOPIC, 1)
    wait_for_route(cluster, TOPIC, 1)
    runner = CliRunner()

    def tidemq(*args: str, expect: int = 0) -> dict:
        result = runner.invoke(app, ["--namesrv", cluster.namesrv_addrs, "-o", "json",
                                     *args])
        assert result.exit_code == expect, (args, result.output, result.exception)
        return json.loads(result.stdout) if expect == 0 else {}

    def visible() -> list[bytes]:
        with PullConsumer(cluster.namesrv_addrs, consumer_group="cli-tx") as puller:
            return [m.body for m in
                    puller.pull(MessageQueue(TOPIC, "broker-a", 0), 0, 32).messages]

    assert tidemq("txn", "send", TOPIC, "now")["state"] == "COMMITTED"
    assert tidemq("txn", "send", TOPIC, "never", "--end", "rollback")["state"] == \
        "ROLLED_BACK"
    sent = tidemq("txn", "send", TOPIC, "later", "--end", "none")
    assert sent["state"] == "PENDING" and visible() == [b"now"]
    ids = [sent["msg_id"], sent["transaction_id"], sent["broker_name"]]
    assert tidemq("txn", "end", TOPIC, *ids, "commit") == {
        "state": "COMMITTED", "already_resolved": False}
    assert tidemq("txn", "end", TOPIC, *ids, "commit")["already_resolved"] is True
    tidemq("txn", "end", TOPIC, *ids, "rollback", expect=1)
    assert visible() == [b"now", b"later"]
