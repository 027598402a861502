"""A compacted topic in the chaos run (issue #39; docs/storage.md "Compaction"): a writer sends
updates over a bounded key set, some of them tombstones, one at a time with SYNC
acknowledgements while the faults hit the group, recording every send — its key, its body
(unique: "<key>:<sequence>") and, when acknowledged, its queue offset. The brokers compact it
all along (min.compaction.lag.ms 0, delete.retention.ms TOMBSTONE_KEPT_MS, a pass every
COMPACTION_INTERVAL_MS: `BROKER_FLAGS`); after the faults stop the run waits until every replica
shows compaction caught up, reads the topic from EVERY replica (a Pull addressed to each
replica, slaves included) and `check_compacted` judges what they serve.

What a replica must serve, per key K, with A the last acknowledged write of K (by send order):

* A value at A's acknowledged offset, with A's body (offsets never change), and no other
  record of K (superseded records are compacted away); when A is a tombstone, nothing (it
  deleted K and went itself after delete.retention.ms: every tombstone was sent at least
  that long before the check).
* Except what an unacknowledged send explains. A send that got no acknowledgement may or may
  not have been stored (a timeout after the master appended it; a request that outlived its
  deadline in a paused master and was appended later), and if stored it lies after A in the
  log whatever its sequence, since A's own send began after it was given up. So the record of
  K may instead be an unacknowledged write of K at an offset above A's, and K may have no
  record when some unacknowledged write of K was a tombstone. Such keys are counted
  (`explained`) so a run shows how many were judged strictly.
  A copy of A's own send above A's offset (a first attempt stored after the acknowledged
  retry) is explained the same way; below it, or a record of A at another offset otherwise,
  is an offset that changed.
* Every record served is one the writer sent (no invented or corrupted body), of its key's
  queue; and the replicas serve the same records at the same offsets.

Pure functions over what the writer was told and what the replicas serve, so the checks are
unit-tested (tests/unit/support/test_chaos_compacted.py), including that they fail.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

TOPIC = "chaos-compacted"
QUEUES = 2
KEYS = 40                   # key k is written to queue k % QUEUES
TOMBSTONE_SHARE = 0.1
TOMBSTONE_KEPT_MS = 2_000   # delete.retention.ms
COMPACTION_INTERVAL_MS = 500
RATE = 40                   # sends per second at most (one at a time, acknowledged)
SETTLE_TIMEOUT_S = 60       # after the faults: compaction caught up on every replica
# The chaos brokers' compaction timing (tests.chaos.group.broker_args adds them).
BROKER_FLAGS = ["--compaction-interval-ms", str(COMPACTION_INTERVAL_MS)]


@dataclass(frozen=True, slots=True)
class Write:
    sequence: int
    key: int
    body: bytes
    tombstone: bool
    offset: int | None   # the acknowledged queue offset; None: not acknowledged

    @property
    def queue_id(self) -> int:
        return self.key % QUEUES


def body_of(key: int, sequence: int, tombstone: bool) -> bytes:
    return f"{key}:{sequence}{':tombstone' if tombstone else ''}".encode()


@dataclass
class CompactedVerdict:
    writes: int = 0
    acked: int = 0
    tombstones_acked: int = 0
    keys_judged: int = 0       # per replica
    explained: int = 0         # keys whose outcome an unacknowledged write explains
    live_served: int = 0       # records the replicas serve (summed)
    problems: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)   # replicas unlike the first one

    @property
    def ok(self) -> bool:
        """Nothing wrong, and something judged: a run whose writer was never acknowledged or
        whose replicas served no key is not a pass."""
        return (self.acked > 0 and self.keys_judged > 0 and not self.problems
                and not self.diverged)

    def line(self) -> str:
        return (f"compacted:writes={self.writes} acked={self.acked} "
                f"tombstones_acked={self.tombstones_acked} keys_judged={self.keys_judged} "
                f"explained_by_unacked={self.explained} served={self.live_served} "
                f"problems={len(self.problems)} diverged={len(self.diverged)}")


def settled(served: Mapping[str, Mapping[tuple[int, int], bytes] | None]) -> bool:
    """Compaction caught up on every replica: each answered, all serve the same records, at
    most one record per key and no tombstone (all expired)."""
    if not served or any(records is None for records in served.values()):
        return False
    first = next(iter(served.values()))
    if any(records != first for records in served.values()):
        return False
    keys = [body.split(b":", 1)[0] for body in first.values()]
    return len(keys) == len(set(keys)) and not any(
        body.endswith(b":tombstone") for body in first.values())


def check_compacted(writes: Sequence[Write],
                    served: Mapping[str, Mapping[tuple[int, int], bytes] | None]
                    ) -> CompactedVerdict:
    """`served`: replica name -> (queue id, queue offset) -> body of every record it serves of
    the compacted topic (None: it did not answer)."""
    verdict = CompactedVerdict(writes=len(writes),
                               acked=sum(w.offset is not None for w in writes),
                               tombstones_acked=sum(w.offset is not None and w.tombstone
                                                    for w in writes))
    by_body = {w.body: w for w in writes}
    by_key: dict[int, list[Write]] = defaultdict(list)
    for write in writes:
        by_key[write.key].append(write)
    reference = None
    for replica, records in served.items():
        if records is None:
            verdict.problems.append(f"{replica} did not answer")
            continue
        if reference is None:
            reference = (replica, records)
        elif records != reference[1]:
            verdict.diverged.append(replica)
            differ = sorted(set(records.items()) ^ set(reference[1].items()))[:3]
            verdict.problems.append(f"{replica} differs from {reference[0]}: first "
                                    f"differences (queue, offset, body) {differ}")
        verdict.live_served += len(records)
        found: dict[int, list[tuple[int, Write]]] = defaultdict(list)
        for (queue_id, offset), body in sorted(records.items()):
            write = by_body.get(body)
            if write is None or write.queue_id != queue_id:
                verdict.problems.append(f"{replica} serves {body!r} at {queue_id}@{offset}: "
                                        f"not a write of that queue")
                continue
            found[write.key].append((offset, write))
        for key, sent in sorted(by_key.items()):
            verdict.keys_judged += 1
            problem, explained = _judge(key, sent, found.get(key, []))
            verdict.explained += explained
            if problem:
                verdict.problems.append(f"{replica} key {key}: {problem}")
    if not verdict.acked:
        verdict.problems.append("no compacted write was acknowledged: nothing judged")
    return verdict


def _judge(key: int, sent: list[Write], found: list[tuple[int, Write]]) -> tuple[str, bool]:
    """(what is wrong with key `key` on one replica, or "", whether an unacknowledged write
    explains its outcome)."""
    acked = [w for w in sent if w.offset is not None]
    last = max(acked, key=lambda w: w.sequence) if acked else None
    unacked = [w for w in sent if w.offset is None]
    if len(found) > 1:
        return (f"{len(found)} records kept (superseded records not compacted away): "
                f"{[(o, w.body) for o, w in found]}", False)
    if found:
        offset, write = found[0]
        if write.tombstone:
            return (f"tombstone {write.body!r} at {offset} kept past delete.retention.ms",
                    False)
        if write.offset is not None:   # an acknowledged write survived
            if last is not None and write.sequence != last.sequence:
                return (f"serves {write.body!r} at {offset}, not its last acknowledged write "
                        f"{last.body!r} at {last.offset}", False)
            if offset < write.offset:
                return (f"{write.body!r} served at offset {offset}, acknowledged at "
                        f"{write.offset}", False)
            # above it: a second copy of the same send (its first attempt outlived its
            # deadline, stored after the retry was acknowledged) superseded the acknowledged one
            return "", offset > write.offset
        if last is None or offset > last.offset:   # an unacknowledged write, stored after A
            return "", True
        return (f"serves unacknowledged {write.body!r} at {offset}, below its last "
                f"acknowledged write {last.body!r} at {last.offset}", False)
    if last is None or last.tombstone:
        return "", False
    if any(w.tombstone for w in unacked):   # an unacknowledged tombstone may have deleted it
        return "", True
    return (f"its last acknowledged value {last.body!r} at {last.offset} is gone", False)


class CompactedWriter:
    """Sends updates over KEYS keys (TOMBSTONE_SHARE tombstones) to TOPIC, one at a time, at
    most RATE a second, to the key's queue; rides out faults and records every send."""

    def __init__(self, namesrv_addrs: str, group: str, seed: int) -> None:
        from tidemq.client import Producer

        self.group = group
        self.producer = Producer(namesrv_addrs, send_timeout=5.0, route_refresh_s=1.0)
        self.writes: list[Write] = []
        self._seed = seed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="chaos-compacted-writer")

    def start(self) -> CompactedWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(30)
        self.producer.close()

    def _write(self) -> None:
        import random

        from tidemq.client import Message, SendStatus
        from tidemq.client.message import MessageQueue
        from tidemq.common.errors import TideMQError

        rng = random.Random(self._seed ^ 0xC0C0)
        sequence = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            key = rng.randrange(KEYS)
            tombstone = rng.random() < TOMBSTONE_SHARE
            body = body_of(key, sequence, tombstone)
            message = Message(TOPIC, body, keys=[f"key-{key}"],
                              properties={"KAFKA_VALUE": "null"} if tombstone else {})
            offset = None
            try:
                result = self.producer.send_batch(
                    [message], queue=MessageQueue(TOPIC, self.group, key % QUEUES))[0]
                if result.status is SendStatus.SEND_OK:
                    offset = result.queue_offset
            except TideMQError:
                pass
            self.writes.append(Write(sequence, key, body, tombstone, offset))
            sequence += 1
            next_at = max(next_at + 1 / RATE, time.monotonic() - 1)
            self._stop.wait(max(0.0, next_at - time.monotonic()))   # the rate, not a sync


def create_topic(group) -> None:
    """The compacted topic, defined as admins do, and routed."""
    from tidemq.client.routes import NameServerClient
    from tidemq.configclient.topics import TopicDefinitions

    from tests.support.processes import wait_until

    with group._config() as config:
        TopicDefinitions(config).create(TOPIC, QUEUES, config={
            "cleanup.policy": "compact", "min.compaction.lag.ms": 0,
            "delete.retention.ms": TOMBSTONE_KEPT_MS})
    client = NameServerClient(group.namesrv_addrs)

    def routed() -> bool:
        try:
            return bool(client.route(TOPIC).queues)
        except Exception:
            return False

    wait_until(routed, 60, interval=0.1, message=f"a route for {TOPIC}")


def replica_records(addr: str) -> dict[tuple[int, int], bytes] | None:
    """(queue id, offset) -> body of every record one replica serves of TOPIC (a Pull to that
    replica, slave or master); None if it does not answer."""
    from tidemq.common import errors, record
    from tidemq.common.rpc import RpcClient
    from tidemq.v1 import broker_pb2, broker_pb2_grpc

    client = RpcClient(addr, broker_pb2_grpc.BrokerServiceStub, timeout=5, retries=0)
    found: dict[tuple[int, int], bytes] = {}
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            try:
                reply = client.call("Pull", broker_pb2.PullRequest(
                    consumer_group="chaos-compacted-check", topic=TOPIC, queue_id=queue_id,
                    queue_offset=offset, max_messages=64))
            except errors.TideMQError:
                return None
            if reply.status == broker_pb2.FOUND:
                for rec in record.iter_records(reply.records):
                    found[(queue_id, rec.queue_offset)] = bytes(rec.body)
            elif reply.status != broker_pb2.NO_MATCHED_MSG:
                break
            if reply.next_begin_offset <= offset:
                break
            offset = reply.next_begin_offset
    return found


def served_by(group) -> dict[str, dict[tuple[int, int], bytes] | None]:
    return {f"replica-{r.replica_id}": replica_records(r.process.addr) for r in group.replicas}


def verify(group, writer: CompactedWriter, poll) -> CompactedVerdict:
    """After the faults (the writer stopped, the replicas converged): wait until compaction
    caught up on every replica (`poll(condition, timeout)`: whether it held in time; judged
    either way), then judge what each serves."""
    writer.stop()
    latest: dict = {}

    def caught_up() -> bool:
        latest.update(served_by(group))
        return settled(latest)

    poll(caught_up, SETTLE_TIMEOUT_S)
    return check_compacted(writer.writes, latest)
