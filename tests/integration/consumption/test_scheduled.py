"""Scheduled delivery with real processes, over a broker SIGKILL and restart in the middle:
10 000 messages with random delivery times (exact times over ~20 s, plus delay levels 1-3)
each come out on their real topic no earlier than due and within 1 s after (asserted with slack
for a loaded machine: ASSERTED_LATE_MS), none lost.

Delivery time = the store timestamp of the message on its real topic (stamped by the broker
when the timer moved it) minus its due time. Messages due while the broker was down (from the
kill until the restarted broker answers) cannot be on time: for them the bound is explicit —
stored within RESTART_CATCH_UP_S of the restart. A message may come out twice after the crash
(at least once): the first copy is the one measured. The seed is printed for a replay."""

from __future__ import annotations

import os
import random
import subprocess
import time

import pytest
from tidemq.client import Message, Producer
from tidemq.client.group import DirectClient
from tidemq.common import errors, record
from tidemq.v1 import broker_pb2

from tests.support.cli import TIDEMQ
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, QUEUES, COUNT = "Scheduled", 4, 10_000
LATE_MS = 1000             # the timer's promise: visible within 1 s of the due time
# What the test asserts of the messages due while the broker was up. The promise itself is
# measured by bench/schedule; on a 2-core CI machine at a load average of 47, correct code
# stored some 1.05-1.18 s after due (the timer thread not scheduled in time). 3 s still fails
# a message held for a later pass of the timer (delays here are 1-20 s).
ASSERTED_LATE_MS = 3000
RESTART_CATCH_UP_S = 2.0   # what a message due during the downtime gets after the restart
LEVEL_MS = {1: 1000, 2: 5000, 3: 10_000}


def stored_copies(broker_addr: str, cursors: dict[int, int],
                  first_copy: dict[str, tuple[int, bytes]]) -> None:
    """Pull what is new on every queue; keep (store timestamp, body) of each first copy."""
    client = DirectClient(broker_addr)
    for queue_id in range(QUEUES):
        while True:
            reply = client.call("Pull", broker_pb2.PullRequest(
                consumer_group="g-check", topic=TOPIC, queue_id=queue_id,
                queue_offset=cursors[queue_id], max_messages=1000, max_bytes=8 << 20))
            if reply.status != broker_pb2.FOUND:
                break
            for rec in record.iter_records(reply.records):
                first_copy.setdefault(rec.unique_id, (rec.store_timestamp, bytes(rec.body)))
            cursors[queue_id] = reply.next_begin_offset


def test_ten_thousand_delayed_messages_come_out_on_time_over_a_broker_crash(tmp_path):
    seed = int(os.environ.get("SCHEDULE_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (SCHEDULE_SEED={seed} replays it)")
    rng = random.Random(seed)
    with running_cluster(tmp_path, broker_names=("broker-a",)) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, QUEUES)
        wait_for_route(cluster, TOPIC, 1)
        due: dict[str, tuple[int, int]] = {}   # unique id -> (earliest, latest) due time
        with Producer(cluster.namesrv_addrs) as producer:
            for start in range(0, COUNT, 500):
                now = int(time.time() * 1000)
                batch = []
                for i in range(start, start + 500):
                    level = rng.choice((1, 2, 3)) if i % 10 == 0 else 0
                    at = 0 if level else now + rng.randrange(1500, 20_000)
                    batch.append(Message(TOPIC, f"m{i}".encode(), delay_level=level,
                                         deliver_at_ms=at))
                results = producer.send_many(batch)
                sent = int(time.time() * 1000)
                for message, result in zip(batch, results, strict=True):
                    if message.delay_level:   # due = its store time (unseen) + the level
                        span = (now + LEVEL_MS[message.delay_level],
                                sent + LEVEL_MS[message.delay_level])
                    else:
                        span = (message.deliver_at_ms, message.deliver_at_ms)
                    due[result.unique_id] = span

            cursors, first_copy = dict.fromkeys(range(QUEUES), 0), {}

            def delivered(at_least: int) -> bool:
                stored_copies(broker.addr, cursors, first_copy)
                return len(first_copy) >= at_least

            wait_until(lambda: delivered(COUNT // 3), 60, interval=0.2,
                       message="a third of the messages delivered before the crash")
            killed_at = int(time.time() * 1000)
            broker.kill()   # SIGKILL in the middle: the timer's progress is what was persisted
            broker.restart()
            restarted_at = int(time.time() * 1000)

            def all_delivered() -> bool:
                try:
                    return delivered(COUNT)
                except errors.TideMQError:
                    return False
            wait_until(all_delivered, 60, interval=0.2, message="every message delivered")

        early, late, slow_after_restart = [], [], []
        for unique_id, (earliest, latest) in due.items():
            stored_at, _ = first_copy[unique_id]
            if stored_at < earliest:
                early.append((unique_id, earliest - stored_at))
            elif killed_at - LATE_MS <= latest <= restarted_at:  # due while it was down
                if stored_at > restarted_at + RESTART_CATCH_UP_S * 1000:
                    slow_after_restart.append((unique_id, stored_at - restarted_at))
            elif stored_at > latest + ASSERTED_LATE_MS:
                late.append((unique_id, stored_at - latest))
        on_time = sorted(first_copy[u][0] - latest for u, (_, latest) in due.items()
                         if not killed_at - LATE_MS <= latest <= restarted_at)
        print(f"lateness of the on-time messages: median {on_time[len(on_time) // 2]} ms, "
              f"p99 {on_time[len(on_time) * 99 // 100]} ms, max {on_time[-1]} ms")
        down = sum(killed_at - LATE_MS <= latest <= restarted_at for _, latest in due.values())
        print(f"{down} messages were due during the {restarted_at - killed_at} ms restart")
        assert not early, f"{len(early)} delivered before due (ms early): {early[:5]}"
        assert not late, f"{len(late)} delivered more than 3 s late (ms): {late[:5]}"
        assert not slow_after_restart, f"due during the restart, slow: {slow_after_restart[:5]}"
        assert set(first_copy) >= set(due)   # none lost


def test_cli_sends_a_delayed_message_that_stays_invisible_until_due(shared_one_broker_cluster):
    cluster = shared_one_broker_cluster  # tests/conftest.py: no other sharer uses this topic
    broker = cluster.brokers["broker-a"]
    create_topic_in_config_center(cluster, TOPIC, 1)
    wait_for_route(cluster, TOPIC, 1)
    before = int(time.time() * 1000)
    done = subprocess.run([TIDEMQ, "--namesrv", cluster.namesrv_addrs, "send", TOPIC,
                           "later", "--delay", "2s", "--output", "json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cursors, first_copy = {0: 0}, {}

    def arrived() -> bool:
        stored_copies_one(broker.addr, cursors, first_copy)
        return bool(first_copy)
    wait_until(arrived, 30, interval=0.1, message="the delayed message")
    ((stored_at, body),) = first_copy.values()
    assert body == b"later" and stored_at >= before + 2000
    bad = subprocess.run([TIDEMQ, "--namesrv", cluster.namesrv_addrs, "send", TOPIC, "x",
                          "--delay-level", "19"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode != 0 and "INVALID_DELAY" in bad.stdout + bad.stderr


def stored_copies_one(broker_addr: str, cursors: dict[int, int], first_copy: dict) -> None:
    client = DirectClient(broker_addr)
    reply = client.call("Pull", broker_pb2.PullRequest(
        consumer_group="g-check", topic=TOPIC, queue_id=0, queue_offset=cursors[0],
        max_messages=10))
    if reply.status == broker_pb2.FOUND:
        for rec in record.iter_records(reply.records):
            first_copy.setdefault(rec.unique_id, (rec.store_timestamp, bytes(rec.body)))
        cursors[0] = reply.next_begin_offset
