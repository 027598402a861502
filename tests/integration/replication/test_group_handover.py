"""A consumer group survives its coordinator's failover: the replica promoted in the dead
master's place takes over the group (members, generation, assignments) from the copy it took,
and the members carry on with it: same member ids, same generation, no queue revoked."""

from __future__ import annotations

import threading

from tidemq.client import PullConsumer, PushConsumer
from tidemq.client.group import DirectClient
from tidemq.client.message import MessageQueue
from tidemq.v1 import broker_pb2

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    broker_call,
    start_group,
    wait_in_sync,
)
from tests.support.processes import wait_until

CONSUMERS = "handover"


def described(addr: str):
    return DirectClient(addr, timeout=5).call(
        "DescribeGroup", broker_pb2.DescribeGroupRequest(group_id=CONSUMERS))


def test_members_keep_generation_and_queues_across_a_master_failover(cluster, tmp_path):
    group = start_group(cluster)
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    revoked: list = []
    lock = threading.Lock()

    def consumer(n: int) -> PushConsumer:
        made = PushConsumer(cluster.namesrv_addrs, CONSUMERS, TOPIC, lambda messages: None,
                            heartbeat_interval_ms=300, session_timeout_ms=10_000,
                            offset_store_dir=tmp_path / f"offsets-{n}")
        original = made._revoked

        def count_revoked(queues):
            with lock:
                revoked.extend(queues)
            original(queues)
        made.member.on_revoked = count_revoked
        return made.start()

    consumers = [consumer(n) for n in range(2)]
    try:
        wait_until(lambda: (d := described(group.replicas[master].addr)).state == "Stable"
                   and len(d.members) == 2, 30, message="the group Stable with 2 members")
        before = described(group.replicas[master].addr)
        members = {m.member_id: bytes(m.assignment) for m in before.members}
        wait_until(lambda: all(c.member.generation_id == before.generation_id
                               and c.member.wait_stable(0) for c in consumers), 30,
                   message="both members hold their queues of the final generation")
        with lock:
            revoked.clear()   # the first member gave up queues when the second joined
        # A commit made now reaches the slaves in the same copy as the Stable group.
        marker = PullConsumer(cluster.namesrv_addrs, consumer_group="copy-marker")
        marker.commit(MessageQueue(TOPIC, GROUP, 0), 1)
        slaves = [r for r in range(3) if r != master]
        for replica in slaves:
            wait_until(lambda r=replica: broker_call(
                group.replicas[r].addr, "QueryOffsets", broker_pb2.QueryOffsetsRequest(
                    consumer_group="copy-marker", topic=TOPIC)).offsets, 10,
                message="a copy taken after the group became Stable")

        group.replicas[master].kill()
        new = group.wait_master(tuple(slaves), timeout=30)

        def carried_on() -> bool:
            after = described(group.replicas[new].addr)
            return (after.state == "Stable" and after.generation_id == before.generation_id
                    and {m.member_id: bytes(m.assignment) for m in after.members} == members)
        wait_until(carried_on, 30, message="the new master coordinating the same generation")
        # Both members heartbeat to it with their old ids and generation, which it accepts.
        for c in consumers:
            wait_until(lambda c=c: c.member.coordinator_addr == group.replicas[new].addr, 30,
                       message="the member found the new coordinator")
            assert c.member.generation_id == before.generation_id
            assert c.member.member_id in members
        assert revoked == []
    finally:
        for c in consumers:
            c.shutdown()
