"""Read-only snapshots of groups for DescribeGroup / ListGroups (admin tools, the gateway)."""

from __future__ import annotations

from dataclasses import dataclass

from .group import GroupMetadata
from .state import GroupState


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes  # for the group's chosen protocol (b"" before the first generation)
    assignment: bytes  # b"" until the member's first SyncGroup completes
    client_software: str = ""  # a Kafka client's "name version" (ApiVersions v3+)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: GroupState
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    state: GroupState
    protocol_type: str


def describe(group: GroupMetadata) -> GroupDescription:
    """Snapshot of `group`; call with its lock held."""
    protocol = group.protocol_name
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata_for(protocol) if protocol in m.protocol_names else b"",
            assignment=m.assignment or b"",
            client_software=m.client_software,
        )
        for m in group.members.values()
    )
    return GroupDescription(
        group_id=group.group_id,
        state=group.state,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type or "",
        protocol_name=protocol or "",
        leader_id=group.leader_id or "",
        members=members,
    )
