"""Pop consumption with real processes over a broker SIGKILL and restart: a popped, unacked
message reappears after its invisible time with delivery_count 2, an acked one never does, and
an offset consumer of another group reads the same topic untouched. The broker snapshots its
pop state every 200 ms here, so the restart replays from a snapshot."""

from __future__ import annotations

import re

import pytest
from tidemq.client import Message, MessageQueue, Producer, PullConsumer, SimpleConsumer
from tidemq.common import errors

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.pop import pop_until
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "PopOrders", "g-pop"


def test_unacked_reappears_after_restart_and_acked_never_does(tmp_path):
    with running_cluster(tmp_path, broker_names=("broker-a",),
                         env={"TIDEMQ_POP_SNAPSHOT_INTERVAL_MS": "200",
                              "TIDEMQ_OFFSET_FLUSH_INTERVAL_S": "0.2"}) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        with Producer(cluster.namesrv_addrs) as producer:
            for i in range(6):
                producer.send(Message(TOPIC, f"p-{i}".encode()))

        consumer = SimpleConsumer(cluster.namesrv_addrs, GROUP, TOPIC, timeout=10)
        first = pop_until(consumer, 6, invisible_s=3, max_messages=16)
        assert len(first) == 6
        assert all(r.delivery_count == 1 for r in first.values())
        acked = {f"p-{i}".encode() for i in range(3)}
        for body in acked:
            consumer.ack(first[body])

        offsets = broker.workdir / "data" / "consumer_offsets.json"
        wait_until(lambda: offsets.exists() and "CID_SYS_RMQ_POP_SNAPSHOT" in offsets.read_text(),
                   30, interval=0.1, message="a pop snapshot's offset persisted")
        broker.kill()   # SIGKILL: the pop state must come back from the revive log
        broker.restart()
        replays = re.findall(r"pop state replayed.*from_snapshot=(-?\d+)", broker.log.read_text())
        assert replays and int(replays[-1]) >= 0, "the restart did not start from a snapshot"

        again: dict[bytes, object] = {}

        def redelivered():
            for received in consumer.receive(16, invisible_duration_s=30, wait_s=1):
                assert received.body not in acked, "an acked message was delivered again"
                again[received.body] = received
            return len(again) == 3

        wait_until(redelivered, 60, interval=0.2, message="the unacked messages redelivered")
        assert set(again) == {f"p-{i}".encode() for i in range(3, 6)}
        assert all(r.delivery_count == 2 for r in again.values())
        with pytest.raises(errors.PreconditionFailed) as expired:
            consumer.ack(first[b"p-4"])  # its invisible time ran out: the old handle is dead
        assert expired.value.code == "RECEIPT_HANDLE_EXPIRED"
        for received in again.values():
            consumer.ack(received)
        assert consumer.receive(16, wait_s=0.5) == []

        with PullConsumer(cluster.namesrv_addrs, consumer_group="g-offsets") as puller:
            bodies = set()
            for q in range(2):
                result = puller.pull(MessageQueue(TOPIC, "broker-a", q), 0, 32)
                bodies.update(m.body for m in result.messages)
            assert bodies == {f"p-{i}".encode() for i in range(6)}
