"""Compaction with real processes on a 3-replica group (docs/storage.md, "Compaction"):
10 000 updates over 100 keys, the last update of ten keys a tombstone, with the master
SIGKILLed in the middle of a compaction pass (a small I/O budget makes a pass last; the test
waits until the master's log says a pass began and has not ended). Every replica — the killed
one restarted as a slave included — ends with exactly one record per live key, at the offset
it was acknowledged at, and none of the deleted keys; a pop consumer receives exactly those."""

from __future__ import annotations

import re
import urllib.request

from tidemq.client import Message, Producer, SimpleConsumer
from tidemq.client.message import MessageQueue, SendStatus
from tidemq.common import errors, record
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.topics import TopicDefinitions
from tidemq.v1 import broker_pb2

from tests.integration.replication.replica_group import GROUP, broker_call, wait_in_sync
from tests.support.cluster import start_replica_group, wait_for_route
from tests.support.processes import wait_until

TOPIC = "compacted"
UPDATES, KEYS, BATCH = 10_000, 100, 100
DELETED = set(range(90, 100))     # their last update is a tombstone


def update(n: int) -> Message:
    key = n % KEYS
    if key in DELETED and n >= UPDATES - KEYS:
        return Message(TOPIC, b"\0", keys=[f"key-{key}"], properties={"KAFKA_VALUE": "null"})
    return Message(TOPIC, f"value-{n:05d}-".encode() * 12, keys=[f"key-{key}"])


def send_all(producer, first: int, last: int, acked: dict[int, int]) -> None:
    mq = MessageQueue(TOPIC, GROUP, 0)
    for n in range(first, last, BATCH):
        batch = [update(m) for m in range(n, min(n + BATCH, last))]

        def sent(batch=batch):
            try:
                return producer.send_batch(batch, queue=mq)
            except errors.TideMQError:   # the master is gone: routes catch up
                return None
        results = wait_until(sent, 60, interval=0.2, message=f"batch {n} acknowledged")
        for m, result in zip(range(n, n + len(batch)), results, strict=True):
            assert result.status == SendStatus.SEND_OK
            acked[m] = result.queue_offset


def served(addr: str, topic: str = TOPIC) -> dict[int, bytes] | None:
    """offset -> body of every record a replica serves of the queue (None: it does not
    answer yet, e.g. the restarted replica still starting its server)."""
    found, offset = {}, 0
    while True:
        try:
            reply = broker_call(addr, "Pull", broker_pb2.PullRequest(
                consumer_group="compaction-check", topic=topic, queue_id=0,
                queue_offset=offset, max_messages=64))
        except (errors.ServiceUnavailable, errors.DeadlineExceeded):
            return None
        if reply.status == broker_pb2.FOUND:
            for rec in record.iter_records(reply.records):
                found[rec.queue_offset] = bytes(rec.body)
        elif reply.status != broker_pb2.NO_MATCHED_MSG or reply.next_begin_offset <= offset:
            return found
        offset = reply.next_begin_offset


def mid_pass(log_path) -> bool:
    """The master's log: the last compaction line says a pass began (not that it ended)."""
    lines = [line for line in log_path.read_text(errors="replace").splitlines()
             if "compacting queue" in line or "queue compacted" in line]
    return bool(lines) and "compacting queue" in lines[-1]


def test_compaction_survives_a_master_sigkill_and_is_identical_on_every_replica(cluster):
    group = start_replica_group(cluster.start, cluster, GROUP, extra=[
        "--compaction-interval-ms", "200", "--compaction-io-mib-s", "0.25"])
    with ConfigClient(cluster.config_center.addr) as config:
        TopicDefinitions(config).create(TOPIC, 1, config={
            "cleanup.policy": "compact", "min.compaction.lag.ms": 0, "delete.retention.ms": 0})
    wait_for_route(cluster, TOPIC, 1)
    old = group.wait_master()
    wait_in_sync(cluster, {0, 1, 2})

    acked: dict[int, int] = {}
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        send_all(producer, 0, UPDATES // 2, acked)
        log_path = group.replicas[old].log
        wait_until(lambda: mid_pass(log_path), 60, interval=0.01,
                   message="the master in the middle of a compaction pass")
        group.replicas[old].kill()
        new = group.wait_master(tuple(r for r in range(3) if r != old), timeout=30)
        assert new != old
        send_all(producer, UPDATES // 2, UPDATES, acked)
    group.replicas[old].restart()
    wait_in_sync(cluster, {0, 1, 2}, timeout=60)

    latest: dict[int, int] = {}
    for n in sorted(acked):
        latest[n % KEYS] = n
    expected = {acked[n]: update(n).body for key, n in latest.items() if key not in DELETED}
    assert len(expected) == KEYS - len(DELETED)
    assert len(set(acked.values())) == UPDATES            # offsets as acknowledged, no dupes
    for replica in group.replicas:
        wait_until(lambda addr=replica.addr: served(addr) == expected, 120, interval=0.5,
                   message=f"replica {replica.addr} compacted to one record per live key")
    assert "queue compacted" in group.replicas[new].log.read_text(errors="replace")
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{group.replicas[new].metrics_port}/metrics").read().decode()
    removed = re.search(r"^tidemq_broker_compaction_removed_records_total (\S+)$", metrics,
                        re.MULTILINE)
    assert removed and float(removed.group(1)) > 0, "the new master's compaction metric"

    # pop skips the gaps too: a new group pops exactly the live records
    popper = SimpleConsumer(cluster.namesrv_addrs, "compaction-popper", TOPIC, timeout=10)
    popped: dict[int, bytes] = {}

    def pop_more() -> bool:
        for received in popper.receive(32):
            popped[received.message.queue_offset] = received.message.body
        return len(popped) >= len(expected)
    wait_until(pop_more, 60, interval=0.1, message="every live record popped")
    assert popped == expected


def test_a_compacted_topic_does_not_pin_the_shared_commitlog(cluster):
    """Copy-forward (docs/storage.md, "How compaction frees disk") with real processes: a
    changelog topic whose first ten keys are written once and never again, between records
    of an ordinary topic, on 64 KiB segments with every finished segment past the global
    age. Before copy-forward the cold keys' segment pinned the whole log; now the old
    segments go on the master and its slave alike, and both serve every key's latest value
    at the offset it was acknowledged at."""
    changelog, events = "changelog", "events"
    group = start_replica_group(cluster.start, cluster, GROUP, replicas=2, extra=[
        "--segment-size-mib", "0.0625", "--retention-hours", "0", "--delete-when-hour", "-1",
        "--retention-check-interval-ms", "200", "--compaction-interval-ms", "200",
        # the shared host's own disk use must not force clean-up under the test
        "--disk-max-used-ratio", "0.99", "--disk-warn-ratio", "0.99", "--disk-full-ratio", "0.99"])
    with ConfigClient(cluster.config_center.addr) as config:
        definitions = TopicDefinitions(config)
        definitions.create(changelog, 1, config={"cleanup.policy": "compact",
                                                 "min.compaction.lag.ms": 0})
        definitions.create(events, 1)
    wait_for_route(cluster, changelog, 1)
    wait_for_route(cluster, events, 1)
    master = group.wait_master()
    wait_in_sync(cluster, {0, 1})

    acked: dict[int, tuple[int, bytes]] = {}    # key -> (offset, body)
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        for round_no in range(25):
            keys = range(100) if round_no == 0 else range(10, 100)
            batch = [Message(changelog, f"key-{key}-round-{round_no}|".encode() * 6,
                             keys=[f"key-{key}"]) for key in keys]
            results = producer.send_batch(batch, queue=MessageQueue(changelog, GROUP, 0))
            for key, message, result in zip(keys, batch, results, strict=True):
                assert result.status == SendStatus.SEND_OK
                acked[key] = (result.queue_offset, message.body)
            assert all(r.status == SendStatus.SEND_OK for r in producer.send_batch(
                [Message(events, b"e" * 1000) for _ in range(40)],
                queue=MessageQueue(events, GROUP, 0)))
    expected = dict(acked.values())

    def log_files(replica: int) -> list[int]:
        return sorted(int(p.name) for p in group.commitlog_dir(replica).iterdir()
                      if p.name.isdigit())

    for replica in (0, 1):
        # ~1.5 MB written: about 23 segments; what stays is the last rounds' live records
        wait_until(lambda r=replica: log_files(r)[0] > 0 and len(log_files(r)) <= 6, 120,
                   interval=0.5, message=f"replica {replica}'s old segments freed")
        wait_until(lambda addr=group.replicas[replica].addr: served(addr, changelog) == expected,
                   60, interval=0.5, message=f"replica {replica} serves every key's latest value")
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{group.replicas[master].metrics_port}/metrics").read().decode()
    relocated = re.search(r"^tidemq_broker_compaction_relocated_records_total (\S+)$", metrics,
                          re.MULTILINE)
    assert relocated and float(relocated.group(1)) >= 10, "the cold keys were copied forward"
