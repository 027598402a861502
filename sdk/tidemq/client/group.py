"""Group membership for a CLUSTERING consumer (Kafka's consumer protocol, eager; see
docs/consumer-groups.md).

One thread runs the member's life: find the coordinator (CRC32 placement over the broker
group names), JoinGroup, the leader computes everyone's queues with the shared assignor,
SyncGroup, then heartbeats. Any sign that the generation is over (REBALANCE_IN_PROGRESS,
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, or no heartbeat answered for a session timeout) revokes
*all* queues first — the consumer stops pulling them and commits — and then rejoins. A lost
coordinator alone does not: with replication its group's new master takes the group over
(members, generation, assignments), so the member finds it and carries on. Revoking before
rejoining means two members never consume the same queue at once after a clean handover, and
committed offsets never move backwards because of a stale owner.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from typing import Any

from tidemq.client.brokers import default_client_id
from tidemq.client.message import MessageQueue
from tidemq.client.routes import MASTER_ID, NameServerClient, RouteCache
from tidemq.common import errors
from tidemq.common.assignors import DEFAULT_ASSIGNOR, QueueRef, get_assignor
from tidemq.common.channel import BrokerChannel, BrokerChannels
from tidemq.common.logs import get_logger
from tidemq.common.placement import coordinator_for
from tidemq.common.protocol import (
    assign_subscriptions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tidemq.v1 import broker_pb2

log = get_logger(__name__)

REJOIN = {"REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"}
JOIN_DEADLINE_MARGIN_S = 5.0  # Kafka adds 5 s to the rebalance timeout for the JoinGroup call
INITIAL_DELAY_ALLOWANCE_S = 3.0  # the coordinator's initial rebalance delay (ref)


class DirectClient(BrokerChannel):
    """A broker channel without a circuit breaker or retries.

    Why: long polls and JoinGroups parked in a rebalance legitimately run to their deadline,
    which a breaker would count as transport failures; `start` gives a cancellable future so
    shutdown can end a parked call at once.

    `client_id`: sent with every call, as every SDK client's (docs/quotas.md); '' =
    `<host>@<pid>`.
    """

    def __init__(self, addr: str, timeout: float = 3.0, client_id: str = "") -> None:
        super().__init__(addr, timeout=timeout, guarded=False, retries=0)
        self.client_id = client_id or default_client_id()


class DirectClients(BrokerChannels):
    """`BrokerClients`-compatible pool of DirectClient (plugs into PullConsumer.brokers)."""

    def __init__(self, timeout: float = 3.0, client_id: str = "") -> None:
        super().__init__(timeout=timeout, guarded=False, retries=0,
                         client_id=client_id or default_client_id())
        self._timeout = timeout

    def _make(self, addr: str) -> DirectClient:
        return DirectClient(addr, self._timeout, self.client_id)


QueuesCallback = Callable[[list[MessageQueue]], None]


class GroupMember:
    """Keeps this process in `group` and tells the consumer which queues it owns.

    `on_assigned(queues)` runs after every successful SyncGroup with the full new set;
    `on_revoked(queues)` runs before every rejoin and at `stop()` with the set being given up.
    """

    def __init__(self, namesrv: NameServerClient, routes: RouteCache, brokers: DirectClients,
                 group: str, topics: Sequence[str], *, on_assigned: QueuesCallback,
                 on_revoked: QueuesCallback, strategy: str = DEFAULT_ASSIGNOR,
                 session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
                 rebalance_timeout_ms: int = 0, client_id: str = "") -> None:
        get_assignor(strategy)  # UNKNOWN_ASSIGNOR now, not in the first rebalance
        self.namesrv, self.routes, self.brokers = namesrv, routes, brokers
        self.group, self.topics, self.strategy = group, sorted(set(topics)), strategy
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.rebalance_timeout_ms = rebalance_timeout_ms or session_timeout_ms
        self.client_id = client_id or f"{socket.gethostname()}@{os.getpid()}"
        self.on_assigned, self.on_revoked = on_assigned, on_revoked
        self.member_id = ""
        self.generation_id = -1
        self.is_leader = False
        self.assignment: list[MessageQueue] = []
        self.coordinator_addr = ""
        self._leader_view: dict[str, list[QueueRef]] = {}
        self._wanted: list[str] = []  # every subscribed topic, routed or not (yet)
        self._stopping = threading.Event()
        self._stable = threading.Event()
        self._inflight: Future | None = None
        self._last_heartbeat_ok = 0.0  # monotonic time of the last answered heartbeat
        self.last_error_code = ""  # why the member last had to rejoin (for tests and logs)
        self._thread = threading.Thread(target=self._run, name=f"group-{group}", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def wait_stable(self, timeout: float) -> bool:
        """True once this member holds an assignment of the current generation."""
        return self._stable.wait(timeout)

    def stop(self, leave: bool = True) -> None:
        """Revoke (commit) everything, then LeaveGroup so the others rebalance at once."""
        self._stopping.set()
        inflight = self._inflight
        if inflight is not None:
            inflight.cancel()  # a JoinGroup/SyncGroup parked in a rebalance
        self._thread.join(self.rebalance_timeout_ms / 1000 + 10)
        self._revoke_all()
        if leave and self.member_id and self.coordinator_addr:
            try:
                self._coordinator().call("LeaveGroup", broker_pb2.LeaveGroupRequest(
                    group_id=self.group, member_id=self.member_id))
            except errors.TideMQError as exc:
                log.info("leave_group_failed", group=self.group, error=str(exc))

    # ------------------------------------------------------------------ the member's life

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                if not self._stable.is_set():
                    self._join_and_sync()
                backoff = 0.1
                self._heartbeat_until_rejoin()
                self._end_generation()  # the leader saw the routes change: rejoin
            except errors.TideMQError as exc:
                self._on_error(exc)
                if not self._may_keep_assignment(exc):
                    self._end_generation()
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception:  # never let the membership thread die silently
                log.exception("group_member_failed", group=self.group)
                self._end_generation()
                self._stopping.wait(1.0)

    def _end_generation(self) -> None:
        self._stable.clear()
        self._revoke_all()

    def _may_keep_assignment(self, exc: errors.TideMQError) -> bool:
        """A lost coordinator (dead, deposed, or being elected) does not end the generation:
        a promoted replica took the group over with its members and assignments, so the member
        keeps its queues and heartbeats to whoever coordinates now. It gives them up when the
        coordinator says the generation is over, or once a whole session timeout has passed
        without a heartbeat answered (by then the group may have rebalanced without it)."""
        if not self._stable.is_set() or exc.code in REJOIN or exc.code == "UNKNOWN_MEMBER_ID":
            return False
        quiet_s = time.monotonic() - self._last_heartbeat_ok
        return quiet_s < self.session_timeout_ms / 1000

    def _on_error(self, exc: errors.TideMQError) -> None:
        self.last_error_code = exc.code
        log.info("group_rejoin", group=self.group, code=exc.code, error=exc.message)
        if exc.code == "UNKNOWN_MEMBER_ID":
            self.member_id = ""
        elif exc.code not in REJOIN:  # coordinator moved, down, or not answering
            self.coordinator_addr = ""

    def _join_and_sync(self) -> None:
        subscription = encode_subscription(self.topics)
        join_deadline = (self.rebalance_timeout_ms / 1000 + INITIAL_DELAY_ALLOWANCE_S
                         + JOIN_DEADLINE_MARGIN_S)
        joined = self._blocking_call("JoinGroup", broker_pb2.JoinGroupRequest(
            group_id=self.group, member_id=self.member_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, client_id=self.client_id,
            protocols=[broker_pb2.GroupProtocol(name=self.strategy, metadata=subscription)],
        ), timeout=join_deadline)
        self.member_id, self.generation_id = joined.member_id, joined.generation_id
        self.is_leader = joined.leader_id == joined.member_id
        assignments = []
        if self.is_leader:
            plan = self._leader_assignment(joined.protocol_name, joined.members)
            assignments = [broker_pb2.MemberAssignment(member_id=m, assignment=a)
                           for m, a in plan.items()]
        synced = self._blocking_call("SyncGroup", broker_pb2.SyncGroupRequest(
            group_id=self.group, generation_id=self.generation_id, member_id=self.member_id,
            assignments=assignments), timeout=self.rebalance_timeout_ms / 1000 + 5)
        queues = [MessageQueue(t, b, q) for t, b, q in decode_assignment(synced.assignment)]
        self.assignment = queues
        log.info("group_assigned", group=self.group, member=self.member_id,
                 generation=self.generation_id, leader=self.is_leader, queues=len(queues))
        self.on_assigned(list(queues))
        self._last_heartbeat_ok = time.monotonic()
        self._stable.set()

    def _leader_assignment(self, strategy: str, members) -> dict[str, bytes]:
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        self._wanted = sorted({t for topics in subscriptions.values() for t in topics})
        self._leader_view = self._topic_queues(self._wanted)
        previous = self._previous_assignment() if strategy == "sticky" else None
        plan = assign_subscriptions(strategy, self._leader_view, subscriptions, previous)
        return {member: encode_assignment(rows) for member, rows in plan.items()}

    def _previous_assignment(self) -> dict[str, list] | None:
        """Last generation's queues per member, as the coordinator still holds them (it keeps
        them until the next SyncGroup): what the sticky strategy preserves."""
        try:
            described = self._coordinator().call("DescribeGroup", broker_pb2.DescribeGroupRequest(
                group_id=self.group))
            return {m.member_id: decode_assignment(m.assignment) for m in described.members}
        except errors.TideMQError as exc:  # sticky without history is still a valid plan
            log.info("previous_assignment_unavailable", group=self.group, error=str(exc))
            return None

    def _topic_queues(self, topics: Sequence[str]) -> dict[str, list[QueueRef]]:
        view: dict[str, list[QueueRef]] = {}
        for topic in topics:
            try:
                route = self.routes.refresh(topic)
            except errors.TopicNotExist:
                continue
            view[topic] = [QueueRef(mq.broker_name, mq.queue_id) for mq in route.read_queues()]
        return view

    def _heartbeat_until_rejoin(self) -> None:
        """Heartbeat until the coordinator says the generation is over (raises) or stop."""
        request = broker_pb2.HeartbeatRequest(group_id=self.group, member_id=self.member_id,
                                              generation_id=self.generation_id)
        while not self._stopping.wait(self.heartbeat_interval_s):
            self._coordinator().call("Heartbeat", request)
            self._last_heartbeat_ok = time.monotonic()
            if self.is_leader and self._topic_queues(self._wanted) != self._leader_view:
                log.info("group_route_changed", group=self.group)
                return  # the leader rejoins: the coordinator starts a new round for everyone

    def _revoke_all(self) -> None:
        revoked, self.assignment = self.assignment, []
        if revoked:
            self.on_revoked(revoked)

    # ------------------------------------------------------------------ coordinator

    def _blocking_call(self, method: str, request: Any, timeout: float) -> Any:
        """A call that may wait for a whole rebalance; `stop()` cancels it."""
        future = self._coordinator().start(method, request, timeout=timeout)
        self._inflight = future
        try:
            if self._stopping.is_set():
                future.cancel()
            return future.result()
        except CancelledError:
            raise errors.ServiceUnavailable(f"{method} cancelled: the consumer is stopping",
                                            code="CONSUMER_STOPPING") from None
        finally:
            self._inflight = None

    def _coordinator(self) -> DirectClient:
        if not self.coordinator_addr:
            self.coordinator_addr = self.find_coordinator()
        return self.brokers.get(self.coordinator_addr)

    def find_coordinator(self) -> str:
        """Address of the master of the broker group that coordinates this group (placement.py
        rule over every registered broker group). A group whose master is being elected is
        waited for, not replaced: its new master takes the group over (COORDINATOR_NOT_AVAILABLE
        until then), so a failover moves no group to another coordinator."""
        info = self.namesrv.cluster_info()
        groups = {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()
                  if data.broker_addrs}
        chosen = coordinator_for(self.group, groups)
        master = groups[chosen].get(MASTER_ID, "")
        if not master:
            raise errors.ServiceUnavailable(
                f"broker group {chosen!r}, which coordinates {self.group!r}, has no master "
                "right now (an election is under way)", code="COORDINATOR_NOT_AVAILABLE")
        return master
