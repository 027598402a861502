"""One consumer's membership in a group, and the answers the coordinator gives it."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from . import errors
from .errors import CoordinatorError

UNKNOWN_MEMBER_ID = ""
"""The member id a consumer sends on its very first JoinGroup (Kafka's UNKNOWN_MEMBER_ID)."""

Protocol = tuple[str, bytes]
"""(assignment strategy name, subscription metadata) as offered in a JoinGroup, in preference
order; the metadata is opaque to the coordinator and handed to the leader verbatim."""


def checked_protocols(protocol_type: str, protocols: Sequence[Protocol]) -> list[Protocol]:
    """Validate before a group is created, so a bad join leaves nothing behind."""
    if not protocol_type or not protocols:
        raise CoordinatorError(
            errors.INCONSISTENT_GROUP_PROTOCOL,
            "a JoinGroup needs a protocol type and at least one (name, metadata) protocol",
        )
    checked: list[Protocol] = []
    for name, metadata in protocols:
        if not isinstance(name, str) or not name:
            raise CoordinatorError(
                errors.INCONSISTENT_GROUP_PROTOCOL, f"protocol name {name!r} is not a name"
            )
        if not isinstance(metadata, bytes | bytearray | memoryview):
            raise CoordinatorError(
                errors.INCONSISTENT_GROUP_PROTOCOL,
                f"metadata of protocol {name!r} must be bytes, not {type(metadata).__name__}",
            )
        checked.append((name, bytes(metadata)))
    if len({name for name, _ in checked}) != len(checked):
        raise CoordinatorError(
            errors.INCONSISTENT_GROUP_PROTOCOL, "a protocol name is offered twice in one JoinGroup"
        )
    return checked


@dataclass(frozen=True)
class JoinedMember:
    """A member as the leader sees it: id plus its metadata for the chosen protocol."""

    member_id: str
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """The JoinGroup answer. `members` is filled for the leader only (it computes assignments)."""

    group_id: str
    member_id: str
    generation_id: int
    leader_id: str
    protocol_type: str
    protocol_name: str
    members: tuple[JoinedMember, ...] = ()

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


@dataclass(frozen=True)
class SyncResult:
    """The SyncGroup answer: this member's assignment (opaque bytes chosen by the leader)."""

    group_id: str
    member_id: str
    generation_id: int
    protocol_name: str
    assignment: bytes


@dataclass
class MemberMetadata:
    """Coordinator-side state of one member. Mutated only under its group's lock."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    last_heartbeat_ms: int
    assignment: bytes | None = None
    client_software: str = ""   # "name version" of a Kafka client (ApiVersions v3+), else ""
    join_future: Future | None = field(default=None, repr=False)
    sync_future: Future | None = field(default=None, repr=False)

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return list(protocols) == self.protocols

    def metadata_for(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def should_keep_alive(self, now_ms: int) -> bool:
        """A member blocked in JoinGroup is alive (the delayed join bounds its wait); one
        blocked in SyncGroup gets the rebalance timeout; otherwise heartbeats must arrive
        within the session timeout."""
        if self.awaiting_join:
            return True
        if self.awaiting_sync:
            return self.last_heartbeat_ms + self.rebalance_timeout_ms > now_ms
        return self.last_heartbeat_ms + self.session_timeout_ms > now_ms
