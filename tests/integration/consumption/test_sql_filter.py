"""SQL92 subscriptions with real processes over a broker SIGKILL and restart: pull, push,
orderly push and pop consumers each receive exactly the messages whose properties match, none
other; a bad filter is INVALID_FILTER from the broker itself, and a broker started with
enable_property_filter=false refuses SQL subscriptions with FILTER_DISABLED."""

from __future__ import annotations

import threading

import pytest
from tidemq.client import Message, MessageQueue, Producer, PullConsumer, SimpleConsumer
from tidemq.client.group import DirectClient
from tidemq.client.message import PullStatus
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer
from tidemq.common import errors
from tidemq.v1 import broker_pb2

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "SqlOrders"
SQL = "(amount BETWEEN 20 AND 70 AND region IN ('eu', 'apac')) OR vip IS NOT NULL"
ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
       "TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "300"}
REGIONS = ["eu", "us", "apac", None]


def order(i: int) -> tuple[bytes, dict[str, str]]:
    props = {"amount": str((i * 37) % 100)}
    if REGIONS[i % 4] is not None:
        props["region"] = REGIONS[i % 4]
    if i % 7 == 0:
        props["vip"] = "yes"
    return f"order-{i}".encode(), props


def wanted(props: dict[str, str]) -> bool:
    """The filter written out in Python, independently of the parser."""
    return (20 <= int(props["amount"]) <= 70 and props.get("region") in ("eu", "apac")
            ) or "vip" in props


class Collected:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []

    def add(self, bodies) -> None:
        with self.lock:
            self.bodies.extend(bodies)

    def distinct(self) -> set[bytes]:
        with self.lock:
            return set(self.bodies)


def push_consumer(cluster, group: str, collected: Collected, **options) -> PushConsumer:
    def listener(messages):
        collected.add(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS
    return PushConsumer(cluster.namesrv_addrs, group, {TOPIC: SQL}, listener,
                        expression_type="SQL92", consume_from=ConsumeFrom.FIRST,
                        session_timeout_ms=3000, heartbeat_interval_ms=300, long_poll_s=1.0,
                        auto_commit_interval_s=0.2, **options).start()


def pull_all(puller: PullConsumer, positions: dict[MessageQueue, int]) -> list[bytes]:
    """Pull every queue to its end with the SQL filter, moving `positions` on."""
    bodies = []
    for mq in positions:
        while True:
            result = puller.pull(mq, positions[mq], 16, tag_expression=SQL,
                                 expression_type="SQL92")
            bodies += [m.body for m in result.messages]
            if result.next_offset == positions[mq]:
                break
            positions[mq] = result.next_offset
            if result.status is PullStatus.NO_NEW_MSG:
                break
    return bodies


def send_all(cluster, items) -> None:
    """Send each message, retrying while the restarted broker's address reconnects."""
    with Producer(cluster.namesrv_addrs) as producer:
        for body, props in items:
            def sent(body=body, props=props) -> bool:
                try:
                    producer.send(Message(TOPIC, body, properties=props))
                except errors.ServiceUnavailable:
                    return False
                return True
            wait_until(sent, 30, interval=0.2, message="a send after the restart")


def pop_all(consumer: SimpleConsumer, popped: Collected) -> None:
    for received in consumer.receive(32, wait_s=0.5):
        popped.add([received.body])
        consumer.ack(received)


def test_sql_subscriptions_receive_exactly_the_matches_across_a_restart(tmp_path):
    with running_cluster(tmp_path, env=ENV, broker_names=("broker-a",)) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        messages = [order(i) for i in range(160)]
        body_props = dict(messages)
        expected = {body for body, props in messages if wanted(props)}
        assert 0 < len(expected) < len(messages)

        pushed, orderly, popped = Collected(), Collected(), Collected()
        consumers = [push_consumer(cluster, "g-sql-push", pushed),
                     push_consumer(cluster, "g-sql-orderly", orderly, orderly=True)]
        popper = SimpleConsumer(cluster.namesrv_addrs, "g-sql-pop", TOPIC, tag_expression=SQL,
                                expression_type="SQL92", timeout=10)
        puller = PullConsumer(cluster.namesrv_addrs, consumer_group="g-sql-pull", timeout=10)
        try:
            positions = {mq: 0 for mq in puller.fetch_queues(TOPIC)}
            send_all(cluster, messages[:80])
            first_half = {b for b in expected if int(b.split(b"-")[1]) < 80}
            pulled = pull_all(puller, positions)
            assert sorted(pulled) == sorted(first_half)
            wait_until(lambda: (pop_all(popper, popped), popped.distinct() == first_half)[1],
                       60, message="the first half's matches popped")

            broker.kill()   # SIGKILL mid-stream: filters are per request, state in the log
            broker.restart()

            send_all(cluster, messages[80:])
            def popped_all() -> bool:
                try:
                    pop_all(popper, popped)
                except errors.ServiceUnavailable:
                    return False
                return popped.distinct() == expected
            wait_until(popped_all, 90, interval=0.2, message="every match popped")

            def pulled_rest() -> bool:
                try:
                    pulled.extend(pull_all(puller, positions))
                except errors.ServiceUnavailable:
                    return False
                return set(pulled) == expected
            wait_until(pulled_rest, 60, message="every match pulled")
            assert sorted(pulled) == sorted(expected), "pull: each match exactly once"
            for collected, name in ((pushed, "push"), (orderly, "orderly push")):
                wait_until(lambda c=collected: c.distinct() >= expected, 90, interval=0.2,
                           message=f"every match consumed by the {name} consumer")
            for collected in (pushed, orderly, popped):
                extra = collected.distinct() - expected
                assert not extra, f"non-matching messages delivered: {sorted(extra)[:5]}"
                assert all(wanted(body_props[b]) for b in collected.bodies)
        finally:
            for consumer in consumers:
                consumer.shutdown()
            popper.close()
            puller.close()

        # The broker itself refuses a bad filter (the SDK checks first, so call it directly).
        request = broker_pb2.PullRequest(consumer_group="raw", topic=TOPIC, queue_id=0,
                                         tag_expression="amount >", expression_type="SQL92")
        with pytest.raises(errors.InvalidArgument) as bad:
            DirectClient(broker.addr).call("Pull", request)
        assert bad.value.code == "INVALID_FILTER" and "position 8" in bad.value.message


def test_a_broker_with_property_filters_disabled_refuses_sql(tmp_path):
    env = {"TIDEMQ_ENABLE_PROPERTY_FILTER": "false"}
    with running_cluster(tmp_path, env=env, broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 1)
        with Producer(cluster.namesrv_addrs) as producer:
            producer.send(Message(TOPIC, b"x", properties={"amount": "50"}))
        mq = MessageQueue(TOPIC, "broker-a", 0)
        with PullConsumer(cluster.namesrv_addrs, consumer_group="g-off") as puller:
            with pytest.raises(errors.PreconditionFailed) as pulled:
                puller.pull(mq, 0, 8, tag_expression="amount > 5", expression_type="SQL92")
            assert pulled.value.code == "FILTER_DISABLED"
            assert [m.body for m in puller.pull(mq, 0, 8).messages] == [b"x"]   # tags still work
        with SimpleConsumer(cluster.namesrv_addrs, "g-off-pop", TOPIC,
                            tag_expression="amount > 5", expression_type="SQL92") as popper:
            with pytest.raises(errors.PreconditionFailed) as popped:
                popper.receive(8)
            assert popped.value.code == "FILTER_DISABLED"
