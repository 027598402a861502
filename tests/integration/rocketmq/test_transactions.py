"""Transactional sends of the official RocketMQ 5 Python client through gateway-grpc:
commit, rollback, and a half message left open that the broker checks back through the
client's Telemetry stream (its TransactionChecker decides)."""

from __future__ import annotations

import threading

import pytest
from rocketmq import Producer, TransactionChecker, TransactionResolution

from tests.integration.rocketmq.clients import drain, message, simple_consumer, started
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC = "RmqTxn"


class CommitUnlessRollbackKey(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list = []
        self.lock = threading.Lock()

    def check(self, checked):
        with self.lock:
            self.checked.append(checked)
        return (TransactionResolution.ROLLBACK if "rollback" in checked.keys
                else TransactionResolution.COMMIT)


def test_commit_rollback_and_check_back(config):
    checker = CommitUnlessRollbackKey()
    with started(Producer(config, (TOPIC,), checker)) as producer, \
            simple_consumer(config, "rmq-txn", TOPIC) as consumer:
        committed = producer.begin_transaction()
        producer.send(message(TOPIC, b"committed"), committed)
        committed.commit()
        rolled_back = producer.begin_transaction()
        producer.send(message(TOPIC, b"rolled-back"), rolled_back)
        rolled_back.rollback()
        # left open: the broker checks back; the checker commits one, rolls back the other
        producer.send(message(TOPIC, b"checked", keys="commit"), producer.begin_transaction())
        producer.send(message(TOPIC, b"checked-out", keys="rollback"),
                      producer.begin_transaction())
        got = drain(consumer, 2)
        wait_until(lambda: {m.body for m in checker.checked} >= {b"checked", b"checked-out"},
                   30, message="both open transactions checked back")
        # a later committed message arrives; nothing rolled back came before it
        last = producer.begin_transaction()
        producer.send(message(TOPIC, b"last"), last)
        last.commit()
        got += drain(consumer, 1)
    assert sorted(m.body for m in got) == [b"checked", b"committed", b"last"]
    assert {m.topic for m in checker.checked} == {TOPIC}
    assert b"committed" not in {m.body for m in checker.checked}
