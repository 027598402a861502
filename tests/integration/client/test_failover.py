"""A producer keeps sending, with no caller-visible error, while a broker group is killed."""

from __future__ import annotations

from collections import Counter

import pytest
from tidemq.client import Message, MessageQueue, Producer, PullConsumer, PullStatus, SendStatus

from tests.support.cluster import (
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until

TOPIC = "FailoverTopic"
pytestmark = pytest.mark.slow  # its own five-process cluster (~15 s)


def test_sends_survive_a_killed_broker_group(tmp_path):
    with running_cluster(tmp_path) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 2)
        with Producer(cluster.namesrv_addrs, send_timeout=5.0) as producer:
            before = [producer.send(Message(TOPIC, f"before-{i}".encode()))
                      for i in range(40)]
            assert {r.broker_name for r in before} == {"broker-a", "broker-b"}

            cluster.brokers["broker-b"].kill()  # SIGKILL: the route still lists it

            after = [producer.send(Message(TOPIC, f"after-{i}".encode()))
                     for i in range(120)]
            batches = producer.send_many([Message(TOPIC, f"many-{i}".encode())
                                          for i in range(40)])
        assert all(r.status == SendStatus.SEND_OK for r in after + batches)
        assert {r.broker_name for r in after + batches} == {"broker-a"}

        # Every acknowledged message on the surviving group is readable exactly once.
        acked = Counter(r.unique_id for r in before + after + batches
                        if r.broker_name == "broker-a")
        # (Polled: the broker indexes acknowledged records asynchronously.)
        with PullConsumer(cluster.namesrv_addrs, consumer_group="failover") as consumer:
            def read_everything() -> Counter:
                seen = Counter()
                for queue_id in range(2):
                    mq = MessageQueue(TOPIC, "broker-a", queue_id)
                    offset = 0
                    while (result := consumer.pull(mq, offset, 64)).status == PullStatus.FOUND:
                        assert [m.queue_offset for m in result.messages] == list(
                            range(offset, result.next_offset))
                        seen.update(m.unique_id for m in result.messages)
                        offset = result.next_offset
                return seen

            wait_until(lambda: read_everything() == acked, 15, interval=0.05,
                       message="every acknowledged message on broker-a to be readable once")
