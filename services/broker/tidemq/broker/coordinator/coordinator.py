"""GroupCoordinator: Kafka's group membership protocol for every group this broker coordinates.

Transport-free and clock-injected. JoinGroup and SyncGroup may have to wait for the rest of
the group, so they return a `concurrent.futures.Future` that the gRPC layer (group_rpc.py)
awaits, wrapped for asyncio, until the call's deadline; heartbeat, leave, describe and list answer at once. Timers (delayed joins,
session expiry) only fire inside `tick()`: the broker calls it from a ticker thread every
~100 ms, unit tests call it after advancing a fake clock, so nothing here sleeps.

Futures are completed after the group lock is released, so a done-callback may call back
into the coordinator without deadlocking.

Example (blocking on `result` here; the broker awaits the future within the call's deadline):

>>> coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0))
>>> joining = coordinator.join_group("g", UNKNOWN_MEMBER_ID, [("averagely", b"orders")])
>>> coordinator.tick()  # the broker's CoordinatorTicker does this every 100 ms
>>> me = joining.result(timeout=5)
>>> (me.generation_id, me.is_leader, [m.metadata for m in me.members])
(1, True, [b'orders'])
>>> syncing = coordinator.sync_group("g", me.member_id, me.generation_id, {me.member_id: b"q0"})
>>> syncing.result(timeout=5).assignment
b'q0'
>>> coordinator.describe_group("g").state
<GroupState.STABLE: 'Stable'>
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future

from . import errors, rebalance
from .config import CoordinatorConfig
from .errors import CoordinatorError
from .group import GroupMetadata, RebalanceListener, TransitionListener
from .handover import GroupHandover, handover_of, restored
from .member import (
    UNKNOWN_MEMBER_ID,
    JoinResult,
    MemberMetadata,
    Protocol,
    SyncResult,
    checked_protocols,
)
from .rebalance import Outbox
from .state import GroupState
from .views import GroupDescription, GroupOverview, describe


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class GroupCoordinator:
    """Coordinates many groups; one lock per group, one small lock for the group table."""

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        now_ms: Callable[[], int] = monotonic_ms,
        member_id_factory: Callable[[str], str] | None = None,
        on_transition: TransitionListener | None = None,
        on_rebalance: RebalanceListener | None = None,
    ) -> None:
        """`now_ms` is the only clock; `member_id_factory(client_id)` makes new member ids
        (default `<client_id or "member">-<uuid4>`); `on_transition(group, old, new)` observes
        every state change and `on_rebalance(group, reason, member_id)` every rebalance start
        with its reason (group.REBALANCE_REASONS); both are called under the group lock and
        must not call back in."""
        self.config = config or CoordinatorConfig()
        self._now = now_ms
        self._new_member_id = member_id_factory or _default_member_id
        self._initial_delay = self.config.initial_rebalance_delay_ms
        self._on_transition = on_transition
        self._on_rebalance = on_rebalance
        self._groups: dict[str, GroupMetadata] = {}
        self._groups_lock = threading.Lock()
        self._coordinating = True  # False on a replica that is not its group's master

    # ------------------------------------------------------------------ JoinGroup

    def join_group(
        self,
        group_id: str,
        member_id: str,
        protocols: Sequence[Protocol],
        *,
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        protocol_type: str = "consumer",
        client_id: str = "",
        client_host: str = "",
        client_software: str = "",
    ) -> Future[JoinResult]:
        """Join (or rejoin) a group. `member_id` is UNKNOWN_MEMBER_ID ("") the first time.

        The future resolves to a JoinResult when the current rebalance's delayed join
        completes (or at once for an unchanged non-leader rejoining a Stable group), or fails
        with CoordinatorError: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT,
        INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, COORDINATOR_NOT_AVAILABLE.
        `rebalance_timeout_ms` defaults to the session timeout.
        """
        future: Future[JoinResult] = Future()
        outbox: Outbox = []
        session_ms = session_timeout_ms or self.config.default_session_timeout_ms
        try:
            self._validate_join(group_id, session_ms, rebalance_timeout_ms)
            protocols = checked_protocols(protocol_type, protocols)
            group = self._group_for_join(group_id, member_id)
            with group.lock:
                self._do_join(
                    group,
                    member_id,
                    protocols,
                    future,
                    outbox,
                    MemberMetadata(
                        member_id=member_id,
                        client_id=client_id,
                        client_host=client_host,
                        client_software=client_software,
                        session_timeout_ms=session_ms,
                        rebalance_timeout_ms=rebalance_timeout_ms or session_ms,
                        protocol_type=protocol_type,
                        protocols=protocols,
                        last_heartbeat_ms=self._now(),
                    ),
                )
        except CoordinatorError as exc:
            outbox.append((future, exc))
        rebalance.deliver(outbox)
        return future

    def _validate_join(self, group_id: str, session_ms: int, rebalance_ms: int | None) -> None:
        if not group_id:
            raise CoordinatorError(errors.INVALID_GROUP_ID, "group id must not be empty")
        low, high = self.config.min_session_timeout_ms, self.config.max_session_timeout_ms
        if not low <= session_ms <= high:
            raise CoordinatorError(
                errors.INVALID_SESSION_TIMEOUT,
                f"session timeout {session_ms} ms is outside the allowed [{low}, {high}] ms",
            )
        if rebalance_ms is not None and rebalance_ms < 0:
            raise CoordinatorError(
                errors.INVALID_SESSION_TIMEOUT, f"rebalance timeout {rebalance_ms} ms is negative"
            )

    def _group_for_join(self, group_id: str, member_id: str) -> GroupMetadata:
        with self._groups_lock:
            self._check_coordinating(group_id)
            group = self._groups.get(group_id)
            if group is None:
                if member_id != UNKNOWN_MEMBER_ID:
                    raise rebalance.unknown_member(group_id, member_id)
                group = GroupMetadata(group_id, self._on_transition, self._on_rebalance)
                self._groups[group_id] = group
            return group

    def _do_join(
        self,
        group: GroupMetadata,
        member_id: str,
        protocols: list[Protocol],
        future: Future,
        outbox: Outbox,
        joining: MemberMetadata,
    ) -> None:
        now = self._now()
        if group.state is GroupState.DEAD:
            raise rebalance.dead(group)
        if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            raise rebalance.unknown_member(group.group_id, member_id)
        if not group.supports_protocols(joining.protocol_type, protocols, member_id or None):
            raise CoordinatorError(
                errors.INCONSISTENT_GROUP_PROTOCOL,
                f"protocols {[n for n, _ in protocols]} of type {joining.protocol_type!r} share "
                f"nothing with the other members of group {group.group_id}",
            )
        if member_id == UNKNOWN_MEMBER_ID:
            joining.member_id = self._new_member_id(joining.client_id)
            joining.join_future = future
            group.add(joining)
            if group.pending_join is not None and group.pending_join.initial:
                group.new_member_added = True
            rebalance.maybe_prepare_rebalance(group, now, outbox, self._initial_delay,
                                              "member_joined", joining.member_id)
        else:
            member = group.members[member_id]
            unchanged = member.matches(protocols)
            answer_now = (group.state is GroupState.COMPLETING_REBALANCE and unchanged) or (
                group.state is GroupState.STABLE and unchanged and not group.is_leader(member_id)
            )
            if answer_now:
                # A lost JoinGroup answer, or a follower checking in: repeat the current
                # generation without starting a rebalance (docs/consumer-groups.md,
                # walk-through case 3).
                member.last_heartbeat_ms = now
                outbox.append((future, rebalance.join_result(group, member)))
            else:
                if member.join_future is not None:
                    outbox.append((member.join_future, rebalance.superseded(group, "JoinGroup")))
                member.protocols = protocols
                member.session_timeout_ms = joining.session_timeout_ms
                member.rebalance_timeout_ms = joining.rebalance_timeout_ms
                member.join_future = future
                member.last_heartbeat_ms = now
                reason = "leader_rejoined" if unchanged else "metadata_changed"
                rebalance.maybe_prepare_rebalance(group, now, outbox, self._initial_delay,
                                                  reason, member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            rebalance.try_complete_join(group, now, outbox)

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None = None,
    ) -> Future[SyncResult]:
        """Fetch this member's assignment; the leader also supplies everyone's.

        In CompletingRebalance the future waits for the leader's SyncGroup (members the leader
        left out get b""); in Stable it resolves at once. Fails with UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (rejoin), COORDINATOR_NOT_AVAILABLE.
        Assignments from a non-leader are ignored.
        """
        future: Future[SyncResult] = Future()
        outbox: Outbox = []
        try:
            group = self._existing_member_group(group_id, member_id)
            with group.lock:
                member = self._check_member(group, member_id, generation_id)
                now = self._now()
                if group.state is GroupState.PREPARING_REBALANCE:
                    raise rebalance.rebalancing(group)
                member.last_heartbeat_ms = now
                if group.state is GroupState.STABLE:
                    outbox.append((future, rebalance.sync_result(group, member)))
                else:  # CompletingRebalance
                    if member.sync_future is not None:
                        outbox.append(
                            (member.sync_future, rebalance.superseded(group, "SyncGroup"))
                        )
                    member.sync_future = future
                    if group.is_leader(member_id):
                        rebalance.apply_assignment(group, assignments or {}, outbox)
        except CoordinatorError as exc:
            outbox.append((future, exc))
        rebalance.deliver(outbox)
        return future

    # ------------------------------------------------------------------ heartbeat / leave

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> None:
        """Keep a member in its group. Returns normally in Stable; raises CoordinatorError
        REBALANCE_IN_PROGRESS while a rebalance runs (the session is still refreshed: rejoin,
        or in CompletingRebalance carry on with SyncGroup), ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID, COORDINATOR_NOT_AVAILABLE."""
        group = self._existing_member_group(group_id, member_id)
        with group.lock:
            member = self._check_member(group, member_id, generation_id)
            member.last_heartbeat_ms = self._now()
            if group.state is not GroupState.STABLE:
                raise rebalance.rebalancing(group)

    def leave_group(self, group_id: str, member_id: str) -> None:
        """Remove a member now (instead of waiting for its session to expire) and rebalance
        the rest. Raises UNKNOWN_MEMBER_ID or COORDINATOR_NOT_AVAILABLE."""
        outbox: Outbox = []
        group = self._existing_member_group(group_id, member_id)
        with group.lock:
            if group.state is GroupState.DEAD:
                raise rebalance.dead(group)
            member = group.members.get(member_id)
            if member is None:
                raise rebalance.unknown_member(group_id, member_id)
            rebalance.remove_and_rebalance(group, member, self._now(), outbox, self._initial_delay,
                                           "member_left")
        rebalance.deliver(outbox)

    # ------------------------------------------------------------------ timers

    def tick(self, now_ms: int | None = None) -> None:
        """Fire due timers: expire members whose session lapsed (rebalancing their group) and
        complete delayed joins whose deadline passed. Call it often (the broker: every ~100 ms
        from one thread); it does nothing when nothing is due."""
        with self._groups_lock:
            groups = list(self._groups.values())
        for group in groups:
            outbox: Outbox = []
            with group.lock:
                now = self._now() if now_ms is None else now_ms
                if group.state is GroupState.DEAD:
                    continue
                for member in list(group.members.values()):
                    if not member.should_keep_alive(now) and group.has(member.member_id):
                        reason = "sync_expired" if member.awaiting_sync else "session_expired"
                        rebalance.remove_and_rebalance(
                            group, member, now, outbox, self._initial_delay, reason
                        )
                while group.pending_join is not None and group.pending_join.deadline_ms <= now:
                    rebalance.on_join_timer(group, now, outbox, self._initial_delay)
            rebalance.deliver(outbox)

    # ------------------------------------------------------------------ admin

    def describe_group(self, group_id: str) -> GroupDescription:
        """Snapshot of a group; an unknown group is reported as Dead with no members."""
        with self._groups_lock:
            group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD, 0, "", "", "", ())
        with group.lock:
            return describe(group)

    def under_group_lock(self, group_id: str,
                         action: Callable[[GroupDescription], None]) -> None:
        """`action(snapshot)` with the group's lock held, so no join, sync or expiry changes
        the group until it returns (a fenced offset commit: check, then commit). An unknown
        group's snapshot is Dead with no members."""
        with self._groups_lock:
            self._check_coordinating(group_id)
            group = self._groups.get(group_id)
        if group is None:
            action(GroupDescription(group_id, GroupState.DEAD, 0, "", "", "", ()))
            return
        with group.lock:
            action(describe(group))

    def list_groups(self) -> list[GroupOverview]:
        with self._groups_lock:
            groups = sorted(self._groups.values(), key=lambda g: g.group_id)
        overviews = []
        for group in groups:
            with group.lock:
                overviews.append(
                    GroupOverview(group.group_id, group.state, group.protocol_type or "")
                )
        return overviews

    def delete_group(self, group_id: str) -> None:
        """Forget an Empty group (it becomes Dead). Raises NON_EMPTY_GROUP or
        GROUP_ID_NOT_FOUND."""
        with self._groups_lock:
            group = self._groups.get(group_id)
            if group is None:
                raise CoordinatorError(
                    errors.GROUP_ID_NOT_FOUND, f"group {group_id} is not known to this coordinator"
                )
            with group.lock:
                if group.state is not GroupState.EMPTY:
                    raise CoordinatorError(
                        errors.NON_EMPTY_GROUP,
                        f"group {group_id} is {group.state} with {len(group.members)} members; "
                        "only an Empty group can be deleted",
                    )
                group.transition_to(GroupState.DEAD)
                del self._groups[group_id]

    def unload_all(self) -> None:
        """This broker stops coordinating (shutdown or lost mastership): every group goes
        Dead and every waiting call fails with NOT_COORDINATOR so clients look it up again."""
        with self._groups_lock:
            groups, self._groups = list(self._groups.values()), {}
        for group in groups:
            outbox: Outbox = []
            with group.lock:
                error = CoordinatorError(
                    errors.NOT_COORDINATOR,
                    f"this broker no longer coordinates group {group.group_id}",
                )
                for member in group.members.values():
                    for pending in (member.join_future, member.sync_future):
                        if pending is not None:
                            outbox.append((pending, error))
                    member.join_future = member.sync_future = None
                group.pending_join = None
                if group.state is not GroupState.DEAD:
                    group.transition_to(GroupState.DEAD)
            rebalance.deliver(outbox)

    # ------------------------------------------------------------------ replication

    def handovers(self) -> list[GroupHandover]:
        """Every Stable group, for the replicas that may take over (handover.py)."""
        with self._groups_lock:
            groups = list(self._groups.values())
        found = []
        for group in groups:
            with group.lock:
                found.append(handover_of(group))
        return [h for h in found if h is not None]

    def take_over(self, handovers: list[GroupHandover]) -> None:
        """This replica became its group's master: coordinate, starting from the groups the
        old master handed over (a group already known here is kept as it is)."""
        now = self._now()
        with self._groups_lock:
            for handover in handovers:
                if handover.group_id not in self._groups:
                    self._groups[handover.group_id] = restored(
                        handover, now, self._on_transition, self._on_rebalance)
            self._coordinating = True

    def hand_off(self) -> None:
        """This replica is no longer master: every call answers NOT_COORDINATOR from now on
        (members look the coordinator up again and find the new master)."""
        with self._groups_lock:
            self._coordinating = False
        self.unload_all()

    def _check_coordinating(self, group_id: str) -> None:
        if not self._coordinating:
            raise CoordinatorError(errors.NOT_COORDINATOR, f"this broker is not its replica "
                                   f"group's master, so it does not coordinate {group_id}")

    # ------------------------------------------------------------------ helpers

    def _existing_member_group(self, group_id: str, member_id: str) -> GroupMetadata:
        with self._groups_lock:
            self._check_coordinating(group_id)
            group = self._groups.get(group_id)
        if group is None:
            raise rebalance.unknown_member(group_id, member_id)
        return group

    def _check_member(
        self, group: GroupMetadata, member_id: str, generation_id: int
    ) -> MemberMetadata:
        if group.state is GroupState.DEAD:
            raise rebalance.dead(group)
        member = group.members.get(member_id)
        if member is None:
            raise rebalance.unknown_member(group.group_id, member_id)
        if generation_id != group.generation_id:
            raise CoordinatorError(
                errors.ILLEGAL_GENERATION,
                f"generation {generation_id} is stale: group {group.group_id} is at "
                f"generation {group.generation_id}; rejoin",
            )
        return member


def _default_member_id(client_id: str) -> str:
    return f"{client_id or 'member'}-{uuid.uuid4()}"
