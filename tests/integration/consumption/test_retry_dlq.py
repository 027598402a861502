"""Retries and dead letters with real processes, over a broker SIGKILL and restart: a failing
consumer sees its message again through %RETRY%{group} with growing reconsume_times, then
finds it in %DLQ%{group}; a re-drive brings it back to the original topic."""

from __future__ import annotations

import threading

import pytest
from tidemq.client import DeadLetters, Message, Producer
from tidemq.client.group import DirectClient
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.groups import SubscriptionGroups
from tidemq.v1 import broker_pb2

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, MAX_TIMES = "RetryOrders", "g-dlq", 3
ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
       "TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "300",
       "TIDEMQ_MESSAGE_DELAY_LEVEL": " ".join(["300ms"] * 18)}  # retries wait 300 ms


def group_defined(broker, group: str) -> bool:
    reply = DirectClient(broker.addr).call(
        "GetSubscriptionGroups", broker_pb2.GetSubscriptionGroupsRequest(groups=[group]))
    return reply.groups[0].defined and reply.groups[0].retry_max_times == MAX_TIMES


def test_failing_message_retries_then_dies_and_is_redriven(tmp_path):
    with running_cluster(tmp_path, env=ENV, broker_names=("broker-a",)) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, 2)
        with ConfigClient(cluster.config_center.addr) as config:
            SubscriptionGroups(config).create(GROUP, retry_max_times=MAX_TIMES)
        wait_for_route(cluster, TOPIC, 1)
        wait_until(lambda: group_defined(broker, GROUP), 20, message="the group definition")

        lock, healed = threading.Lock(), threading.Event()
        bad: list[tuple[int, str, str]] = []  # (reconsume_times, topic, origin topic)
        good: set[bytes] = set()
        first_ids: list[str] = []

        def listener(messages):
            (m,) = messages
            with lock:
                if m.body != b"bad":
                    good.add(m.body)
                    return ConsumeStatus.CONSUME_SUCCESS
                if not first_ids:
                    first_ids.append(m.msg_id)
                bad.append((m.reconsume_times, m.topic, m.origin_topic))
            if healed.is_set():
                return ConsumeStatus.CONSUME_SUCCESS
            raise RuntimeError("the listener fails on this message")

        def times() -> set[int]:
            with lock:
                return {t for t, _, _ in bad}

        consumer = PushConsumer(cluster.namesrv_addrs, GROUP, TOPIC, listener,
                                consume_from=ConsumeFrom.FIRST, session_timeout_ms=3000,
                                heartbeat_interval_ms=300, long_poll_s=1.0,
                                auto_commit_interval_s=0.2, reconsume_backoff_s=0.2).start()
        try:
            with Producer(cluster.namesrv_addrs) as producer:
                producer.send(Message(TOPIC, b"bad"))
                for i in range(10):
                    producer.send(Message(TOPIC, f"good-{i}".encode()))
            wait_until(lambda: {0, 1} <= times(), 60, message="a first redelivery")

            broker.kill()   # SIGKILL in the middle of the retries
            broker.restart()

            with DeadLetters(cluster.namesrv_addrs, GROUP) as dlq:
                wait_until(lambda: dlq.list(), 90, interval=0.2,
                           message="the message in the dead-letter queue")
                # At-least-once: a send-back the restart interrupted may have made a second
                # copy, so there may be more than one dead letter, all of this message.
                dead_letters = dlq.list()
                assert times() == {0, 1, 2, 3}  # MAX_TIMES redeliveries, never a fourth
                with lock:
                    assert all(origin == TOPIC for _, _, origin in bad)
                    assert {topic for t, topic, _ in bad if t > 0} == {f"%RETRY%{GROUP}"}
                for dead in dead_letters:
                    assert dead.reconsume_times == MAX_TIMES + 1
                    assert dead.origin_topic == TOPIC and dead.body == b"bad"
                    assert dead.properties["ORIGIN_MESSAGE_ID"] == first_ids[0]
                    assert int(dead.properties["FIRST_FAILURE_MS"]) > 0
                assert good == {f"good-{i}".encode() for i in range(10)}

                healed.set()
                with lock:
                    bad.clear()
                redriven = dlq.requeue_all()
                assert redriven and {r.topic for r in redriven} == {TOPIC}
                wait_until(lambda: 0 in times(), 30, message="the re-driven message consumed")
                with lock:
                    assert (0, TOPIC, TOPIC) in bad
                assert all(m.msg_id not in {r.msg_id for r in redriven} for m in dlq.list())
                assert not {r.msg_id for r in dlq.requeue_all()} & {r.msg_id for r in redriven}
        finally:
            consumer.shutdown()
