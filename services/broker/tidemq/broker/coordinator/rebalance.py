"""The rebalance phases of one group: PreparingRebalance -> CompletingRebalance -> Stable.

Functions over a `GroupMetadata` called with its lock held. They never complete a future
themselves: answers go into an `Outbox` that the coordinator delivers after the lock is
released, so a done-callback that calls back into the coordinator cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError

from . import errors
from .errors import CoordinatorError
from .group import DelayedJoin, GroupMetadata
from .member import JoinResult, MemberMetadata, SyncResult
from .state import GroupState

Outbox = list[tuple[Future, object]]
"""Answers decided under a group lock: (future, result or CoordinatorError)."""


def join_result(group: GroupMetadata, member: MemberMetadata) -> JoinResult:
    return JoinResult(
        group_id=group.group_id,
        member_id=member.member_id,
        generation_id=group.generation_id,
        leader_id=group.leader_id or "",
        protocol_type=group.protocol_type or "",
        protocol_name=group.protocol_name or "",
        members=group.member_list() if group.is_leader(member.member_id) else (),
    )


def maybe_prepare_rebalance(
    group: GroupMetadata, now: int, outbox: Outbox, initial_delay_ms: int, reason: str,
    member_id: str,
) -> None:
    """Only the first add/update of a round changes the state and creates the delayed
    join; in PreparingRebalance every later join just waits for it. `reason` (one of
    group.REBALANCE_REASONS) and `member_id` go to the group's rebalance listener when a
    rebalance starts here."""
    if group.state not in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        return
    group.rebalance_started(reason, member_id)
    if group.state is GroupState.COMPLETING_REBALANCE:
        # Followers blocked in SyncGroup must rejoin: their generation is over.
        for member in group.members.values():
            member.assignment = None
            if member.sync_future is not None:
                outbox.append((member.sync_future, rebalancing(group)))
                member.sync_future = None
    if group.state is GroupState.EMPTY:
        delay = initial_delay_ms
        group.pending_join = DelayedJoin(
            deadline_ms=now + delay,
            initial=True,
            remaining_ms=max(group.rebalance_timeout_ms() - delay, 0),
        )
        group.new_member_added = False
    else:
        group.pending_join = DelayedJoin(deadline_ms=now + group.rebalance_timeout_ms())
    group.transition_to(GroupState.PREPARING_REBALANCE)


def try_complete_join(group: GroupMetadata, now: int, outbox: Outbox) -> None:
    pending = group.pending_join
    if pending is None:
        return
    everyone_in = not group.not_yet_rejoined()
    if not group.members or (everyone_in and not pending.initial):
        complete_join(group, now, outbox)


def on_join_timer(group: GroupMetadata, now: int, outbox: Outbox, initial_delay_ms: int) -> None:
    pending = group.pending_join
    assert pending is not None
    if pending.initial and group.new_member_added and pending.remaining_ms > 0:
        delay = initial_delay_ms
        group.new_member_added = False
        pending.deadline_ms = now + min(delay, pending.remaining_ms)
        pending.remaining_ms = max(pending.remaining_ms - delay, 0)
        return
    complete_join(group, now, outbox)


def complete_join(group: GroupMetadata, now: int, outbox: Outbox) -> None:
    """End PreparingRebalance: drop members that did not rejoin, open the next generation
    and answer every waiting JoinGroup together (the member list to the leader only)."""
    group.pending_join = None
    group.new_member_added = False
    for member in group.not_yet_rejoined():
        drop(group, member, outbox)
    group.init_next_generation()
    for member in group.members.values():
        outbox.append((member.join_future, join_result(group, member)))
        member.join_future = None
        member.last_heartbeat_ms = now


def apply_assignment(
    group: GroupMetadata, assignments: Mapping[str, bytes], outbox: Outbox
) -> None:
    for member in group.members.values():
        member.assignment = bytes(assignments.get(member.member_id, b""))
    group.transition_to(GroupState.STABLE)
    for member in group.members.values():
        if member.sync_future is not None:
            outbox.append((member.sync_future, sync_result(group, member)))
            member.sync_future = None


def sync_result(group: GroupMetadata, member: MemberMetadata) -> SyncResult:
    return SyncResult(
        group_id=group.group_id,
        member_id=member.member_id,
        generation_id=group.generation_id,
        protocol_name=group.protocol_name or "",
        assignment=member.assignment or b"",
    )


def remove_and_rebalance(
    group: GroupMetadata, member: MemberMetadata, now: int, outbox: Outbox, initial_delay_ms: int,
    reason: str,
) -> None:
    drop(group, member, outbox)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        maybe_prepare_rebalance(group, now, outbox, initial_delay_ms, reason, member.member_id)
    if group.state is GroupState.PREPARING_REBALANCE:
        try_complete_join(group, now, outbox)


def drop(group: GroupMetadata, member: MemberMetadata, outbox: Outbox) -> None:
    for pending in (member.join_future, member.sync_future):
        if pending is not None:
            outbox.append((pending, unknown_member(group.group_id, member.member_id)))
    member.join_future = member.sync_future = None
    group.remove(member.member_id)


def unknown_member(group_id: str, member_id: str) -> CoordinatorError:
    return CoordinatorError(
        errors.UNKNOWN_MEMBER_ID,
        f"member {member_id!r} is not in group {group_id}; join again without a member id",
    )


def dead(group: GroupMetadata) -> CoordinatorError:
    return CoordinatorError(
        errors.COORDINATOR_NOT_AVAILABLE,
        f"group {group.group_id} was just removed from this coordinator; find the coordinator "
        "again and rejoin",
    )


def rebalancing(group: GroupMetadata) -> CoordinatorError:
    return CoordinatorError(
        errors.REBALANCE_IN_PROGRESS, f"group {group.group_id} is rebalancing ({group.state})"
    )


def superseded(group: GroupMetadata, call: str) -> CoordinatorError:
    return CoordinatorError(
        errors.REBALANCE_IN_PROGRESS,
        f"a newer {call} from the same member of group {group.group_id} replaced this one",
    )


def deliver(outbox: Outbox) -> None:
    for future, outcome in outbox:
        try:
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        except InvalidStateError:
            pass  # the caller cancelled (deadline passed); nobody is listening any more
