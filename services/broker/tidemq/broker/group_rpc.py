"""The group-coordinator RPCs of BrokerService: proto <-> `GroupCoordinator`, nothing else.

JoinGroup and SyncGroup are coroutines awaiting the coordinator's futures for the call's
remaining deadline (no thread is held through a rebalance); a deadline that passes first, or a
caller that goes away, cancels the future (the coordinator ignores cancelled futures) and a
passed deadline answers DEADLINE_EXCEEDED. Coordinator errors are TideMQErrors: the server
runtime maps them to a gRPC status plus the `tidemq-code` trailer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future

from tidemq.broker import metrics
from tidemq.broker.coordinator import REBALANCE_REASONS, CoordinatorTicker, GroupCoordinator
from tidemq.broker.coordinator.handover import GroupHandover, MemberHandover
from tidemq.broker.coordinator.views import GroupDescription
from tidemq.common.errors import DeadlineExceeded
from tidemq.common.logs import get_logger
from tidemq.v1 import broker_pb2

NO_DEADLINE_WAIT_S = 300.0  # a call without a deadline still must not wait forever

log = get_logger(__name__)
for _reason in REBALANCE_REASONS:
    metrics.GROUP_REBALANCES.labels(_reason)   # zero-valued series exist from the start


def rebalance_started(group_id: str, reason: str, member_id: str) -> None:
    """The coordinator's `on_rebalance`: why each rebalance starts, counted and logged (a
    rebalance nobody expected is told by its reason and the member that caused it)."""
    metrics.GROUP_REBALANCES.labels(reason).inc()
    log.info("group_rebalance_started", group=group_id, reason=reason, member=member_id)


async def _wait(future: Future, context, what: str):
    remaining = context.time_remaining() if context is not None else None
    timeout = NO_DEADLINE_WAIT_S if remaining is None else max(0.0, remaining)
    try:  # cancelling the wrapper (timeout, or the caller left) cancels `future`
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
    except TimeoutError:
        raise DeadlineExceeded(
            f"{what} did not complete before the call's deadline ({timeout:.1f} s); "
            "give JoinGroup a deadline longer than the rebalance timeout plus the initial delay"
        ) from None


def describe_pb(description: GroupDescription) -> broker_pb2.DescribeGroupResponse:
    return broker_pb2.DescribeGroupResponse(
        group_id=description.group_id, state=str(description.state),
        protocol_name=description.protocol_name, generation_id=description.generation_id,
        leader_id=description.leader_id,
        members=[broker_pb2.GroupMemberDescription(
            member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
            metadata=m.metadata, assignment=m.assignment,
            client_software=m.client_software) for m in description.members],
    )


def handovers_pb(handovers: list[GroupHandover]) -> list[broker_pb2.GroupHandover]:
    return [broker_pb2.GroupHandover(
        group_id=h.group_id, generation_id=h.generation_id, protocol_type=h.protocol_type,
        protocol_name=h.protocol_name, leader_id=h.leader_id,
        members=[broker_pb2.MemberHandover(
            member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocols=[broker_pb2.GroupProtocol(name=n, metadata=d) for n, d in m.protocols],
            assignment=m.assignment, client_software=m.client_software)
            for m in h.members]) for h in handovers]


def handovers_from_pb(groups) -> list[GroupHandover]:
    return [GroupHandover(
        g.group_id, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
        tuple(MemberHandover(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                             m.rebalance_timeout_ms,
                             tuple((p.name, bytes(p.metadata)) for p in m.protocols),
                             bytes(m.assignment), m.client_software)
                             for m in g.members)) for g in groups]


class GroupRpc:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup/DescribeGroup for the servicer (ListGroups
    merges the coordinator's groups with the pop and offset groups: group_listing.py),
    plus the ticker that fires the coordinator's timers (`start()` / `stop()`)."""

    def __init__(self, coordinator: GroupCoordinator, tick_interval_ms: int = 100, *,
                 admit: Callable[[str], None] = lambda group: None) -> None:
        self.coordinator = coordinator
        self._admit = admit  # raises when the group may not consume (its definition says so)
        self._tick_interval_ms = tick_interval_ms
        self._ticker: CoordinatorTicker | None = None

    def start(self) -> GroupRpc:
        if self._ticker is None:
            self._ticker = CoordinatorTicker(self.coordinator, self._tick_interval_ms).start()
        return self

    def stop(self) -> None:
        """Waiting joins/syncs fail with NOT_COORDINATOR; timers stop."""
        self.coordinator.unload_all()
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    async def JoinGroup(self, request, context):
        self._admit(request.group_id)
        future = self.coordinator.join_group(
            request.group_id, request.member_id,
            [(p.name, p.metadata) for p in request.protocols],
            session_timeout_ms=request.session_timeout_ms or None,
            rebalance_timeout_ms=request.rebalance_timeout_ms or None,
            client_id=request.client_id, client_host=request.client_host or _peer_host(context),
            client_software=request.client_software,
        )
        result = await _wait(future, context, "JoinGroup")
        return broker_pb2.JoinGroupResponse(
            generation_id=result.generation_id, protocol_name=result.protocol_name,
            leader_id=result.leader_id, member_id=result.member_id,
            members=[broker_pb2.JoinGroupMember(member_id=m.member_id, metadata=m.metadata)
                     for m in result.members],
        )

    async def SyncGroup(self, request, context):
        future = self.coordinator.sync_group(
            request.group_id, request.member_id, request.generation_id,
            {a.member_id: a.assignment for a in request.assignments},
        )
        return broker_pb2.SyncGroupResponse(
            assignment=(await _wait(future, context, "SyncGroup")).assignment)

    def Heartbeat(self, request, context):
        self.coordinator.heartbeat(request.group_id, request.member_id, request.generation_id)
        return broker_pb2.HeartbeatResponse()

    def LeaveGroup(self, request, context):
        self.coordinator.leave_group(request.group_id, request.member_id)
        return broker_pb2.LeaveGroupResponse()

    def DescribeGroup(self, request, context):
        return describe_pb(self.coordinator.describe_group(request.group_id))


def _peer_host(context) -> str:
    """'ipv4:127.0.0.1:5555' -> '127.0.0.1' (best effort; the client may send its own)."""
    peer = context.peer() if context is not None else ""
    parts = peer.split(":")
    return ":".join(parts[1:-1]) if len(parts) > 2 else peer
