"""Transactional messages with real processes, over a broker SIGKILL and restart in the middle:
committed transactions become visible exactly once, rolled-back ones never do, and unresolved
ones are checked back with a live producer of the same group (another client than the one that
prepared them) and resolved as it answers. Short check timings via the broker's settings."""

from __future__ import annotations

import threading
import zlib

import pytest
import requests
from tidemq.client import (
    Message,
    MessageQueue,
    PullConsumer,
    TransactionProducer,
    TransactionResolution,
)
from tidemq.common import errors

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "TxOrders", "tx-orders"
COMMIT, ROLLBACK, UNKNOWN = (TransactionResolution.COMMIT, TransactionResolution.ROLLBACK,
                             TransactionResolution.UNKNOWN)
# First check-back 1 s after the half message, then every 1 s; never discarded in this test.
CHECK_ENV = {"TIDEMQ_TRANSACTION_TIMEOUT_MS": "1000",
             "TIDEMQ_TRANSACTION_CHECK_INTERVAL_MS": "1000",
             "TIDEMQ_TRANSACTION_CHECK_MAX": "100"}


def visible_bodies(namesrv_addrs: str) -> list[bytes]:
    with PullConsumer(namesrv_addrs, consumer_group="tx-reader") as puller:
        bodies = []
        for q in range(2):
            result = puller.pull(MessageQueue(TOPIC, "broker-a", q), 0, 64)
            bodies += [m.body for m in result.messages]
            # transaction bookkeeping travels as system properties, not the sender's own
            assert all(m.user_properties == {} for m in result.messages)
        return sorted(bodies)


def once_reachable(call):
    """The result of `call` once the restarted broker answers it (transport errors retried)."""
    result = []

    def attempt():
        try:
            result.append(call())
        except errors.ServiceUnavailable:
            return False
        return True

    wait_until(attempt, 30, interval=0.5, message="the restarted broker reachable")
    return result[0]


def test_transactions_survive_a_broker_kill_and_are_checked_back(tmp_path):
    with running_cluster(tmp_path, broker_names=("broker-a",), env=CHECK_ENV) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        restarted = threading.Event()
        checked: dict[bytes, int] = {}
        answers = {b"checked-commit": COMMIT, b"checked-rollback": ROLLBACK}

        def check_listener(message):
            assert message.topic == TOPIC
            checked[message.body] = checked.get(message.body, 0) + 1
            # before the restart nothing is decided: the broker must keep asking after it
            return answers.get(message.body, UNKNOWN) if restarted.is_set() else UNKNOWN

        with TransactionProducer(cluster.namesrv_addrs, producer_group=GROUP,
                                 check_listener=check_listener, check_topics=[TOPIC]) as checker, \
                TransactionProducer(cluster.namesrv_addrs, producer_group=GROUP) as producer:
            committed = producer.send_in_transaction(
                Message(TOPIC, b"committed", message_group="g-1"), lambda m, arg: arg,
                arg=COMMIT)
            rolled_back = producer.send_in_transaction(
                Message(TOPIC, b"rolled-back"), lambda m, arg: ROLLBACK)
            producer.send_in_transaction(Message(TOPIC, b"checked-commit"),
                                         lambda m, arg: UNKNOWN)
            to_roll_back = producer.prepare(Message(TOPIC, b"checked-rollback"))
            later = producer.prepare(Message(TOPIC, b"committed-after-restart"))
            assert visible_bodies(cluster.namesrv_addrs) == [b"committed"]
            assert committed.send_result.queue_id == zlib.crc32(b"g-1") % 2  # its group's queue

            again = producer.end(committed.send_result, COMMIT)
            assert (again.state, again.already_resolved) == ("COMMITTED", True)
            with pytest.raises(errors.PreconditionFailed) as conflict:
                producer.end(rolled_back.send_result, COMMIT)
            assert conflict.value.code == "TRANSACTION_ALREADY_RESOLVED"
            wait_until(lambda: checked.get(b"checked-rollback", 0) >= 1, 30,
                       message="a check-back before the restart")

            broker.kill()   # SIGKILL: the open transactions must come back from the log
            broker.restart()
            restarted.set()

            # the client's breaker may be open from calls made while the broker was down
            assert once_reachable(lambda: producer.end(later, COMMIT)).state == "COMMITTED"
            forged = type(later)(later.status, later.msg_id, "NO-SUCH-TRANSACTION",
                                 later.broker_name, later.queue_id, later.queue_offset)
            with pytest.raises(errors.NotFound) as unknown:
                producer.end(forged, COMMIT)
            assert unknown.value.code == "TRANSACTION_NOT_FOUND"

            expected = [b"checked-commit", b"committed", b"committed-after-restart"]
            wait_until(lambda: visible_bodies(cluster.namesrv_addrs) == expected, 60,
                       interval=0.3, message="the checked-back commit visible")
            wait_until(lambda: checker.end(to_roll_back, UNKNOWN).state == "ROLLED_BACK", 30,
                       interval=0.3, message="the checked-back rollback")
            assert checked[b"checked-rollback"] >= 2  # asked before and after the restart
        assert visible_bodies(cluster.namesrv_addrs) == expected  # exactly once, nothing else
        scraped = requests.get(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).text
        assert 'tidemq_broker_transactions_total{event="committed"} 2.0' in scraped  # since restart
        assert 'tidemq_broker_transactions_total{event="rolled_back"} 1.0' in scraped
        assert "tidemq_broker_open_transactions 0.0" in scraped
