"""Generation-fenced offset commits (Kafka's OffsetCommit checks; docs/consumer-groups.md).

A CommitOffsets that names a generation (>= 0) and a member is accepted only if that member is
in the group at that generation, as Kafka's coordinator checks it: an unknown member is
UNKNOWN_MEMBER_ID, another generation ILLEGAL_GENERATION, a group waiting for its leader's
SyncGroup (CompletingRebalance) REBALANCE_IN_PROGRESS; a group preparing a rebalance still
takes its current generation's commits (members commit what they consumed before rejoining).
A commit with generation -1 (the SDK's own consumers, admin resets) is not checked.

Committed offsets live on the broker that owns the queue, while the group lives on its
coordinator (tidemq.common.placement). When this broker coordinates the group, the check and
the commit happen under the group's lock, so no rebalance comes between them. Otherwise this
broker asks the coordinator (its DescribeGroup) and commits on its answer: a rebalance that
completes within that round trip is the one window left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidemq.broker.coordinator import GroupCoordinator, GroupState, coordinator_for
from tidemq.broker.coordinator.views import GroupDescription, MemberDescription
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.rpc import RpcClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc, nameserver_pb2, nameserver_pb2_grpc

log = get_logger(__name__)

MASTERS_TTL_S = 5.0    # the broker groups' masters, as the name servers list them, kept this long


def check_member(group: GroupDescription, member_id: str, generation_id: int) -> None:
    """Raise Kafka's error for a commit `member_id` may not make at `generation_id`."""
    members = {m.member_id for m in group.members}
    if group.state in (GroupState.DEAD, GroupState.EMPTY) or member_id not in members:
        raise errors.NotFound(f"member {member_id!r} is not in group {group.group_id!r}: "
                              f"rejoin", code="UNKNOWN_MEMBER_ID")
    if generation_id != group.generation_id:
        raise errors.Conflict(f"generation {generation_id} is stale: group {group.group_id} "
                              f"is at generation {group.generation_id}; rejoin",
                              code="ILLEGAL_GENERATION")
    if group.state is GroupState.COMPLETING_REBALANCE:
        raise errors.Conflict(f"group {group.group_id} is completing a rebalance",
                              code="REBALANCE_IN_PROGRESS")


class CommitFence:
    def __init__(self, broker_name: str, coordinator: GroupCoordinator | None,
                 name_servers: list[str], timeout_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_name = broker_name
        self.coordinator = coordinator
        self.timeout_s = timeout_s
        self.clock = clock
        self._namesrv = [RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub,
                                   timeout=timeout_s) for addr in name_servers]
        self._brokers: dict[str, RpcClient] = {}
        self._masters: dict[str, str] = {}   # broker group -> master address
        self._masters_at = float("-inf")
        self._lock = threading.Lock()

    def commit(self, group_id: str, generation_id: int, member_id: str,
               commit: Callable[[], None]) -> None:
        """Run `commit` if the member may commit at that generation (module docstring)."""
        if generation_id < 0:
            commit()
            return
        coordinator_name, addr = self._coordinator_of(group_id)
        if coordinator_name == self.broker_name and self.coordinator is not None:
            def checked(group: GroupDescription) -> None:
                check_member(group, member_id, generation_id)
                commit()
            self.coordinator.under_group_lock(group_id, checked)
            return
        check_member(self._describe_remote(group_id, addr), member_id, generation_id)
        commit()

    # -- where the group lives -------------------------------------------------------------

    def _coordinator_of(self, group_id: str) -> tuple[str, str]:
        masters = self._current_masters()
        name = coordinator_for(group_id, masters)
        return name, masters[name]

    def _current_masters(self, refresh: bool = False) -> dict[str, str]:
        with self._lock:
            if not refresh and self._masters and \
                    self.clock() - self._masters_at < MASTERS_TTL_S:
                return self._masters
        last: errors.TideMQError | None = None
        for client in self._namesrv:
            try:
                info = client.call("GetClusterInfo", nameserver_pb2.GetClusterInfoRequest(),
                                   idempotent=True)
            except errors.TideMQError as exc:
                last = exc
                continue
            masters = {name: data.broker_addrs[0]
                       for name, data in info.broker_addr_table.items()
                       if data.broker_addrs and data.broker_addrs.get(0)}
            with self._lock:
                self._masters, self._masters_at = masters, self.clock()
            return masters
        raise errors.ServiceUnavailable(
            f"no name server answered, so the coordinator of a group is unknown: {last}",
            code="COORDINATOR_NOT_AVAILABLE")

    def _describe_remote(self, group_id: str, addr: str) -> GroupDescription:
        client = self._brokers.get(addr)
        if client is None:
            client = self._brokers[addr] = RpcClient(addr, broker_pb2_grpc.BrokerServiceStub,
                                                     timeout=self.timeout_s)
        try:
            reply = client.call("DescribeGroup",
                                broker_pb2.DescribeGroupRequest(group_id=group_id),
                                idempotent=True)
        except errors.TideMQError as exc:
            self._current_masters(refresh=True)
            raise errors.ServiceUnavailable(
                f"the coordinator of {group_id!r} ({addr}) did not answer: {exc.message}",
                code="COORDINATOR_NOT_AVAILABLE") from None
        return GroupDescription(
            reply.group_id, GroupState(reply.state) if reply.state else GroupState.DEAD,
            reply.generation_id, "", reply.protocol_name, reply.leader_id,
            tuple(MemberDescription(m.member_id, m.client_id, m.client_host, b"", b"")
                  for m in reply.members))
