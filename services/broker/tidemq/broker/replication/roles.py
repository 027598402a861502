"""What a replica should be, given its group's state as the controller wrote it — pure rules.

The controller writes `/tidemq/replication/groups/<broker_name>` = {master, epoch, in_sync,
master_addr, master_ha_addr}; every replica watches it and calls `decide` with what it is now.
The answer is one action (or None): become master of an epoch, follow a master (or wait for
one), or take a new in-sync set. A state older than the epoch a replica already acts under is
ignored, so a late watch event can never demote a newer master or promote a deposed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemq.configclient.replication import NO_MASTER, GroupState, store_id_of

MASTER = "MASTER"
SLAVE = "SLAVE"


@dataclass(frozen=True)
class LocalRole:
    """What this replica acts as now ("" = nothing yet: a process that just started)."""

    role: str = ""
    epoch: int = 0
    master_ha_addr: str = ""      # the master a slave follows ("" = none)
    in_sync: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class BecomeMaster:
    epoch: int
    in_sync: frozenset[int]


@dataclass(frozen=True)
class BecomeSlave:
    epoch: int
    master_addr: str              # gRPC address of the master ("" = no master right now)
    master_ha_addr: str           # where its HA stream listens ("" = nothing to follow)


@dataclass(frozen=True)
class UpdateInSync:
    in_sync: frozenset[int]


Action = BecomeMaster | BecomeSlave | UpdateInSync


def holds_own_copy(state: GroupState, me: int, incarnation: str, log_end: int) -> bool:
    """Whether this replica still holds the copy the group state counted it for: the same
    incarnation, or the same store id and at least the confirmed offset. A state written
    from a live key its previous process left (before this one replaced it) may name it
    master; with another store (a wiped disk) or below the confirmed offset it must not serve."""
    recorded = state.incarnations.get(me, "")
    if not recorded or not incarnation or recorded == incarnation:
        return True
    return store_id_of(recorded) == store_id_of(incarnation) \
        and log_end >= state.confirmed_offset


def decide(me: int, current: LocalRole, state: GroupState | None, incarnation: str = "",
           log_end: int = 0) -> Action | None:
    """The one action that makes `current` agree with `state`, or None if it already does.
    `incarnation`, `log_end`: this replica's (holds_own_copy)."""
    if state is None:  # the controller has not initialised the group yet: wait as a slave
        if current.role == SLAVE:
            return None
        return BecomeSlave(current.epoch, "", "")
    if state.epoch < current.epoch:
        return None  # stale: this replica already acts under a newer epoch
    if state.master == me and current.role != MASTER \
            and not holds_own_copy(state, me, incarnation, log_end):
        if current.role == SLAVE and current.epoch == state.epoch and not current.master_ha_addr:
            return None
        return BecomeSlave(state.epoch, "", "")   # wait: the controller re-decides
    if state.master == me:
        if current.role == MASTER and current.epoch == state.epoch:
            return UpdateInSync(state.in_sync) if state.in_sync != current.in_sync else None
        # A newer epoch, or this epoch again after a restart or a lost lease: the controller
        # kept this replica master (it was live and in sync), so it serves again.
        return BecomeMaster(state.epoch, state.in_sync)
    target = state.master_ha_addr if state.master != NO_MASTER else ""
    if current.role == SLAVE and current.epoch == state.epoch \
            and current.master_ha_addr == target:
        return None
    return BecomeSlave(state.epoch, state.master_addr if target else "", target)


def after(current: LocalRole, action: Action) -> LocalRole:
    """The local role once `action` has been carried out."""
    if isinstance(action, BecomeMaster):
        return LocalRole(MASTER, action.epoch, "", action.in_sync)
    if isinstance(action, BecomeSlave):
        return LocalRole(SLAVE, action.epoch, action.master_ha_addr)
    return LocalRole(current.role, current.epoch, current.master_ha_addr, action.in_sync)


def stepped_down(current: LocalRole) -> LocalRole:
    """A master that lost its lease: a slave of nobody until the group state says more."""
    return LocalRole(SLAVE, current.epoch, "") if current.role == MASTER else current
