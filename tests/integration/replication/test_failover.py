"""Replica groups as real processes: Redis, the config center, two name servers running the
controller, and three brokers of one broker name (tests/support/cluster.py).

What must hold: a SYNC_MASTER never acknowledges before its in-sync slaves have the
bytes; a SIGKILLed master is replaced while a producer keeps sending, and every acknowledged
message is readable from the new master at the offset its ack gave; the old master comes back
as a slave, cuts any unacknowledged tail and ends byte-identical to the master; a consumer
group keeps its committed offsets; pulls are served by a slave while the group has no master.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from tidemq.client import Message, Producer, PullConsumer, SendStatus
from tidemq.client.message import MessageQueue
from tidemq.common import errors
from tidemq.v1 import broker_pb2

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    broker_call,
    group_state,
    start_group,
    wait_in_sync,
)
from tests.support.cluster import ReplicaGroup
from tests.support.processes import freeze, wait_until


def commitlog_bytes(group: ReplicaGroup, replica: int, end: int) -> bytes:
    files = sorted(p for p in group.commitlog_dir(replica).iterdir() if p.name.isdigit())
    data = b"".join(p.read_bytes() for p in files)
    return data[:end]


def test_sync_master_does_not_acknowledge_before_the_slaves_have_the_bytes(cluster):
    group = start_group(cluster, extra=["--sync-replication-timeout-ms", "1000",
                                        "--replica-lag-max-ms", "1500"])
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    slaves = [r for r in range(3) if r != master]
    with Producer(cluster.namesrv_addrs, send_timeout=10, retries=0) as producer:
        assert producer.send(Message(TOPIC, b"before")).status is SendStatus.SEND_OK
        check_cluster_list(cluster, master)
        with pytest.raises(errors.PreconditionFailed) as refused:  # slaves are read-only
            broker_call(group.replicas[slaves[0]].addr, "CommitOffsets",
                        broker_pb2.CommitOffsetsRequest(consumer_group="g", generation_id=-1))
        assert refused.value.code == "NOT_MASTER"
        for replica in slaves:
            freeze(group.replicas[replica].pid)  # stopped before the send
        try:
            outcomes = []
            for i in range(6):
                try:
                    outcomes.append(producer.send(Message(TOPIC, f"m{i}".encode())).status.name)
                except errors.TideMQError as exc:
                    outcomes.append(exc.code)
            assert "SEND_OK" not in outcomes, outcomes
            assert set(outcomes) <= {"FLUSH_SLAVE_TIMEOUT", "NOT_ENOUGH_REPLICAS"}, outcomes
        finally:
            for replica in slaves:
                os.kill(group.replicas[replica].pid, signal.SIGCONT)
        # The slaves catch up and rejoin: sends are acknowledged again.
        wait_in_sync(cluster, {0, 1, 2})
        assert producer.send(Message(TOPIC, b"after")).status is SendStatus.SEND_OK


def check_cluster_list(cluster, master: int) -> None:
    """`tidemq cluster list`'s data: ids by role, replica ids, epoch, in-sync and lag."""
    from tidemq.client.admin import Admin

    def entries():
        with Admin(cluster.namesrv_addrs, config_center=cluster.config_center.addr) as admin:
            return [b for b in admin.cluster_info() if b.broker_name == GROUP]

    wait_until(lambda: len(entries()) == 3 and all(b.lag_bytes == 0 for b in entries()), 20,
               message="three registered replicas, caught up")
    rows = {b.replica_id: b for b in entries()}
    assert rows[master].broker_id == 0 and rows[master].role == "master"
    for replica, row in rows.items():
        assert row.epoch >= 1 and row.in_sync is True
        if replica != master:
            assert row.broker_id == replica + 1 and row.lag_s is not None
    with Admin(cluster.namesrv_addrs, config_center=cluster.config_center.addr) as admin:
        replication = admin.replication()   # GET /v1/cluster's "replication" (the console's)
    assert replication["controller_addr"] in {n.addr for n in cluster.namesrvs}
    (state,) = [g for g in replication["groups"] if g["broker_name"] == GROUP]
    assert state["master"] == master and state["in_sync"] == [0, 1, 2]
    assert sorted(r["replica_id"] for r in replication["live_replicas"]
                  if r["broker_name"] == GROUP) == [0, 1, 2]


class SendLoop:
    """A producer sending numbered messages until stopped; keeps every acknowledgement."""

    def __init__(self, namesrv_addrs: str) -> None:
        self.producer = Producer(namesrv_addrs, send_timeout=20, retries=2)
        self.acks: list[tuple[int, object]] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SendLoop:
        self._thread.start()
        return self

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            try:
                result = self.producer.send(Message(TOPIC, f"msg-{number}".encode()))
            except errors.TideMQError as exc:
                self.failures.append(str(exc))
            else:
                self.acks.append((number, result))
            number += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.close()


def test_master_sigkill_fails_over_without_losing_an_acknowledged_message(cluster):
    group = start_group(cluster)
    wait_in_sync(cluster, {0, 1, 2})
    old = group.wait_master()
    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="keeps-offsets")
    mq = MessageQueue(TOPIC, GROUP, 0)
    sender = SendLoop(cluster.namesrv_addrs).start()
    try:
        wait_until(lambda: len(sender.acks) >= 50, 60, message="50 acks before the kill")
        consumer.commit(mq, 7)
        # Every slave copies the committed offsets (~0.2 s here).
        for replica in range(3):
            if replica != old:
                wait_until(lambda r=replica: broker_call(
                    group.replicas[r].addr, "QueryOffsets", broker_pb2.QueryOffsetsRequest(
                        consumer_group="keeps-offsets", topic=TOPIC)).offsets, 10,
                    message="offsets copied to the slaves")
        before_kill = len(sender.acks)
        group.replicas[old].kill()
        alive = tuple(r for r in range(3) if r != old)
        new = group.wait_master(alive, timeout=30)
        assert new != old
        wait_until(lambda: len(sender.acks) >= before_kill + 50, 60,
                   message="the producer continues on the new master")
    finally:
        sender.stop()
    acked = [(n, r) for n, r in sender.acks if r.status is SendStatus.SEND_OK]
    assert len(acked) >= 100
    # Every acknowledged message, from the new master, at the offset its ack gave.
    new_addr = group.replicas[new].addr
    for number, result in acked:
        reply = broker_call(new_addr, "Pull", broker_pb2.PullRequest(
            consumer_group="check", topic=TOPIC, queue_id=result.queue_id,
            queue_offset=result.queue_offset, max_messages=1))
        assert reply.status == broker_pb2.FOUND, (number, result)
        message = consumer_decode(reply.records)
        assert message.body == f"msg-{number}".encode() and message.unique_id == result.unique_id
    assert consumer.committed(mq) == 7

    # The old master returns as a slave, truncates what was not acknowledged, catches up.
    group.replicas[old].restart()
    master_end = group.broker_info(new).commitlog_max_offset
    wait_until(lambda: (info := group.broker_info(old)) is not None and info.role == "SLAVE"
               and info.commitlog_max_offset == master_end, 60, interval=0.1,
               message="the old master caught up as a slave")
    assert commitlog_bytes(group, old, master_end) == commitlog_bytes(group, new, master_end)


def consumer_decode(records: bytes):
    from tidemq.client.message import decode_records

    (message,) = decode_records(records, GROUP)
    return message


def test_pulls_are_served_by_a_slave_while_the_group_has_no_master(cluster):
    group = start_group(cluster, broker_role="SYNC_MASTER", min_in_sync=1,
                        extra=["--replica-lag-max-ms", "1500"])
    wait_in_sync(cluster, {0, 1, 2})
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        sent = [producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(20)]
    master = group.wait_master()
    outsider, *others = [r for r in range(3) if r != master]
    # min in-sync 1: the sends were answered before every slave had them. The outsider must
    # hold them all before it stops (at CI's load it once had none of them yet), and know
    # they are confirmed: a slave serves only below the confirmed offset its master told it
    # (once it had them all but had not heard they were confirmed, and served none)
    master_end = group.broker_info(master).commitlog_max_offset
    wait_until(lambda: (info := group.broker_info(outsider)) is not None
               and info.commitlog_max_offset == master_end
               and info.confirmed_offset == master_end, 30, interval=0.1,
               message="the outsider holding every sent message, known confirmed")
    # One slave is stopped for good (a clean stop: its checkpoint keeps the confirmed offset,
    # which a kill could leave up to a checkpoint interval behind): the master drops it from
    # the in-sync set.
    group.replicas[outsider].stop()
    wait_in_sync(cluster, {master, *others})
    # Every in-sync replica dies; the outsider comes back. Unclean election is off: no master.
    for replica in (master, *others):
        group.replicas[replica].kill()
    group.replicas[outsider].restart()
    wait_until(lambda: (info := group.broker_info(outsider)) is not None
               and info.role == "SLAVE", 30, message="the outsider is a slave")
    assert group.master((outsider,)) is None
    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="reader", timeout=2)
    for result in sent:
        pulled = consumer.pull(MessageQueue(TOPIC, GROUP, result.queue_id), result.queue_offset, 1)
        assert pulled.messages and pulled.messages[0].unique_id == result.unique_id
    state = group_state(cluster)  # the controller waits for an in-sync replica to return
    assert state["master"] != outsider and outsider not in state["in_sync"]


def test_a_paused_master_deposed_meanwhile_acknowledges_nothing(cluster):
    """A gray failure: the master is SIGSTOPped longer than its lease, another is elected. When
    it resumes it must refuse sends at once (its lease may be gone: NOT_MASTER), even with
    ASYNC_MASTER where no slave would have to confirm anything, then follow the new master."""
    from tidemq.common import record

    group = start_group(cluster, broker_role="ASYNC_MASTER", min_in_sync=1)
    wait_in_sync(cluster, {0, 1, 2})
    old = group.wait_master()
    os.kill(group.replicas[old].pid, signal.SIGSTOP)
    try:
        alive = tuple(r for r in range(3) if r != old)
        new = group.wait_master(alive, timeout=30)
    finally:
        os.kill(group.replicas[old].pid, signal.SIGCONT)
    payload = record.encode_message(record.OutgoingMessage(TOPIC, b"late"))[0]
    with pytest.raises(errors.PreconditionFailed) as refused:
        broker_call(group.replicas[old].addr, "Send", broker_pb2.SendRequest(
            topic=TOPIC, queue_id=0, records=payload, record_count=1))
    assert refused.value.code == "NOT_MASTER"
    wait_until(lambda: (info := group.broker_info(old)) is not None and info.role == "SLAVE"
               and info.epoch == group.broker_info(new).epoch, 30,
               message="the old master follows the new one")
