"""Group states and the only transitions between them (Kafka's GroupState.validPreviousStates).

Keeping the transition table as data lets `GroupMetadata.transition_to` refuse an illegal move
loudly (a coordinator bug) and lets tests check every observed move against the same table.
"""

from __future__ import annotations

from enum import StrEnum


class GroupState(StrEnum):
    EMPTY = "Empty"  # no members; offsets may still exist
    PREPARING_REBALANCE = "PreparingRebalance"  # collecting JoinGroups until the delayed join ends
    COMPLETING_REBALANCE = "CompletingRebalance"  # joined; waiting for the leader's SyncGroup
    STABLE = "Stable"  # assignment delivered; heartbeats keep members in
    DEAD = "Dead"  # removed from this coordinator (deleted or moved); every call must go away

    def __str__(self) -> str:
        return self.value


# target state -> states it may be entered from
_ALLOWED_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


def is_allowed_transition(current: GroupState, target: GroupState) -> bool:
    """True when a group in `current` may move to `target`."""
    return current in _ALLOWED_PREVIOUS[target]
