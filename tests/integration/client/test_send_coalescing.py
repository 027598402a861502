"""Asynchronous sends against real brokers (tidemq.client.send_batching): a topic keeps one
batch on the wire per broker group, so what is sent meanwhile leaves in bigger batches, and a
broker group that hangs (SIGSTOP) holds only its own batch while the other group takes the
rest."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from concurrent.futures import Future, wait

import pytest
from tidemq.client import Message, Producer, SendStatus

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

WINDOW = 64  # sends in flight, as bench/rocketmq_compat runs them


class RecordingProducer(Producer):
    """Notes each coalesced batch: the group it went to and how many were on the wire."""

    def __init__(self, *args, **kwargs) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[str, list[bytes]]] = []
        self.on_wire: Counter[str] = Counter()
        self.most_on_wire: Counter[str] = Counter()
        super().__init__(*args, **kwargs)

    def _send_coalesced(self, messages, broker_name):
        with self.lock:
            self.batches.append((broker_name, [m.body for m in messages]))
            self.on_wire[broker_name] += 1
            self.most_on_wire[broker_name] = max(self.most_on_wire[broker_name],
                                                 self.on_wire[broker_name])
        try:
            return super()._send_coalesced(messages, broker_name)
        finally:
            with self.lock:
                self.on_wire[broker_name] -= 1


def send_window(producer: Producer, topic: str, count: int, prefix: str) -> list[Future]:
    """`count` async sends with WINDOW of them unanswered at all times."""
    slots = threading.Semaphore(WINDOW)
    futures = []
    for i in range(count):
        slots.acquire()
        future = producer.send_async(Message(topic, f"{prefix}-{i}".encode()))
        future.add_done_callback(lambda _: slots.release())
        futures.append(future)
    return futures


def test_one_group_has_one_batch_on_the_wire_and_the_rest_leaves_together(
        shared_one_broker_cluster):
    topic = "CoalesceOneGroup"
    create_topic_in_config_center(shared_one_broker_cluster, topic, 4)
    wait_for_route(shared_one_broker_cluster, topic, 1)
    with RecordingProducer(shared_one_broker_cluster.namesrv_addrs) as producer:
        producer.send(Message(topic, b"warm"))  # the route is known: every batch has a group
        futures = send_window(producer, topic, 1000, "one")
        done, _ = wait(futures, timeout=60)
    assert len(done) == 1000
    results = [f.result() for f in futures]
    assert all(r.status == SendStatus.SEND_OK for r in results)
    assert len({r.unique_id for r in results}) == 1000
    assert len({(r.queue_id, r.queue_offset) for r in results}) == 1000
    assert producer.most_on_wire == {"broker-a": 1}  # never a full batch waiting: 64 < 256
    assert len(producer.batches) < 1000
    assert sorted(body for _, batch in producer.batches for body in batch) == sorted(
        f"one-{i}".encode() for i in range(1000))


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory):
    """Its own cluster: a broker is frozen here, which must not stall other modules."""
    with running_cluster(tmp_path_factory.mktemp("coalesce")) as cluster:
        create_topic_in_config_center(cluster, "CoalesceHung", 4)
        wait_for_route(cluster, "CoalesceHung", 2)
        yield cluster


def test_a_hung_group_holds_only_its_own_batch(two_groups):
    """Waves of sends while broker-a is stopped: broker-b answers all but the batch already
    on broker-a (with 4 calls per group, broker-a would soon hold every call)."""
    topic = "CoalesceHung"
    frozen = two_groups.brokers["broker-a"]
    # The frozen call waits for its answer, not for the send timeout, within this test; no
    # fault avoidance, so a slow warm-up on a loaded machine cannot take broker-a out of turn.
    with RecordingProducer(two_groups.namesrv_addrs, send_timeout=120,
                           fault_avoidance=False) as producer:
        producer.send(Message(topic, b"warm"))
        sends: dict[bytes, Future] = {}

        def all_but_broker_a_answered() -> bool:
            with producer.lock:
                on_a = {body for group, batch in producer.batches if group == "broker-a"
                        for body in batch}
            return all(f.done() for body, f in sends.items() if body not in on_a)

        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            for wave in range(6):
                for i in range(20):
                    body = f"hung-{wave}-{i}".encode()
                    sends[body] = producer.send_async(Message(topic, body))
                wait_until(all_but_broker_a_answered, 60,
                           message=f"wave {wave} answered without broker-a")
            on_a = [body for group, batch in producer.batches if group == "broker-a"
                    for body in batch]
            assert producer.most_on_wire["broker-a"] == 1
            assert on_a and not any(sends[body].done() for body in on_a)
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        done, _ = wait(sends.values(), timeout=120)
    assert len(done) == len(sends)
    results = {body: f.result() for body, f in sends.items()}
    assert all(r.status == SendStatus.SEND_OK for r in results.values())
    assert {results[body].broker_name for body in on_a} == {"broker-a"}
