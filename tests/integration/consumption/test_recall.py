"""Recalling scheduled messages with real processes (docs/scheduled.md "Recall"): a recalled
message is never delivered — also when the broker is SIGKILLed and restarted before it is due
— while one sent with it, not recalled, is; a recall after delivery, of a message that is not
waiting, or with text that is no handle gets its own code."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time

import pytest
from tidemq.client import Message, Producer
from tidemq.common import errors
from tidemq.common.recall import RecallHandle

from tests.integration.consumption.test_scheduled import stored_copies
from tests.support.cli import TIDEMQ
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "Scheduled"   # stored_copies reads its QUEUES queues
QUEUES = 4
DUE_IN_MS = 12_000    # past a SIGKILL and restart of the broker


def test_a_recalled_message_is_never_delivered_also_across_a_broker_restart(tmp_path):
    with running_cluster(tmp_path, broker_names=("broker-a",)) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, QUEUES)
        wait_for_route(cluster, TOPIC, 1)
        cursors, delivered = dict.fromkeys(range(QUEUES), 0), {}

        def bodies() -> set[bytes]:
            with contextlib.suppress(errors.TideMQError):   # restarting
                stored_copies(broker.addr, cursors, delivered)
            return {body for _, body in delivered.values()}

        with Producer(cluster.namesrv_addrs) as producer:
            due = int(time.time() * 1000) + DUE_IN_MS
            recalled = producer.send(Message(TOPIC, b"recalled", deliver_at_ms=due))
            kept = producer.send(Message(TOPIC, b"kept", deliver_at_ms=due))
            soon = producer.send(Message(TOPIC, b"soon", delay_level=1))
            plain = producer.send(Message(TOPIC, b"plain"))
            handle = recalled.recall_handle(TOPIC)
            assert producer.recall(handle) == due
            assert producer.recall(handle) == due   # again: the same answer

            wait_until(lambda: b"soon" in bodies(), 30, message="the 1 s message delivered")
            with pytest.raises(errors.PreconditionFailed) as late:
                producer.recall(soon.recall_handle(TOPIC))
            assert late.value.code == "MESSAGE_ALREADY_DELIVERED", late.value
            with pytest.raises(errors.NotFound) as plain_refused:
                producer.recall(plain.recall_handle(TOPIC))   # never scheduled
            assert plain_refused.value.code == "MESSAGE_NOT_FOUND"
            forged = RecallHandle(TOPIC, "broker-a", "0" * 32).encode()
            with pytest.raises(errors.NotFound):
                producer.recall(forged)
            for text in ("", "not a handle!", RecallHandle(TOPIC, "b", "u").encode()[:-3]):
                with pytest.raises(errors.InvalidArgument) as bad:
                    producer.recall(text)
                assert bad.value.code == "INVALID_RECALL_HANDLE", (text, bad.value)

            _recall_with_the_cli(cluster)

            broker.kill()      # the recall lives in the log, not in this process
            broker.restart()
            wait_until(lambda: b"kept" in bodies(), DUE_IN_MS / 1000 + 30,
                       message="the message sent with the recalled one delivered")
            assert b"recalled" not in bodies()
            assert kept.unique_id in delivered and recalled.unique_id not in delivered


def _recall_with_the_cli(cluster) -> None:
    """`tidemq send --delay` prints the handle; `tidemq message recall` takes it."""
    def tidemq(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([TIDEMQ, "--namesrv", cluster.namesrv_addrs, *argv],
                              capture_output=True, text=True, timeout=60)

    sent = tidemq("send", TOPIC, "by-cli", "--delay", "60s", "--output", "json")
    assert sent.returncode == 0, sent.stderr
    handle = json.loads(sent.stdout)[0]["recall_handle"]
    recalled = tidemq("message", "recall", handle, "--output", "json")
    assert recalled.returncode == 0, recalled.stderr
    assert json.loads(recalled.stdout)["recalled"] is True
    refused = tidemq("message", "recall", "not-a-handle")
    assert refused.returncode == 1 and "INVALID_RECALL_HANDLE" in refused.stderr, refused.stderr
