"""Consumer groups end to end: real redis, config-center, name servers, two brokers, and
PushConsumers in their own processes (SIGKILL is real). Session timeouts are shrunk through
the broker's group settings so the whole module runs in about a minute."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tidemq.client import Message, Producer
from tidemq.client.group import DirectClient
from tidemq.common.errors import TideMQError
from tidemq.common.placement import coordinator_for
from tidemq.common.protocol import decode_assignment, encode_subscription
from tidemq.v1 import broker_pb2

from tests.support.cluster import (
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until

SESSION_MS, HEARTBEAT_MS = 3000, 500
BROKER_ENV = {"TIDEMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
              "TIDEMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",
              "TIDEMQ_MESSAGE_DELAY_LEVEL": " ".join(["200ms"] * 18)}  # retries: 200 ms
MEMBER = Path(__file__).with_name("member_main.py")
ALL_QUEUES = {(b, q) for b in ("broker-a", "broker-b") for q in range(4)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("groups"), env=BROKER_ENV) as cluster:
        for topic, queues in (("GroupTopic", 4), ("BroadcastTopic", 4), ("RetryTopic", 1),
                              ("FlowTopic", 1), ("FilterTopic", 1)):
            create_topic_in_config_center(cluster, topic, queues)
            wait_for_route(cluster, topic, 2)
        yield cluster


def coordinator(cluster, group: str) -> DirectClient:
    name = coordinator_for(group, cluster.brokers)
    return DirectClient(cluster.brokers[name].addr, timeout=20)


def stable_assignment(cluster, group: str, members: int):
    """{member_id: {(broker, queue)}} once the group is Stable with `members` members."""
    described = coordinator(cluster, group).call(
        "DescribeGroup", broker_pb2.DescribeGroupRequest(group_id=group))
    if described.state != "Stable" or len(described.members) != members:
        return None
    return described.generation_id, {
        m.member_id: {(b, q) for _, b, q in decode_assignment(m.assignment)}
        for m in described.members}


def wait_stable(cluster, group, members, timeout=30.0):
    found = {}

    def check():
        found["value"] = stable_assignment(cluster, group, members)
        return found["value"]

    wait_until(check, timeout, interval=0.1, message=f"{group} Stable with {members} members")
    return found["value"]


def assert_disjoint_cover(assignment: dict) -> None:
    queues = [q for qs in assignment.values() for q in qs]
    assert len(queues) == len(set(queues)), f"overlapping assignment {assignment}"
    assert set(queues) == ALL_QUEUES
    assert all(assignment.values()), f"a member got nothing: {assignment}"


class Members:
    def __init__(self, cluster, tmp: Path, group: str, topic: str):
        self.cluster, self.tmp, self.group, self.topic = cluster, tmp, group, topic
        self.procs: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        out = self.tmp / f"member-{len(self.procs)}.txt"
        with open(self.tmp / f"member-{len(self.procs)}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(MEMBER), self.cluster.namesrv_addrs, self.group,
                 self.topic, str(out), str(SESSION_MS), str(HEARTBEAT_MS)],
                stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def consumed(self) -> set[str]:
        seen: set[str] = set()
        for path in self.tmp.glob("member-*.txt"):
            seen.update(line for line in path.read_text().splitlines() if line)
        return seen

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.mark.slow
def test_rebalance_on_join_and_on_silent_death_loses_nothing(cluster, tmp_path):
    group = "g-rebalance"
    members = Members(cluster, tmp_path, group, "GroupTopic")
    try:
        for _ in range(3):
            members.start()
        generation, assignment = wait_stable(cluster, group, 3)
        assert_disjoint_cover(assignment)

        with Producer(cluster.namesrv_addrs) as producer:
            sent = [f"m-{i}" for i in range(400)]
            for body in sent[:200]:
                producer.send(Message("GroupTopic", body.encode()))
            wait_until(lambda: len(members.consumed() & set(sent[:200])) >= 100, 30,
                       message="consumption to start")
            members.procs[0].kill()  # SIGKILL: no LeaveGroup, heartbeats just stop
            for body in sent[200:]:
                producer.send(Message("GroupTopic", body.encode()))

        after_kill, assignment = wait_stable(cluster, group, 2, timeout=SESSION_MS / 1000 + 20)
        assert after_kill > generation
        assert_disjoint_cover(assignment)
        wait_until(lambda: members.consumed() >= set(sent), 30,
                   message="every sent message consumed by someone (at-least-once)")

        members.start()
        joined, assignment = wait_stable(cluster, group, 3)
        assert joined > after_kill
        assert_disjoint_cover(assignment)
    finally:
        members.kill_all()


def test_stale_generation_is_rejected(cluster):
    group = "g-raw"
    client = coordinator(cluster, group)
    protocols = [broker_pb2.GroupProtocol(name="averagely",
                                          metadata=encode_subscription(["GroupTopic"]))]
    joined = client.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=SESSION_MS, protocols=protocols), timeout=15)
    assert joined.leader_id == joined.member_id and joined.generation_id >= 1
    client.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id=group, member_id=joined.member_id, generation_id=joined.generation_id))
    client.call("Heartbeat", broker_pb2.HeartbeatRequest(
        group_id=group, member_id=joined.member_id, generation_id=joined.generation_id))
    with pytest.raises(TideMQError) as stale:
        client.call("Heartbeat", broker_pb2.HeartbeatRequest(
            group_id=group, member_id=joined.member_id,
            generation_id=joined.generation_id - 1))
    assert stale.value.code == "ILLEGAL_GENERATION"
    with pytest.raises(TideMQError) as stale_sync:
        client.call("SyncGroup", broker_pb2.SyncGroupRequest(
            group_id=group, member_id=joined.member_id,
            generation_id=joined.generation_id + 5))
    assert stale_sync.value.code == "ILLEGAL_GENERATION"
    with pytest.raises(TideMQError) as unknown:
        client.call("Heartbeat", broker_pb2.HeartbeatRequest(
            group_id=group, member_id="nobody", generation_id=joined.generation_id))
    assert unknown.value.code == "UNKNOWN_MEMBER_ID"
    client.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id=group,
                                                          member_id=joined.member_id))
    listed = client.call("ListGroups", broker_pb2.ListGroupsRequest())
    assert any(g.group_id == group and g.state == "Empty" for g in listed.groups)


def test_broadcasting_gives_every_member_every_message(cluster, tmp_path):
    from tidemq.client.push_consumer import (
        ConsumeFrom,
        ConsumeStatus,
        MessageModel,
        PushConsumer,
    )

    received: list[set[str]] = [set(), set()]

    def listener_for(seen: set[str]):
        def listener(messages):
            seen.update(m.body.decode() for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS
        return listener

    consumers = [
        PushConsumer(cluster.namesrv_addrs, "g-broadcast", "BroadcastTopic",
                     listener_for(received[i]), model=MessageModel.BROADCASTING,
                     consume_from=ConsumeFrom.FIRST, offset_store_dir=tmp_path / f"c{i}",
                     long_poll_s=2.0, auto_commit_interval_s=0.5)
        for i in range(2)
    ]
    sent = {f"b-{i}" for i in range(60)}
    try:
        for consumer in consumers:
            consumer.start()
        assert all(len(c.assigned_queues()) == 8 for c in consumers)
        with Producer(cluster.namesrv_addrs) as producer:
            for body in sorted(sent):
                producer.send(Message("BroadcastTopic", body.encode()))
        wait_until(lambda: all(r >= sent for r in received), 30,
                   message="both broadcasting consumers to get every message")
    finally:
        for consumer in consumers:
            consumer.shutdown()
    offsets = (tmp_path / "c0" / "g-broadcast.json").read_text()
    assert "BroadcastTopic|broker-a|0" in offsets  # kept locally, written atomically


def one_member(cluster, group, topic, listener, **kwargs):
    from tidemq.client.push_consumer import ConsumeFrom, PushConsumer

    options = {"auto_commit_interval_s": 3600, **kwargs}
    consumer = PushConsumer(cluster.namesrv_addrs, group, topic, listener,
                            consume_from=ConsumeFrom.FIRST, session_timeout_ms=SESSION_MS,
                            heartbeat_interval_ms=HEARTBEAT_MS, long_poll_s=2.0,
                            **options).start()
    assert consumer.member.wait_stable(30)
    return consumer


def test_reconsume_later_goes_through_the_retry_topic_and_the_queue_moves_on(cluster):
    import threading

    from tidemq.client import MessageQueue, PullConsumer
    from tidemq.client.push_consumer import ConsumeStatus

    release, deliveries = threading.Event(), {}
    lock = threading.Lock()

    def listener(messages):
        (m,) = messages
        with lock:
            deliveries.setdefault(m.body, []).append((m.reconsume_times, m.topic))
        if m.body == b"r-0" and not release.is_set():
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = one_member(cluster, "g-retry", "RetryTopic", listener, reconsume_backoff_s=0.1,
                          auto_commit_interval_s=0.2)
    try:
        mq = MessageQueue("RetryTopic", "broker-a", 0)
        with Producer(cluster.namesrv_addrs) as producer:
            sent = producer.send_batch([Message("RetryTopic", f"r-{i}".encode())
                                        for i in range(10)], queue=mq)
        first = sent[0].queue_offset
        wait_until(lambda: len(deliveries.get(b"r-0", [])) >= 3 and len(deliveries) == 10, 30,
                   message="r-0 redelivered from the retry topic while the rest is consumed")
        with lock:
            again = deliveries[b"r-0"]
            assert [t for t, _ in again[:3]] == [0, 1, 2]  # reconsume_times grows
            assert {topic for _, topic in again[1:]} == {"%RETRY%g-retry"}
        with PullConsumer(cluster.namesrv_addrs, consumer_group="g-retry") as reader:
            # The broker took r-0 back, so the original queue commits past it.
            wait_until(lambda: reader.committed(mq) == first + 10, 20,
                       message="the commit to pass r-0")
        release.set()
    finally:
        consumer.shutdown()


def test_flow_control_bounds_pulled_but_unconsumed_messages(cluster):
    import threading

    from tidemq.client import MessageQueue
    from tidemq.client.push_consumer import ConsumeStatus

    gate, seen = threading.Event(), set()

    def listener(messages):
        gate.wait(30)
        seen.update(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = one_member(cluster, "g-flow", "FlowTopic", listener, max_pending_messages=10,
                          pull_batch_size=4, concurrency=2)
    try:
        mq = MessageQueue("FlowTopic", "broker-a", 0)
        with Producer(cluster.namesrv_addrs) as producer:
            producer.send_batch([Message("FlowTopic", f"f-{i}".encode()) for i in range(100)],
                                queue=mq)
        pq = consumer._queues[mq]
        wait_until(lambda: pq.pending()[0] >= 10, 20, message="the queue to fill up")
        assert pq.pending()[0] <= 10 - 1 + 4  # below the limit when the last pull started
        gate.set()
        wait_until(lambda: len(seen) == 100, 30, message="all 100 consumed after release")
    finally:
        gate.set()
        consumer.shutdown()


def test_a_new_group_at_last_receives_what_is_sent_right_after_entering(cluster):
    """Entering `with PushConsumer(...)` waits for the first assignment: before it, the
    queues' LAST start offsets are not fixed yet and what is sent meanwhile would be skipped."""
    import threading

    from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

    received, lock = set(), threading.Lock()

    def listener(messages):
        with lock:
            received.update(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    with PushConsumer(cluster.namesrv_addrs, "g-fresh-last", "GroupTopic", listener,
                      consume_from=ConsumeFrom.LAST, session_timeout_ms=SESSION_MS,
                      heartbeat_interval_ms=HEARTBEAT_MS, long_poll_s=2.0) as consumer:
        assert {(mq.broker_name, mq.queue_id) for mq in consumer.assigned_queues()} == \
            ALL_QUEUES
        with Producer(cluster.namesrv_addrs) as producer:
            sent = {f"fresh-{i}".encode() for i in range(16)}
            for body in sorted(sent):
                producer.send(Message("GroupTopic", body))
        wait_until(lambda: received >= sent, 20,
                   message="a fresh LAST group to receive what was sent after entering")


def test_a_caught_up_tag_filtered_group_shows_zero_lag(cluster):
    """Phantom lag: messages the group's tag filter skips, at the end of a queue, stayed
    counted as lag while the consumer's pull was held there (up to the 15 s long poll)."""
    import threading

    from tidemq.client import MessageQueue
    from tidemq.client.admin import Admin
    from tidemq.client.push_consumer import ConsumeStatus, PushConsumer

    received, lock = [], threading.Lock()

    def listener(messages):
        with lock:
            received.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    group, mq = "g-filtered-lag", MessageQueue("FilterTopic", "broker-a", 0)
    with PushConsumer(cluster.namesrv_addrs, group, {"FilterTopic": "wanted"}, listener,
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                      long_poll_s=30.0, auto_commit_interval_s=0.2), \
            Admin(cluster.namesrv_addrs) as admin:
        with Producer(cluster.namesrv_addrs) as producer:
            producer.send_batch([Message("FilterTopic", b"wanted", tags="wanted")], queue=mq)
            producer.send_batch([Message("FilterTopic", b"other-%d" % i, tags="other")
                                 for i in range(5)], queue=mq)
        wait_until(lambda: received == [b"wanted"], 20, message="the matching message")

        def lag():
            return {(o.broker_name, o.queue_id): o.lag for o in admin.group_offsets(group)
                    if o.topic == "FilterTopic"}

        wait_until(lambda: lag().get(("broker-a", 0)) == 0, 10,
                   message="zero lag once only non-matching messages remain")
