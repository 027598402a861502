"""What a replica needs to take over group coordination from its master (Kafka keeps the same
in `__consumer_offsets`): every Stable group's generation, protocol, leader, and members with
their subscriptions and assignments.

A slave copies the master's `GroupHandover` list about every second (with the offsets); when
it is promoted it adopts them, so members that find the new master keep their member id,
generation and assignment: no rebalance, no revoked queues. A group that was rebalancing is
not handed over (its members were about to rejoin anyway), nor a generation completed after
the last copy: those members get ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID and rejoin, which is
the protocol's ordinary recovery.
"""

from __future__ import annotations

from dataclasses import dataclass

from .group import GroupMetadata
from .member import MemberMetadata, Protocol
from .state import GroupState


@dataclass(frozen=True)
class MemberHandover:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[Protocol, ...]
    assignment: bytes
    client_software: str = ""


@dataclass(frozen=True)
class GroupHandover:
    group_id: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: tuple[MemberHandover, ...]


def handover_of(group: GroupMetadata) -> GroupHandover | None:
    """A Stable group's handover (call under its lock); None for any other state."""
    if group.state is not GroupState.STABLE:
        return None
    return GroupHandover(
        group.group_id, group.generation_id, group.protocol_type or "",
        group.protocol_name or "", group.leader_id or "",
        tuple(MemberHandover(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                             m.rebalance_timeout_ms, tuple(m.protocols), m.assignment or b"",
                             m.client_software)
              for m in group.members.values()))


def restored(handover: GroupHandover, now_ms: int, listener=None,
             on_rebalance=None) -> GroupMetadata:
    """The group as its old coordinator had it, Stable, every member's session starting now
    (they need one heartbeat interval to find this coordinator)."""
    group = GroupMetadata(handover.group_id, listener, on_rebalance)
    for m in handover.members:
        group.add(MemberMetadata(
            member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms, rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocol_type=handover.protocol_type, protocols=list(m.protocols),
            last_heartbeat_ms=now_ms, assignment=m.assignment,
            client_software=m.client_software))
    group.generation_id = handover.generation_id
    group.protocol_type = handover.protocol_type
    group.protocol_name = handover.protocol_name
    group.leader_id = handover.leader_id
    group.state = GroupState.STABLE   # restored, not a transition: no listener call
    return group
