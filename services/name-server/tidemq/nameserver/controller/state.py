"""A replica group's replication state and the controller's rules for changing it.

Pure domain (no I/O): the controller service feeds it what it sees in the config center and
writes back what it returns. The guarantee it carries (Kafka's ISR rule): the
in-sync set only ever holds replicas that have every acknowledged message, so a *clean*
election — one that picks a live member of that set — loses nothing. An *unclean* election
(the most complete live replica, member or not) is only made when the group allows it, and is
reported as a possible loss.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tidemq.common import errors
from tidemq.configclient.replication import GroupState

FIRST_EPOCH = 1


class NoEligibleReplica(errors.PreconditionFailed):
    """No live replica may become master under the group's rules: the controller waits."""

    code = "NO_ELIGIBLE_REPLICA"


class StaleEpoch(errors.PreconditionFailed):
    """The caller speaks for an older (or future) epoch: it is no longer (or not yet) master."""

    code = "STALE_EPOCH"


class NotMaster(errors.PreconditionFailed):
    """The caller is not the group's master, so it may not change the in-sync set."""

    code = "NOT_MASTER"


class InvalidInSyncSet(errors.InvalidArgument):
    """A proposed in-sync set that cannot be right (master missing, negative ids)."""

    code = "INVALID_IN_SYNC_SET"


@dataclass(frozen=True)
class Election:
    """An election's outcome: the new state and whether acknowledged messages may be lost."""

    state: GroupState
    old_master: int
    clean: bool
    candidates: dict[int, int] = field(default_factory=dict)  # live id -> log end considered

    @property
    def possible_loss(self) -> bool:
        return not self.clean


def initial(live: Iterable[int] | Mapping[int, int], epoch_floor: int = 0) -> GroupState:
    """A group seen for the first time: replica 0 (the configured initial master) if it is
    alive, else the lowest live id; epoch 1; the master alone in sync.

    `epoch_floor`: the highest epoch any live replica has served under. Above 0 the group is
    not new — the config store lost its state (a Redis failover that dropped the last write,
    a store restored from an old backup) — so the epoch starts above it, never reusing one a
    replica already acted on, and `live` (replica id -> log end) gives the most complete
    replica the lead: with no in-sync set left to ask, it holds the most."""
    ids = sorted(set(live))
    if not ids:
        raise NoEligibleReplica("a group needs a live replica to be initialised")
    if epoch_floor > 0 and isinstance(live, Mapping):
        master = _best(live)
    else:
        master = 0 if 0 in ids else ids[0]
    return GroupState(master, max(FIRST_EPOCH, epoch_floor + 1), frozenset({master}))


def _best(candidates: Mapping[int, int]) -> int:
    """The most complete replica; ties go to the lowest id so the choice is deterministic."""
    return min(candidates, key=lambda replica: (-candidates[replica], replica))


def elect(state: GroupState, live: Mapping[int, int], unclean: bool = False,
          preferred: int | None = None, epoch_floor: int = 0) -> Election:
    """Choose a new master among `live` (replica id -> log end) and bump the epoch — above
    the stored one and above `epoch_floor`, the highest epoch a live replica reports (so an
    epoch the store forgot it granted is never granted again).

    Clean: a live member of the in-sync set — `preferred` if it is one, else the one with the
    largest log end. Unclean (only when `unclean`): the live replica with the largest log end.
    The new in-sync set keeps the old members that are alive (they hold what was acknowledged)
    plus the new master. Raises NoEligibleReplica when nobody qualifies."""
    eligible = {r: end for r, end in live.items() if r in state.in_sync}
    clean = bool(eligible)
    if not clean:
        if not unclean or not live:
            raise NoEligibleReplica(
                f"no live in-sync replica (in-sync {sorted(state.in_sync)}, live "
                f"{sorted(live)}) and unclean election is "
                f"{'enabled but nobody is live' if unclean else 'disabled'}")
        eligible = dict(live)
    master = preferred if preferred in eligible else _best(eligible)
    in_sync = frozenset({master} | (state.in_sync & set(live)))
    new = GroupState(master, max(state.epoch, epoch_floor) + 1, in_sync)
    return Election(new, state.master, clean, dict(live))


def elect_preferred(state: GroupState, live: Mapping[int, int],
                    preferred: int | None, epoch_floor: int = 0) -> Election:
    """An operator's election (`tidemq broker elect`): move leadership to `preferred`, which
    must be a live in-sync replica; None = the best live in-sync replica other than the master.
    Never unclean. Choosing the current live master changes nothing (same state, same epoch)."""
    eligible = {r: end for r, end in live.items() if r in state.in_sync}
    if preferred is None:
        others = {r: end for r, end in eligible.items() if r != state.master}
        if not others:
            raise NoEligibleReplica(
                f"no live in-sync replica other than master {state.master} to hand over to "
                f"(in-sync {sorted(state.in_sync)}, live {sorted(live)})")
        preferred = _best(others)
    if preferred not in eligible:
        raise NoEligibleReplica(
            f"replica {preferred} cannot become master: it is "
            f"{'not live' if preferred not in live else 'not in the in-sync set'} "
            f"(in-sync {sorted(state.in_sync)}, live {sorted(live)})")
    if preferred == state.master:
        return Election(state, state.master, True, dict(live))
    return elect(state, live, unclean=False, preferred=preferred, epoch_floor=epoch_floor)


def alter_in_sync(state: GroupState, epoch: int, master: int,
                  new_set: Iterable[int]) -> GroupState:
    """The master's proposal of a new in-sync set, accepted only from the current master at
    the current epoch (a deposed master's late shrink must never shrink the new master's set),
    and only if the master stays in it. The epoch does not change."""
    proposed = frozenset(new_set)
    if epoch != state.epoch:
        raise StaleEpoch(f"epoch {epoch} is not the group's epoch {state.epoch}")
    if master != state.master:
        raise NotMaster(f"replica {master} is not master of epoch {state.epoch} "
                        f"(master is {state.master})")
    if master not in proposed:
        raise InvalidInSyncSet(f"the in-sync set {sorted(proposed)} must contain the master "
                               f"{master}")
    if any(replica < 0 for replica in proposed):
        raise InvalidInSyncSet(f"replica ids must be >= 0, got {sorted(proposed)}")
    return GroupState(state.master, state.epoch, proposed, state.master_addr,
                      state.master_ha_addr)
