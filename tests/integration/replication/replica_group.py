"""One 3-replica group "broker-r" serving topic "replicated", and what the replica-group tests
ask of it: the controller's recorded state, the in-sync set, a direct broker call."""

from __future__ import annotations

import json
import threading

import grpc
from tidemq.client import Message, Producer
from tidemq.client.message import MessageQueue, SendStatus
from tidemq.common import record
from tidemq.common.kv import EventType
from tidemq.common.rpc import RpcClient
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from tests.support.cluster import (
    ReplicaGroup,
    create_topic_in_config_center,
    start_replica_group,
    wait_for_route,
)
from tests.support.processes import wait_until

TOPIC = "replicated"
GROUP = "broker-r"


def group_state(cluster) -> dict | None:
    with ConfigClient(cluster.config_center.addr) as client:
        kv = client.get(group_key(GROUP))
    return json.loads(kv.value) if kv else None


def start_group(cluster, **options) -> ReplicaGroup:
    group = start_replica_group(cluster.start, cluster, GROUP, **options)
    create_topic_in_config_center(cluster, TOPIC, 2)
    wait_for_route(cluster, TOPIC, 1)
    group.wait_master()
    return group


def wait_in_sync(cluster, members: set[int], timeout: float = 30.0) -> None:
    wait_until(lambda: (state := group_state(cluster)) is not None
               and set(state["in_sync"]) == members, timeout, interval=0.1,
               message=f"in-sync set {sorted(members)}")


def produce(cluster, first: int, count: int, repeat: int = 40) -> dict[tuple[int, int], bytes]:
    """`count` acknowledged (SEND_OK) messages over both queues, in batches of 10 (bodies of
    11 x `repeat` bytes): (queue, offset) -> body."""
    acked = {}
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        for n in range(first, first + count, 10):
            batch = [Message(TOPIC, f"copy-{m:06d}".encode() * repeat)
                     for m in range(n, n + 10)]
            results = producer.send_batch(batch, queue=MessageQueue(TOPIC, GROUP, n // 10 % 2))
            for message, result in zip(batch, results, strict=True):
                assert result.status == SendStatus.SEND_OK
                acked[(result.queue_id, result.queue_offset)] = message.body
    return acked


def read_all(addr: str) -> dict[tuple[int, int], bytes]:
    """Every message a replica serves of both queues: (queue, offset) -> body."""
    found = {}
    for queue_id in (0, 1):
        offset = 0
        while True:
            reply = broker_call(addr, "Pull", broker_pb2.PullRequest(
                consumer_group="copy-check", topic=TOPIC, queue_id=queue_id,
                queue_offset=offset, max_messages=64))
            if reply.status != broker_pb2.FOUND:
                break
            for rec in record.iter_records(reply.records):
                found[(queue_id, rec.queue_offset)] = bytes(rec.body)
                offset = rec.queue_offset + 1
    return found


def lost(acked: dict, found: dict) -> list:
    return sorted(key for key, body in acked.items() if found.get(key) != body)


def broker_call(addr: str, method: str, request):
    return RpcClient(addr, broker_pb2_grpc.BrokerServiceStub, timeout=5, retries=0).call(
        method, request)


class GroupObserver:
    """Everything a test must see of a group while a sequence runs, not only at its end: every
    state the controller wrote to the group key (a config-center watch from a revision, so no
    write is missed however briefly it stood) and, polled in a background thread, the role and
    epoch each replica reports (GetBrokerInfo). `never_master(r)` makes `check()` — called from
    the test's own waits and at the end — fail as soon as replica r was elected or served as
    master, naming the epoch."""

    def __init__(self, cluster, group: ReplicaGroup, *, poll_s: float = 0.05) -> None:
        self.group, self.poll_s = group, poll_s
        self.client = ConfigClient(cluster.config_center.addr)
        self.states: list[tuple[int, dict]] = []           # (revision, group state)
        self.roles: list[tuple[int, str, int]] = []        # (replica, role, epoch) as polled
        self._forbidden: dict[int, int] = {}              # replica -> epochs above this one
        self._stop = threading.Event()
        self._lock = threading.Lock()
        start = self.client.range(group_key(GROUP)).revision + 1
        self._watch = self.client.watch(group_key(GROUP), start_revision=start)
        self._threads = [threading.Thread(target=self._follow, daemon=True),
                         threading.Thread(target=self._poll, daemon=True)]

    def __enter__(self) -> GroupObserver:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._watch.close()
        for thread in self._threads:
            thread.join(10)
        self.client.close()

    def never_master(self, replica: int) -> None:
        """From now on `replica` must never be master: not in the group key at any epoch
        above the current one, nor by its own report."""
        state = group_state_of(self.client)
        with self._lock:
            self._forbidden[replica] = state["epoch"] if state else 0

    def check(self) -> bool:
        """Raise AssertionError if a forbidden replica was master; True otherwise (usable in a
        wait_until predicate: `lambda: observer.check() and ...`)."""
        with self._lock:
            forbidden = dict(self._forbidden)
            states, roles = list(self.states), list(self.roles)
        for replica, floor in forbidden.items():
            for revision, state in states:
                if state["master"] == replica and state["epoch"] > floor:
                    raise AssertionError(f"wiped replica elected at epoch {state['epoch']} "
                                         f"(group key revision {revision}: {state})")
            for seen, role, epoch in roles:
                if seen == replica and role == "MASTER" and epoch > floor:
                    raise AssertionError(f"wiped replica served as master at epoch {epoch}")
        return True

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                event = self._watch.poll(0.2)
            except StopIteration:
                return
            if event is not None and event.type == EventType.PUT:
                with self._lock:
                    self.states.append((event.revision, json.loads(event.kv.value)))

    def _poll(self) -> None:
        # Plain channels, not RpcClient: polling a replica while it is down must not open the
        # circuit breaker this test process keeps for its address (the test's own calls would
        # then fail fast).
        channels: dict[int, grpc.Channel] = {}
        try:
            while not self._stop.wait(self.poll_s):
                with self._lock:
                    watched = list(self._forbidden)
                for replica in watched:
                    process = self.group.replicas[replica]
                    if process.proc is None or process.proc.poll() is not None:
                        continue
                    channel = channels.setdefault(replica, grpc.insecure_channel(process.addr))
                    try:
                        info = broker_pb2_grpc.BrokerServiceStub(channel).GetBrokerInfo(
                            broker_pb2.GetBrokerInfoRequest(), timeout=1.0)
                    except grpc.RpcError:
                        continue
                    with self._lock:
                        self.roles.append((replica, info.role, info.epoch))
        finally:
            for channel in channels.values():
                channel.close()


def group_state_of(client: ConfigClient) -> dict | None:
    kv = client.get(group_key(GROUP))
    return json.loads(kv.value) if kv else None
