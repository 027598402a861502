"""GroupMetadata: one group's state machine, members, generation, leader and chosen protocol.

Pure bookkeeping: it never completes futures or reads a clock; `GroupCoordinator` drives it
under the group's lock and decides when answers go out.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .member import JoinedMember, MemberMetadata, Protocol
from .state import GroupState, is_allowed_transition

TransitionListener = Callable[[str, GroupState, GroupState], None]
RebalanceListener = Callable[[str, str, str], None]
"""(group id, reason, member id): called as a rebalance starts, under the group lock."""

REBALANCE_REASONS = (
    "member_joined",      # a JoinGroup without a member id (the first one of an Empty group too)
    "leader_rejoined",    # the leader's JoinGroup in Stable, even with unchanged protocols
    "metadata_changed",   # a member rejoined with other protocols or subscription metadata
    "member_left",        # LeaveGroup
    "session_expired",    # no heartbeat within the member's session timeout
    "sync_expired",       # a member waiting for its assignment outlived the rebalance timeout
)
"""Why a group went to PreparingRebalance (tidemq_broker_group_rebalances_total{reason})."""


class IllegalStateTransition(RuntimeError):
    """A coordinator bug: a move the state table forbids. Never caused by client input."""


@dataclass
class DelayedJoin:
    """The pending end of a PreparingRebalance phase (Kafka's DelayedJoin/InitialDelayedJoin).

    A regular delayed join completes as soon as every known member has rejoined, or at
    `deadline_ms` (members that did not rejoin are then removed). The initial one, used when
    the group was Empty, completes only on its timer so a burst of starting consumers lands in
    one generation; while new members keep arriving the timer is extended by the initial delay
    until `remaining_ms` (the rest of the rebalance timeout) is used up.
    """

    deadline_ms: int
    initial: bool = False
    remaining_ms: int = 0


class GroupMetadata:
    """State of one consumer group. All access happens under `lock`."""

    def __init__(self, group_id: str, listener: TransitionListener | None = None,
                 on_rebalance: RebalanceListener | None = None) -> None:
        self.group_id = group_id
        self.lock = threading.RLock()
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.leader_id: str | None = None
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.members: dict[str, MemberMetadata] = {}  # insertion order = join order
        self.pending_join: DelayedJoin | None = None
        self.new_member_added = False
        self._listener = listener
        self._on_rebalance = on_rebalance

    def rebalance_started(self, reason: str, member_id: str) -> None:
        """Tell the rebalance listener why the group leaves its generation (one of
        REBALANCE_REASONS; `member_id` is the member whose call or expiry caused it)."""
        assert reason in REBALANCE_REASONS, reason
        if self._on_rebalance is not None:
            self._on_rebalance(self.group_id, reason, member_id)

    def transition_to(self, target: GroupState) -> None:
        if not is_allowed_transition(self.state, target):
            raise IllegalStateTransition(f"group {self.group_id}: {self.state} -> {target}")
        previous, self.state = self.state, target
        if self._listener is not None:
            self._listener(self.group_id, previous, target)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        """Add a member; the first member of a leaderless group becomes leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Drop a member; a departing leader hands over to the oldest remaining member."""
        member = self.members.pop(member_id, None)
        if member is not None and self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        if not self.members:
            self.protocol_type = None
        return member

    def candidate_protocols(self, excluding: str | None = None) -> set[str] | None:
        """Protocols every member (other than `excluding`) supports; None if there is nobody."""
        others = [m for m in self.members.values() if m.member_id != excluding]
        if not others:
            return None
        common = set(others[0].protocol_names)
        for member in others[1:]:
            common &= set(member.protocol_names)
        return common

    def supports_protocols(
        self, protocol_type: str, protocols: Sequence[Protocol], member_id: str | None = None
    ) -> bool:
        """Whether a (re)joining member shares the group's protocol type and at least one
        protocol with everyone else; otherwise INCONSISTENT_GROUP_PROTOCOL."""
        if not protocol_type or not protocols:
            return False
        others = [m for m in self.members.values() if m.member_id != member_id]
        if any(m.protocol_type != protocol_type for m in others):
            return False
        common = self.candidate_protocols(excluding=member_id)
        return common is None or any(name in common for name, _ in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the common protocols; most votes win
        (ties go to the alphabetically first, so every coordinator picks the same)."""
        common = self.candidate_protocols()
        if not common:
            raise ValueError(f"group {self.group_id} has no common protocol")
        votes = Counter(member.vote(common) for member in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def init_next_generation(self) -> None:
        """Close a PreparingRebalance phase: bump the generation, pick the protocol, and go to
        CompletingRebalance (or Empty when nobody is left)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)

    def member_list(self) -> tuple[JoinedMember, ...]:
        """All members with their metadata for the chosen protocol: the leader's input."""
        assert self.protocol_name is not None
        return tuple(
            JoinedMember(m.member_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )
