"""A replica group's replication state and the controller's rules for changing it.

Pure domain (no I/O): the controller service feeds it what it sees in the config center and
writes back what it returns. The guarantee it carries (Kafka's ISR rule): the
in-sync set only ever holds replicas that have every acknowledged message, so a *clean*
election — one that picks a live member of that set — loses nothing. An *unclean* election
(the most complete live replica, member or not) is only made when the group allows it, and is
reported as a possible loss.

"In sync" means *this copy of the data* (Kafka KIP-903/966): the set records, per member, the
incarnation ("<store id>:<start>") it was counted under, and the group keeps the last confirmed
offset its master reported. A member that comes back under another store id (a wiped disk), or
restarted below the confirmed offset (a lost unflushed tail), has left the set; no election
picks a candidate below the confirmed offset — the group waits instead, unless an operator
forces an unclean election.

An automatic election also needs a *proof of life* (`reconcile`): a candidate's live key must
have been written after the controller saw the master lost. A live key outlives its process
by up to the lease TTL and shows the incarnation it was written under, so a replica killed
(and its disk wiped) just before the master's loss still looks live, in sync and complete;
brokers rewrite their key at every refresh, a killed one never again.

A group never waits for nobody while a complete copy survives (Kafka KIP-966's eligible
leader replicas): when a change of the set leaves the master alone in it and the master
acknowledges only with a quorum (SYNC_MASTER, `min_in_sync_replicas` >= 2), nothing can be
acknowledged until the set grows again, so the members it removed — a dead old master above
all — still hold every acknowledged byte. The group keeps them, with their incarnation, in
`eligible_leaders`: they are electable as members are (`holds_copy`), named in `waiting_for`,
and forgotten as soon as the set has two members again (acknowledgements resume).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tidemq.common import errors
from tidemq.configclient.replication import NO_MASTER, GroupState, store_id_of

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
    lost_bytes: int = 0   # acknowledged bytes above the new master's log end (unclean only)

    @property
    def possible_loss(self) -> bool:
        return not self.clean


def initial(live: Iterable[int] | Mapping[int, int], epoch_floor: int = 0,
            incarnations: Mapping[int, str] | None = None) -> GroupState:
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
    recorded = {master: incarnations[master]} if incarnations and master in incarnations else {}
    return GroupState(master, max(FIRST_EPOCH, epoch_floor + 1), frozenset({master}),
                      incarnations=recorded)


def recorded_copy(state: GroupState, replica: int) -> str | None:
    """The incarnation under which the group counts `replica` as holding its copy: as an
    in-sync member ("" = recorded by an older controller) or as an eligible leader; None =
    neither."""
    if replica in state.in_sync:
        return state.incarnations.get(replica, "")
    return state.eligible_leaders.get(replica)


def holds_copy(state: GroupState, replica: int, log_end: int,
               incarnation: str | None) -> bool:
    """Whether a live in-sync member (or eligible leader) still holds what the group recorded
    it for: under the incarnation it was counted with (the same process: every byte it
    acknowledged is in its page cache, whatever its last published log end), or — restarted —
    under the same store id and at least the confirmed offset. A new store id (a wiped disk)
    never qualifies. `incarnation` None = not known (an older replica): the log end alone
    decides."""
    recorded = recorded_copy(state, replica)
    if recorded is None:
        return False
    if incarnation is not None and recorded:
        if incarnation == recorded:
            return True
        if store_id_of(incarnation) != store_id_of(recorded):
            return False
    return log_end >= state.confirmed_offset


def refresh(state: GroupState, live: Mapping[int, int],
            incarnations: Mapping[int, str], confirmed: int | None = None,
            quorum: bool | None = None) -> GroupState:
    """The group state once what live replicas now say is folded in (no epoch change):

    - a member live under another incarnation leaves the in-sync set at once unless it still
      holds the copy (`holds_copy`); if it does, the set records its new incarnation;
    - a member recorded without an incarnation gets its live one;
    - `confirmed` (the live master's report) raises the recorded confirmed offset, never
      lowers it;
    - an eligible leader back under another incarnation stays one only if it still holds the
      copy; all are forgotten when the live master says it acknowledges without a quorum
      (`quorum` False).
    The master may leave the set here (a wiped master back under its id); the caller then
    elects (`disqualified`)."""
    in_sync, recorded = set(state.in_sync), dict(state.incarnations)
    for replica in sorted(state.in_sync):
        incarnation = incarnations.get(replica)
        if replica not in live or incarnation is None or recorded.get(replica) == incarnation:
            continue
        if holds_copy(state, replica, live[replica], incarnation):
            recorded[replica] = incarnation
        else:
            in_sync.discard(replica)
            recorded.pop(replica, None)
    leaders = dict(state.eligible_leaders)
    for replica, counted in sorted(state.eligible_leaders.items()):
        incarnation = incarnations.get(replica)
        if replica not in live or incarnation is None or counted == incarnation:
            continue
        if holds_copy(state, replica, live[replica], incarnation):
            leaders[replica] = incarnation
        else:
            del leaders[replica]
    if quorum is False:
        leaders = {}
    offset = state.confirmed_offset if confirmed is None else max(state.confirmed_offset,
                                                                  confirmed)
    return state.replace(in_sync=frozenset(in_sync), incarnations=recorded,
                         confirmed_offset=offset,
                         eligible_leaders=_kept(frozenset(in_sync), leaders))


def disqualified(state: GroupState) -> bool:
    """The recorded master no longer holds the group's copy (it left the in-sync set)."""
    return state.master != NO_MASTER and state.master not in state.in_sync


def eligible(state: GroupState, live: Mapping[int, int],
             incarnations: Mapping[int, str] | None = None) -> dict[int, int]:
    """Live replicas that may be elected cleanly: members and eligible leaders that hold the
    copy (id -> log end)."""
    incarnations = incarnations or {}
    return {r: end for r, end in live.items()
            if holds_copy(state, r, end, incarnations.get(r))}


def _holders(state: GroupState) -> frozenset[int]:
    """Every replica the group counts as holding its copy: members and eligible leaders."""
    return state.in_sync | frozenset(state.eligible_leaders)


def waiting_message(broker_name: str, state: GroupState, live: Mapping[int, int]) -> str:
    """The sentence a group without an electable replica is known by (logs, refusals)."""
    holders = _holders(state)
    missing = sorted(state.waiting_for) or sorted(r for r in holders if r not in live) \
        or sorted(holders)
    if not missing:
        return (f"broker group {broker_name} has no master: no replica that held its confirmed "
                f"offset {state.confirmed_offset} is left (every one lost its copy); only an "
                f"operator's unclean election ends the wait")
    return (f"broker group {broker_name} has no master: no live replica holds its confirmed "
            f"offset {state.confirmed_offset} under an in-sync incarnation; waiting for "
            f"replica(s) {missing} to return (or an operator's unclean election)")


def _kept(in_sync: frozenset[int], leaders: Mapping[int, str]) -> dict[int, str]:
    """The eligible leaders a set keeps: none once it has two members (acknowledgements may
    resume), never a member itself, never one without an incarnation."""
    if len(in_sync) >= 2:
        return {}
    return {r: inc for r, inc in leaders.items() if r not in in_sync and inc}


def _left_holding(state: GroupState, new_set: frozenset[int], master: int,
                  quorum: Iterable[int]) -> dict[int, str]:
    """The eligible leaders after the set becomes `new_set` under `master`: the old ones and
    the members it removes, each under the incarnation it was counted with — only if `master`
    acknowledges with a quorum (else it may acknowledge alone and nobody else is complete)."""
    if master not in set(quorum):
        return {}
    removed = {r: state.incarnations.get(r, "") for r in state.in_sync - new_set}
    return _kept(new_set, {**state.eligible_leaders, **removed})


def _best(candidates: Mapping[int, int]) -> int:
    """The most complete replica; ties go to the lowest id so the choice is deterministic."""
    return min(candidates, key=lambda replica: (-candidates[replica], replica))


def elect(state: GroupState, live: Mapping[int, int], unclean: bool = False,
          preferred: int | None = None, epoch_floor: int = 0,
          incarnations: Mapping[int, str] | None = None,
          alive: Iterable[int] | None = None, quorum: Iterable[int] = ()) -> Election:
    """Choose a new master among `live` (replica id -> log end) and bump the epoch — above
    the stored one and above `epoch_floor`, the highest epoch a live replica reports (so an
    epoch the store forgot it granted is never granted again).

    Clean: a live member of the in-sync set that still holds the copy (`holds_copy`: its
    incarnation, or at least the confirmed offset) — `preferred` if it is one, else the one
    with the largest log end. Unclean (only when `unclean`): the live replica with the largest
    log end; the confirmed offset then restarts at its log end. The new in-sync set keeps the
    old members that still qualify plus the new master. Raises NoEligibleReplica when nobody
    qualifies.

    `alive`: the live replicas that may become master (default: all of `live`) — those that
    proved they are alive since the master was lost (`proven`); the others that qualify stay
    in the set (they hold the copy) but are not elected. `quorum`: the replicas that
    acknowledge only with a quorum — a clean election that leaves such a master alone in the
    set keeps the members it removes as eligible leaders (`eligible_leaders`)."""
    incarnations = incarnations or {}
    electable = set(live) if alive is None else set(alive) & set(live)
    qualified = eligible(state, live, incarnations)
    candidates = {r: end for r, end in qualified.items() if r in electable}
    clean = bool(candidates)
    if not clean:
        if not unclean or not electable:
            raise NoEligibleReplica(
                f"no live in-sync replica holds the confirmed offset {state.confirmed_offset} "
                f"(in-sync {sorted(state.in_sync)}, live {sorted(electable)}) and unclean "
                f"election is {'enabled but nobody is live' if unclean else 'disabled'}")
        candidates = {r: live[r] for r in electable}
    master = preferred if preferred in candidates else _best(candidates)
    members = frozenset({master} | (set(qualified) if clean else set()))
    recorded = {r: incarnations.get(r) or recorded_copy(state, r) or "" for r in members}
    new = GroupState(master, max(state.epoch, epoch_floor) + 1, members,
                     incarnations={r: inc for r, inc in recorded.items() if inc},
                     confirmed_offset=state.confirmed_offset if clean else live[master],
                     eligible_leaders=_left_holding(state, members, master, quorum)
                     if clean else {})
    return Election(new, state.master, clean, dict(live),
                    lost_bytes=0 if clean else max(0, state.confirmed_offset - live[master]))


def wait(state: GroupState, live: Mapping[int, int], epoch_floor: int = 0,
         present: Iterable[int] | None = None) -> GroupState:
    """No live replica may be elected: record who the group waits for — the members and
    eligible leaders that are not live (all of them if they all are). A disqualified master
    that is live (a wiped master back under its id; `present`: the replicas with a live key,
    default `live`) is deposed — master -1 at a new epoch — so it never serves the group from
    an empty log."""
    holders = _holders(state)
    waiting = frozenset(r for r in holders if r not in live) or holders
    present = set(live) if present is None else set(present)
    if disqualified(state) and state.master in present:
        return state.replace(master=NO_MASTER, epoch=max(state.epoch, epoch_floor) + 1,
                             master_addr="", master_ha_addr="", waiting_for=waiting)
    return state.replace(waiting_for=waiting)


def elect_unclean(state: GroupState, live: Mapping[int, int], epoch_floor: int = 0,
                  incarnations: Mapping[int, str] | None = None,
                  preferred: int | None = None) -> Election:
    """An operator's forced unclean election (`tidemq cluster elect --unclean`): the live
    replica with the largest log end (or `preferred`), alone in sync, whether or not it holds
    the confirmed offset. `lost_bytes` says how much of what was acknowledged may be gone."""
    if not live:
        raise NoEligibleReplica(f"no live replica to elect (in-sync {sorted(state.in_sync)})")
    if preferred is not None and preferred not in live:
        raise NoEligibleReplica(f"replica {preferred} cannot become master: it is not live "
                                f"(live {sorted(live)})")
    master = preferred if preferred is not None else _best(live)
    incarnation = (incarnations or {}).get(master, "")
    new = GroupState(master, max(state.epoch, epoch_floor) + 1, frozenset({master}),
                     incarnations={master: incarnation} if incarnation else {},
                     confirmed_offset=live[master])
    return Election(new, state.master, False, dict(live),
                    lost_bytes=max(0, state.confirmed_offset - live[master]))


def elect_preferred(state: GroupState, live: Mapping[int, int],
                    preferred: int | None, epoch_floor: int = 0,
                    incarnations: Mapping[int, str] | None = None) -> Election:
    """An operator's election (`tidemq broker elect`): move leadership to `preferred`, which
    must be a live in-sync replica; None = the best live in-sync replica other than the master.
    Never unclean. Choosing the current live master changes nothing (same state, same epoch)."""
    qualified = eligible(state, live, incarnations)
    if preferred is None:
        others = {r: end for r, end in qualified.items() if r != state.master}
        if not others:
            raise NoEligibleReplica(
                f"no live in-sync replica other than master {state.master} to hand over to "
                f"(in-sync {sorted(state.in_sync)}, live {sorted(live)})")
        preferred = _best(others)
    if preferred not in qualified:
        why = ("not live" if preferred not in live else "not in the in-sync set"
               if preferred not in state.in_sync else
               f"below the confirmed offset {state.confirmed_offset} or under another store")
        raise NoEligibleReplica(
            f"replica {preferred} cannot become master: it is {why} "
            f"(in-sync {sorted(state.in_sync)}, live {sorted(live)})")
    if preferred == state.master:
        return Election(state, state.master, True, dict(live))
    return elect(state, live, unclean=False, preferred=preferred, epoch_floor=epoch_floor,
                 incarnations=incarnations)


def alter_in_sync(state: GroupState, epoch: int, master: int,
                  new_set: Iterable[int], incarnations: Mapping[int, str] | None = None,
                  live_incarnations: Mapping[int, str] | None = None,
                  quorum: bool = False) -> GroupState:
    """The master's proposal of a new in-sync set, accepted only from the current master at
    the current epoch (a deposed master's late shrink must never shrink the new master's set),
    and only from the master's live incarnation (a master restarted at the same epoch: its
    previous process's late proposal is refused, NOT_MASTER), and only if the master stays in
    it. The epoch does not change.

    `incarnations`: the incarnation the master counted each member under (its handshake). A
    joining member proposed under an incarnation other than the one its live key shows
    (`live_incarnations`) is refused: the master has not seen that copy catch up. Members that
    stay keep what the set recorded (`refresh` follows their restarts), so a shrink is never
    refused for a member the master cannot reach.

    `quorum`: the master acknowledges only with a quorum. A shrink that leaves it alone keeps
    the removed members as eligible leaders (nothing can be acknowledged until the set grows
    again); a set of two or more forgets them (acknowledgements resume)."""
    proposed = frozenset(new_set)
    incarnations, live_incarnations = incarnations or {}, live_incarnations or {}
    if epoch != state.epoch:
        raise StaleEpoch(f"epoch {epoch} is not the group's epoch {state.epoch}")
    if master != state.master:
        raise NotMaster(f"replica {master} is not master of epoch {state.epoch} "
                        f"(master is {state.master})")
    proposer, serving = incarnations.get(master, ""), live_incarnations.get(master, "")
    if proposer and serving and proposer != serving:
        raise NotMaster(f"replica {master} proposes as incarnation {proposer} but is live as "
                        f"{serving}: a previous process of the master no longer speaks for the "
                        f"group")
    if master not in proposed:
        raise InvalidInSyncSet(f"the in-sync set {sorted(proposed)} must contain the master "
                               f"{master}")
    if any(replica < 0 for replica in proposed):
        raise InvalidInSyncSet(f"replica ids must be >= 0, got {sorted(proposed)}")
    recorded = {}
    for replica in sorted(proposed):
        counted = incarnations.get(replica, "")
        current = live_incarnations.get(replica, "")
        if replica in state.in_sync:
            incarnation = state.incarnations.get(replica, "") or counted
        else:
            if counted and current and counted != current:
                raise InvalidInSyncSet(
                    f"replica {replica} caught up under incarnation {counted} but is live "
                    f"under {current}: it must catch up under its new incarnation first")
            incarnation = counted or current
        if incarnation:
            recorded[replica] = incarnation
    return state.replace(in_sync=proposed, incarnations=recorded,
                         eligible_leaders=_left_holding(state, proposed, master,
                                                        {master} if quorum else ()))


class LiveKey(Protocol):
    """What `reconcile` reads of a replica's live key (`store.LiveReplica`)."""

    log_end: int
    epoch: int
    fence_ms: int        # > 0: a broker that rewrites its key at every refresh
    incarnation: str
    confirmed: int
    quorum_acks: bool
    mod_revision: int    # the revision of its last write


@dataclass(frozen=True)
class Decision:
    """`reconcile`'s answer: the state to store (None = nothing to store yet), the election
    made if any, and — when the group has no serving master afterwards (`needs_master`) — why:
    `waiting` (nobody may be elected) or `pending` (in-sync candidates whose live keys have
    not been rewritten since the master was lost: the next rewrite elects, an expiry ends
    their candidacy)."""

    state: GroupState | None
    election: Election | None = None
    needs_master: bool = False
    waiting: str = ""
    pending: frozenset[int] = frozenset()


def proven(live: Mapping[int, LiveKey], lost_at: int) -> dict[int, int]:
    """Live replicas that showed they were alive after revision `lost_at` (the master's loss),
    id -> log end: their live key was written after it. A key outlives its process by up to
    its lease TTL, but a killed process writes nothing; a replica that does not rewrite its key
    (`fence_ms` 0, an older broker) cannot prove it and counts as live while its key lasts."""
    return {r: key.log_end for r, key in live.items()
            if key.mod_revision > lost_at or key.fence_ms <= 0}


def reconcile(state: GroupState | None, live: Mapping[int, LiveKey], *, lost_at: int,
              unclean: bool = False) -> Decision:
    """The controller's rule for one group given every live key (the core of the loop):

    - a group seen for the first time is initialised (`initial`);
    - what live replicas say is folded in (`refresh`, with the live master's confirmed
      offset);
    - a live master that still holds the copy, at an epoch no live replica is above, keeps
      the group (`waiting_for` cleared);
    - otherwise a master is elected (`elect`) among the replicas that proved they are alive
      since `lost_at`, the revision at which the controller first saw the group without a
      serving master. While an in-sync candidate has not proved it yet, nothing is decided
      (not even an unclean election): its next rewrite, or its key's expiry, decides. With
      nobody to elect, the group waits (`wait`)."""
    ends = {r: key.log_end for r, key in live.items()}
    incarnations = {r: key.incarnation for r, key in live.items() if key.incarnation}
    floor = max((key.epoch for key in live.values()), default=0)
    if state is None:
        return Decision(initial(ends, floor, incarnations) if live else None)
    master = live.get(state.master)
    confirmed = master.confirmed if master is not None and master.epoch == state.epoch \
        and master.confirmed >= 0 else None
    state = refresh(state, ends, incarnations, confirmed,
                    None if master is None else master.quorum_acks)
    if master is not None and not disqualified(state) and floor <= state.epoch:
        return Decision(state.replace(waiting_for=frozenset()))
    if not live:
        return Decision(state, needs_master=True)
    alive = proven(live, lost_at)
    pending = frozenset(eligible(state, ends, incarnations)) - set(alive)
    try:
        election = elect(state, ends, unclean and not pending, epoch_floor=floor,
                         incarnations=incarnations, alive=alive,
                         quorum={r for r, key in live.items() if key.quorum_acks})
    except NoEligibleReplica as exc:
        if pending:
            return Decision(state, needs_master=True, pending=pending)
        return Decision(wait(state, alive, floor, present=ends), needs_master=True,
                        waiting=str(exc))
    return Decision(election.state, election)
