"""Orderly push consumption with real processes: 20 keys sent in order through hash-selected
queues, 3 consumers in orderly mode with a rebalance in the middle (the third joins while
messages flow) and a broker SIGKILLed and restarted: each key is processed in send order, and
never by two threads at once. Queue locks exclude a second client, also across the restart."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from tidemq.client import Message, Producer, SelectByHash
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, KEYS, PER_KEY = "OrderlyTopic", "g-orderly", 20, 30
ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
       "TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "300"}


class Ledger:
    """What every consumer processed, per key, and whether a key was ever processed by two
    listener calls at the same time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, list[int]] = defaultdict(list)
        self.busy: set[str] = set()
        self.overlaps: list[str] = []
        self.fail_once = {("k-3", 5), ("k-11", 20)}  # a failure is retried in place

    def listener(self, messages):
        keys = {m.keys[0] for m in messages}
        with self.lock:
            self.overlaps.extend(keys & self.busy)
            self.busy |= keys
        try:
            time.sleep(0.002)  # the work the listener does (widens any overlap)
            with self.lock:
                for m in messages:
                    step = (m.keys[0], int(m.body))
                    if step in self.fail_once:
                        self.fail_once.discard(step)
                        return ConsumeStatus.RECONSUME_LATER
                for m in messages:
                    self.seen[m.keys[0]].append(int(m.body))
            return ConsumeStatus.CONSUME_SUCCESS
        finally:
            with self.lock:
                self.busy -= keys

    def done(self) -> bool:
        with self.lock:
            return all(set(self.seen[f"k-{k}"]) == set(range(PER_KEY)) for k in range(KEYS))


def send(producer, steps: range) -> None:
    for step in steps:
        for k in range(KEYS):
            key = f"k-{k}"
            producer.send(Message(TOPIC, str(step).encode(), keys=[key]),
                          selector=SelectByHash(), arg=key)


def test_orderly_keys_survive_a_rebalance(tmp_path):
    with running_cluster(tmp_path, env=ENV) as cluster:
        create_topic_in_config_center(cluster, TOPIC, 4)
        wait_for_route(cluster, TOPIC, 2)
        ledger = Ledger()

        def consumer() -> PushConsumer:
            return PushConsumer(cluster.namesrv_addrs, GROUP, TOPIC, ledger.listener,
                                orderly=True, consume_from=ConsumeFrom.FIRST,
                                session_timeout_ms=3000, heartbeat_interval_ms=300,
                                long_poll_s=1.0, auto_commit_interval_s=0.5,
                                suspend_s=0.05).start()

        consumers = [consumer(), consumer()]
        try:
            with Producer(cluster.namesrv_addrs) as producer:
                send(producer, range(0, PER_KEY // 2))
                wait_until(lambda: sum(map(len, ledger.seen.values())) >= 100, 60,
                           message="consumption to start")
                consumers.append(consumer())  # the rebalance, while messages flow
                send(producer, range(PER_KEY // 2, PER_KEY))
            broker = cluster.brokers["broker-a"]
            broker.kill()  # SIGKILL while consuming: locks are config-center leases
            broker.restart()
            wait_until(ledger.done, 120, interval=0.1, message="every key consumed")
            assert all(c.member.wait_stable(30) for c in consumers)
            assert sum(1 for c in consumers if c.assigned_queues()) == 3  # all three own some
        finally:
            for c in consumers:
                c.shutdown()

        assert ledger.overlaps == [], f"keys processed concurrently: {ledger.overlaps}"
        for k in range(KEYS):
            steps = ledger.seen[f"k-{k}"]
            # In send order: each step is the next one, or a replay of an earlier one after a
            # handover (at least once), never a skip ahead.
            high = -1
            for step in steps:
                assert step <= high + 1, f"k-{k} jumped to {step} after {high}: {steps}"
                high = max(high, step)
            assert high == PER_KEY - 1


def test_queue_locks_exclude_other_clients_across_a_restart(tmp_path):
    from tidemq.client.group import DirectClient
    from tidemq.v1 import broker_pb2

    with running_cluster(tmp_path, env=ENV, broker_names=("broker-a",)) as cluster:
        create_topic_in_config_center(cluster, "LockTopic", 2)
        wait_for_route(cluster, "LockTopic", 1)
        broker = cluster.brokers["broker-a"]
        queues = [broker_pb2.LockedQueue(topic="LockTopic", queue_id=0)]

        def lock(client: str) -> bool:
            reply = DirectClient(broker.addr, timeout=10).call(
                "LockQueues", broker_pb2.LockQueuesRequest(
                    consumer_group=GROUP, client_id=client, queues=queues))
            return [q.queue_id for q in reply.locked] == [0]

        assert lock("a") and lock("a")  # a renewal is a lock
        assert not lock("b")
        broker.kill()
        broker.restart()
        assert not lock("b")   # the lock outlived the broker process
        assert lock("a")
        DirectClient(broker.addr, timeout=10).call("UnlockQueues", broker_pb2.UnlockQueuesRequest(
            consumer_group=GROUP, client_id="a", queues=queues))
        assert lock("b")
