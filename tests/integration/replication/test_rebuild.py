"""A replica whose log ends below its master's oldest retained segment rebuilds itself from
that segment (issue #24): one whose disk was replaced (data directory wiped while stopped),
and one that was down while retention removed its resume point. Each comes back, discards
what it held, copies the master's log from its oldest offset, is in the in-sync set again and
serves the master's messages at the master's queue offsets. 64 KiB segments, a retention of
about a second checked every 200 ms, so the master keeps only its active segment."""

from __future__ import annotations

import shutil
import urllib.request

from tidemq.client import Message, Producer
from tidemq.client.message import MessageQueue
from tidemq.common import record
from tidemq.v1 import broker_pb2

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    broker_call,
    start_group,
    wait_in_sync,
)
from tests.support.processes import wait_until

SMALL_RETENTION = ["--segment-size-mib", "0.0625", "--retention-hours", "0.0003",
                   "--delete-when-hour", "-1", "--retention-check-interval-ms", "200",
                   "--replica-lag-max-ms", "1500"]


def produce(cluster, count: int, start: int = 0) -> None:
    """`count` 2 KiB messages over both queues, 16 per batch (~31 per segment)."""
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        for first in range(start, start + count, 16):
            mq = MessageQueue(TOPIC, GROUP, (first // 16) % 2)
            producer.send_batch([Message(TOPIC, f"{n:06d}".encode() * 340)
                                 for n in range(first, first + 16)], queue=mq)


def queue_offsets(addr: str) -> dict[int, tuple[int, int]]:
    reply = broker_call(addr, "GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic=TOPIC))
    return {q.queue_id: (q.min_offset, q.max_offset) for q in reply.queues}


def pulled(addr: str, queue_id: int, offset: int) -> tuple[int, bytes]:
    reply = broker_call(addr, "Pull", broker_pb2.PullRequest(
        consumer_group="rebuild-check", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
        max_messages=32))
    return reply.status, reply.records


def metric(process, name: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{process.metrics_port}/metrics",
                                  timeout=10).read().decode()
    values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else None


def wait_retained_past(group, master: int, offset: int) -> None:
    wait_until(lambda: group.broker_info(master).commitlog_min_offset > offset, 30,
               interval=0.1, message=f"the master's retention to pass offset {offset}")


def assert_rebuilt(cluster, group, master: int, replica: int) -> None:
    """`replica` copied the master's retained log, is in sync, and its consume queues serve
    the master's messages at the master's queue offsets."""
    process = group.replicas[replica]
    wait_until(lambda: (info := group.broker_info(replica)) is not None
               and info.role == "SLAVE"
               and info.commitlog_max_offset == group.broker_info(master).commitlog_max_offset,
               60, interval=0.1, message="the rebuilt replica caught up")
    wait_in_sync(cluster, {0, 1, 2})
    assert "replica data discarded to rebuild from the master" in process.log.read_text()
    assert metric(process, "tidemq_broker_replica_rebuilds_total") >= 1
    assert metric(process, "tidemq_broker_replica_rebuilding") == 0

    master_addr, replica_addr = group.replicas[master].addr, process.addr
    wait_until(lambda: queue_offsets(replica_addr) == queue_offsets(master_addr), 30,
               interval=0.1, message="the same queue offsets on the rebuilt replica")
    offsets = queue_offsets(master_addr)
    assert any(low > 0 for low, _ in offsets.values()), "retention moved the queue minimums"
    served = 0
    for queue_id, (low, high) in offsets.items():
        offset = low
        while offset < high:
            status, records = pulled(replica_addr, queue_id, offset)
            assert status == broker_pb2.FOUND, (queue_id, offset)
            assert (status, records) == pulled(master_addr, queue_id, offset)
            count = len(list(record.iter_records(records)))
            served += count
            offset += count
    assert served > 0


def test_a_slave_whose_disk_was_wiped_rebuilds_and_rejoins(cluster):
    group = start_group(cluster, extra=SMALL_RETENTION)
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    produce(cluster, 320)   # ~10 segments: retention keeps only the last
    wait_retained_past(group, master, 0)
    replica = next(r for r in range(3) if r != master)
    group.replicas[replica].kill()
    shutil.rmtree(group.replicas[replica].workdir / "data")   # the disk was replaced
    wait_in_sync(cluster, {r for r in range(3) if r != replica})
    group.replicas[replica].restart()
    assert_rebuilt(cluster, group, master, replica)
    produce(cluster, 64, start=320)   # and it goes on following
    assert_rebuilt(cluster, group, master, replica)


def test_a_slave_down_past_retention_rebuilds_and_rejoins(cluster):
    group = start_group(cluster, extra=SMALL_RETENTION)
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    produce(cluster, 64)
    replica = next(r for r in range(3) if r != master)
    wait_until(lambda: group.broker_info(replica).commitlog_max_offset
               == group.broker_info(master).commitlog_max_offset, 30, interval=0.1,
               message="the slave caught up before it stops")
    resume_point = group.broker_info(replica).commitlog_max_offset
    group.replicas[replica].stop()
    wait_in_sync(cluster, {r for r in range(3) if r != replica})
    produce(cluster, 256, start=64)   # several segments while it is down
    wait_retained_past(group, master, resume_point)
    group.replicas[replica].restart()
    assert_rebuilt(cluster, group, master, replica)
