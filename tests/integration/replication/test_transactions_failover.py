"""Transactions across a master failover (real processes: a replica group of three with the
controller): the half and op records reach the slaves by the HA stream, so the promoted slave
replays them, takes the open transaction's end, and checks back the one left unresolved;
committed messages are visible exactly once, the rolled-back one never."""

from __future__ import annotations

import threading

import pytest
from tidemq.client import (
    Message,
    MessageQueue,
    PullConsumer,
    TransactionProducer,
    TransactionResolution,
)
from tidemq.common import errors

from tests.support.cluster import (
    create_topic_in_config_center,
    running_cluster,
    start_replica_group,
    wait_for_route,
)
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, PRODUCERS = "TxReplicated", "broker-r", "tx-failover"
COMMIT, ROLLBACK, UNKNOWN = (TransactionResolution.COMMIT, TransactionResolution.ROLLBACK,
                             TransactionResolution.UNKNOWN)
CHECK_FLAGS = ["--transaction-timeout-ms", "1000", "--transaction-check-interval-ms", "1000",
               "--transaction-check-max", "100"]


def visible(namesrv_addrs: str) -> list[bytes]:
    with PullConsumer(namesrv_addrs, consumer_group="tx-failover-reader") as puller:
        return sorted(m.body for q in range(2)
                      for m in puller.pull(MessageQueue(TOPIC, GROUP, q), 0, 64).messages)


def once_reachable(call):
    result = []

    def attempt():
        try:
            result.append(call())
        except (errors.ServiceUnavailable, errors.DeadlineExceeded, errors.PreconditionFailed):
            return False  # no master yet, or the old one's address
        return True

    wait_until(attempt, 60, interval=0.5, message="the new master taking the end")
    return result[0]


def test_transactions_continue_on_the_promoted_slave(tmp_path):
    with running_cluster(tmp_path, broker_names=(), controller=True) as cluster:
        group = start_replica_group(cluster.start, cluster, GROUP, extra=CHECK_FLAGS)
        create_topic_in_config_center(cluster, TOPIC, 2)
        wait_for_route(cluster, TOPIC, 1)
        old = group.wait_master()
        failed_over = threading.Event()

        def check_listener(message):
            return COMMIT if failed_over.is_set() and message.body == b"checked" else UNKNOWN

        with TransactionProducer(cluster.namesrv_addrs, producer_group=PRODUCERS,
                                 check_listener=check_listener,
                                 check_topics=[TOPIC]) as producer:
            producer.send_in_transaction(Message(TOPIC, b"committed"), lambda m, a: COMMIT)
            rolled_back = producer.send_in_transaction(Message(TOPIC, b"rolled-back"),
                                                       lambda m, a: ROLLBACK)
            producer.prepare(Message(TOPIC, b"checked"))
            later = producer.prepare(Message(TOPIC, b"ended-after-failover"))
            assert visible(cluster.namesrv_addrs) == [b"committed"]

            group.replicas[old].kill()          # SIGKILL the master
            new = group.wait_master(alive=tuple(r for r in range(3) if r != old))
            assert new != old
            failed_over.set()

            ended = once_reachable(lambda: producer.end(later, COMMIT))
            assert ended.state == "COMMITTED"
            with pytest.raises(errors.PreconditionFailed) as conflict:
                producer.end(rolled_back.send_result, COMMIT)
            assert conflict.value.code == "TRANSACTION_ALREADY_RESOLVED"
            expected = [b"checked", b"committed", b"ended-after-failover"]
            wait_until(lambda: visible(cluster.namesrv_addrs) == expected, 60, interval=0.5,
                       message="the check-back on the new master committing the open one")
        assert visible(cluster.namesrv_addrs) == expected
