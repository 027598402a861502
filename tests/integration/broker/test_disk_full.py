"""A full disk with real processes: broker-b's data dir on its own 64 MiB tmpfs, filled from
outside. Retention reclaims what it can first; then sends to broker-b answer STORAGE_FULL
with the sentence, the route lists broker-b read-only and producers (single and batch) go to
broker-a, while reads and pop/ack on broker-b go on; freeing the space lets writes resume by
themselves (docs/storage.md, "A full disk")."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

import pytest
from tidemq.client import Message, MessageQueue, Producer, SimpleConsumer
from tidemq.common import errors
from tidemq.v1 import broker_pb2, nameserver_pb2, nameserver_pb2_grpc

from tests.integration.broker.conftest import DirectClient, broker_client, wait_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC = "disk-full"
SIZE_MIB = 64


@pytest.fixture
def small_fs(tmp_path):
    """A 64 MiB tmpfs of its own (needs root, or CAP_SYS_ADMIN: .ci/run runs as root),
    unmounted at teardown."""
    where = tmp_path / "small-fs"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MIB}m", "tmpfs",
                              str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the broker's data (needs root or "
                    f"CAP_SYS_ADMIN): {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def metric(broker, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def queue_perms(cluster, topic: str) -> dict[str, int]:
    client = DirectClient(cluster.name_servers[0].addr,
                          nameserver_pb2_grpc.NameServerServiceStub, 5)
    route = client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=topic))
    return {q.broker_name: q.perm for q in route.queue_datas}


def fill_to(path, ratio: float) -> None:
    """Grow the filler file until the file system is `ratio` used."""
    st = os.statvfs(path)
    total, used = st.f_blocks * st.f_frsize, (st.f_blocks - st.f_bfree) * st.f_frsize
    filler = path / "filler"
    have = filler.stat().st_size if filler.exists() else 0
    grow = int(total * ratio) - used
    if grow > 0:
        with open(filler, "ab") as out:
            os.posix_fallocate(out.fileno(), have, grow)


def test_a_full_broker_refuses_sends_keeps_serving_and_resumes(small_fs, cluster):
    # small_fs first: set up before, so unmounted after, the processes using it
    data_dir = small_fs / "broker-b"
    broker_a = cluster.start_broker("broker-a")
    broker_b = cluster.start_broker(
        "broker-b", "--data-dir", str(data_dir), "--disk-warn-ratio", "0.5",
        "--disk-full-ratio", "0.8", "--disk-max-used-ratio", "0.8",
        "--disk-check-interval-ms", "200", "--retention-check-interval-ms", "500")
    cluster.put_topic(TOPIC, queues=2)
    wait_route(cluster, TOPIC, {"broker-a", "broker-b"})
    assert queue_perms(cluster, TOPIC) == {"broker-a": 6, "broker-b": 6}
    queue_b = MessageQueue(TOPIC, "broker-b", 0)

    # ~4 MiB on broker-b: four 1 MiB segments, the oldest three retention may delete.
    with Producer(cluster.namesrv_addrs, route_refresh_s=1) as producer:
        for _ in range(8):
            producer.send_batch([Message(TOPIC, os.urandom(100_000)) for _ in range(5)],
                                queue=queue_b)
        before = producer.send_batch([Message(TOPIC, b"kept-%d" % i) for i in range(4)],
                                     queue=queue_b)
    assert metric(broker_b, "tidemq_broker_disk_state") == 0

    # Filled from outside to 90 %: FULL; retention's forced clean-up deletes the old segments
    # first (the queue's minimum moves up), but that is not enough to get below 80 %.
    fill_to(small_fs, 0.90)
    wait_until(lambda: metric(broker_b, "tidemq_broker_disk_state") == 2, 15,
               message="broker-b to report its disk FULL")
    assert metric(broker_b, "tidemq_broker_disk_used_ratio") >= 0.8
    b = broker_client(broker_b)
    offsets = lambda: {q.queue_id: (q.min_offset, q.max_offset) for q in b.call(  # noqa: E731
        "GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic=TOPIC)).queues}
    wait_until(lambda: offsets()[0][0] > 0, 15, message="retention to delete old segments")
    assert metric(broker_b, "tidemq_broker_disk_state") == 2

    # A send to broker-b: STORAGE_FULL, naming the broker, the path and the free space.
    with Producer(cluster.namesrv_addrs, retries=0) as producer, \
            pytest.raises(errors.StorageFull) as refused:
        producer.send_batch([Message(TOPIC, b"refused")], queue=queue_b)
    text = str(refused.value)
    assert text.startswith("STORAGE_FULL: ")
    assert "broker broker-b refuses sends, its storage is full" in text
    assert str(data_dir) in text and "free" in text and "sends resume by themselves" in text
    assert metric(broker_b, 'tidemq_broker_send_errors_total{code="STORAGE_FULL"}') >= 1

    # The route lists broker-b read-only: single sends and send_many all go to broker-a.
    wait_until(lambda: queue_perms(cluster, TOPIC) == {"broker-a": 6, "broker-b": 2}, 15,
               message="broker-b's queues to be registered read-only")
    with Producer(cluster.namesrv_addrs, route_refresh_s=1) as producer:
        singles = [producer.send(Message(TOPIC, b"single-%d" % i)) for i in range(10)]
        batch = producer.send_many([Message(TOPIC, b"many-%d" % i) for i in range(40)])
    assert {r.broker_name for r in singles + batch} == {"broker-a"}

    # Reads go on: the messages kept in broker-b's active segment are pulled...
    low, high = offsets()[0]
    pulled = b.call("Pull", broker_pb2.PullRequest(
        consumer_group="disk-reader", topic=TOPIC, queue_id=0, queue_offset=low,
        max_messages=64))
    assert pulled.status == broker_pb2.PullStatus.Value("FOUND")
    assert high == before[-1].queue_offset + 1
    # ...and popped and acked (an ack is a write of the broker's own: not refused).
    acked = 0
    with SimpleConsumer(cluster.namesrv_addrs, "disk-popper", TOPIC) as consumer:
        deadline = time.monotonic() + 30
        while not acked and time.monotonic() < deadline:
            for received in consumer.receive(32, invisible_duration_s=30, wait_s=1):
                if received.message.broker_name == "broker-b":
                    consumer.ack(received)
                    acked += 1
    assert acked

    # Space returns: the next disk check lets writes in and the route is writable again.
    (small_fs / "filler").unlink()
    wait_until(lambda: metric(broker_b, "tidemq_broker_disk_state") == 0, 15,
               message="broker-b to report its disk OK")
    wait_until(lambda: queue_perms(cluster, TOPIC) == {"broker-a": 6, "broker-b": 6}, 15,
               message="broker-b's queues to be writable again")
    with Producer(cluster.namesrv_addrs, retries=0) as producer:
        resumed = producer.send_batch([Message(TOPIC, b"resumed")], queue=queue_b)
    assert resumed[0].broker_name == "broker-b" and resumed[0].queue_offset == high
    broker_a.stop()
    broker_b.stop()   # the data dir's file system is unmounted after this
