"""PullConsumer reads from a slave while its group's master is unreachable or unregistered;
commits go to the master only (route and broker calls replaced by stand-ins)."""

from __future__ import annotations

import pytest
from tidemq.client import PullConsumer
from tidemq.client.message import MessageQueue
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors
from tidemq.v1 import broker_pb2

MASTER, SLAVE = "m:1", "s:1"
MQ = MessageQueue("t", "broker-a", 0)


class Routes:
    def __init__(self, addrs):
        self.route = TopicRoute("t", (QueueLayout("broker-a", 1, 1, 6),),
                                {"broker-a": BrokerGroup("c", "broker-a", addrs)})
        self.invalidations = 0

    def get(self, topic):
        return self.route

    def invalidate(self, topic):
        self.invalidations += 1


class Brokers:
    def __init__(self, down: set[str]) -> None:
        self.down = down
        self.calls: list[tuple[str, str]] = []

    def get(self, addr):
        brokers = self

        class Client:
            def call(self, method, request, timeout=None, idempotent=False):
                brokers.calls.append((addr, method))
                if addr in brokers.down:
                    raise errors.ServiceUnavailable("connection refused")
                if method == "QueryOffsets":
                    return broker_pb2.QueryOffsetsResponse(offsets=[
                        broker_pb2.QueueOffset(topic="t", queue_id=0, offset=42)])
                return broker_pb2.PullResponse(status=broker_pb2.NO_NEW_MSG,
                                               next_begin_offset=5, max_offset=5)

        return Client()


def consumer(addrs, down):
    c = PullConsumer("127.0.0.1:1", consumer_group="g")
    c.routes, c.brokers = Routes(addrs), Brokers(down)
    return c


def test_pull_and_committed_offsets_fall_back_to_a_slave_when_the_master_is_down():
    c = consumer({0: MASTER, 2: SLAVE}, down={MASTER})
    assert c.pull(MQ, 5).next_offset == 5
    assert c.committed(MQ) == 42
    assert c.brokers.calls == [(MASTER, "Pull"), (SLAVE, "Pull"),
                               (MASTER, "QueryOffsets"), (SLAVE, "QueryOffsets")]
    assert c.routes.invalidations == 2


def test_a_group_without_a_registered_master_is_read_from_its_slave():
    c = consumer({2: SLAVE}, down=set())
    c.pull(MQ, 0)
    assert c.brokers.calls == [(SLAVE, "Pull")]


def test_commits_go_to_the_master_only():
    c = consumer({2: SLAVE}, down=set())
    with pytest.raises(errors.ServiceUnavailable):
        c.commit(MQ, 3)
    assert c.brokers.calls == []


def test_every_replica_down_raises_the_last_failure():
    c = consumer({0: MASTER, 2: SLAVE}, down={MASTER, SLAVE})
    with pytest.raises(errors.ServiceUnavailable):
        c.pull(MQ, 0)
