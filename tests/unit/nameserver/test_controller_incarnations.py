"""In sync means this copy of the data (issue #36): the controller's rules with incarnations
and the group's confirmed offset, as examples and as a hypothesis model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tidemq.configclient.replication import NO_MASTER, GroupState
from tidemq.nameserver.controller.state import (
    InvalidInSyncSet,
    NoEligibleReplica,
    alter_in_sync,
    elect,
    elect_unclean,
    reconcile,
    recorded_copy,
    refresh,
    wait,
)
from tidemq.nameserver.controller.store import LiveReplica

STATE = GroupState(0, 1, frozenset({0, 2}), incarnations={0: "a:1", 2: "c:1"},
                   confirmed_offset=1000)


def test_a_member_back_with_a_wiped_disk_leaves_the_set_and_is_never_elected():
    state = refresh(STATE, {0: 1000, 2: 0}, {0: "a:1", 2: "new:1"})
    assert state.in_sync == {0} and 2 not in state.incarnations
    with pytest.raises(NoEligibleReplica, match="confirmed offset 1000"):
        elect(state, {2: 0}, incarnations={2: "new:1"})   # master lost: the group waits
    waiting = wait(state, {2: 0})
    assert waiting.waiting_for == {0} and waiting.master == 0


def test_an_unclean_restart_below_the_confirmed_offset_leaves_the_set():
    assert refresh(STATE, {0: 1000, 2: 900}, {0: "a:1", 2: "c:2"}).in_sync == {0}
    kept = refresh(STATE, {0: 1000, 2: 1000}, {0: "a:1", 2: "c:2"})
    assert kept.in_sync == {0, 2} and kept.incarnations[2] == "c:2"


def test_the_old_master_back_with_its_copy_is_elected_and_a_wiped_one_deposed():
    assert elect(STATE, {0: 1200}, incarnations={0: "a:2"}).state.master == 0
    wiped = refresh(STATE, {0: 0}, {0: "z:1"})
    assert wiped.master not in wiped.in_sync
    deposed = wait(wiped, {0: 0})
    assert deposed.master == NO_MASTER and deposed.epoch == 2


def test_the_confirmed_offset_only_rises():
    assert refresh(STATE, {0: 5000}, {0: "a:1"}, confirmed=4000).confirmed_offset == 4000
    assert refresh(STATE, {0: 5000}, {0: "a:1"}, confirmed=10).confirmed_offset == 1000


def test_a_joining_member_must_be_counted_under_its_live_incarnation():
    state = STATE.replace(in_sync=frozenset({0}), incarnations={0: "a:1"})
    with pytest.raises(Exception, match="new incarnation"):
        alter_in_sync(state, 1, 0, {0, 2}, {0: "a:1", 2: "c:1"}, {2: "c:2"})
    assert alter_in_sync(state, 1, 0, {0, 2}, {2: "c:2"}, {2: "c:2"}).incarnations[2] == "c:2"


def test_the_forced_unclean_election_says_what_may_be_lost():
    election = elect_unclean(STATE, {2: 400}, incarnations={2: "new:1"})
    assert election.state.master == 2 and election.state.in_sync == {2}
    assert election.lost_bytes == 600 and election.state.confirmed_offset == 400
    assert not election.clean


@given(st.dictionaries(st.integers(0, 2), st.tuples(st.integers(0, 3000),
                                                     st.sampled_from(["a:1", "a:2", "b:1",
                                                                      "c:1", "c:2", "z:1"])),
                       min_size=1),
       st.integers(0, 2000))
def test_a_clean_election_never_goes_below_the_confirmed_offset_nor_to_another_copy(live,
                                                                                  confirmed):
    state = GroupState(0, 3, frozenset({0, 1, 2}),
                       incarnations={0: "a:1", 1: "b:1", 2: "c:1"}, confirmed_offset=confirmed)
    ends = {r: end for r, (end, _) in live.items()}
    incarnations = {r: inc for r, (_, inc) in live.items()}
    state = refresh(state, ends, incarnations)
    try:
        election = elect(state, ends, incarnations=incarnations)
    except NoEligibleReplica:
        return
    master = election.state.master
    same_process = incarnations[master] == {0: "a:1", 1: "b:1", 2: "c:1"}[master]
    assert same_process or ends[master] >= confirmed
    assert incarnations[master].split(":")[0] == "abc"[master]


# -- proof of life: a live key outlives its process ---------------------------------------------
def key(replica: int, log_end: int, incarnation: str, revision: int, *, epoch: int = 1,
        confirmed: int = -1) -> LiveReplica:
    """A live key as a broker that rewrites it every refresh leaves it (`fence_ms` > 0)."""
    return LiveReplica("g", replica, log_end=log_end, epoch=epoch, fence_ms=3000,
                       quorum_acks=True, incarnation=incarnation, confirmed=confirmed,
                       mod_revision=revision)


def test_a_killed_replicas_old_key_does_not_elect_it():
    """The colleague's sequence: master 0 frozen, member 2 killed and wiped while its old key
    (old incarnation) is still valid, master 0's key expires at revision 50. Replica 2's key
    was last written at 40: it never proves it is alive, so it is never elected; the group
    keeps 0 and 2 recorded, and once 2's new (wiped) key shows, it waits for 0."""
    live = {2: key(2, 1000, "c:1", 40)}
    decision = reconcile(STATE, live, lost_at=50)
    assert decision.election is None and decision.pending == {2} and decision.needs_master
    assert decision.state.in_sync == {0, 2}            # nothing dropped, nothing written wrong
    expired = reconcile(STATE, {}, lost_at=50)         # its key expires
    assert expired.election is None and expired.state.in_sync == {0, 2}
    back = reconcile(expired.state, {2: key(2, 0, "new:1", 60)}, lost_at=50)
    assert back.election is None and back.state.in_sync == {0}
    assert back.state.waiting_for == {0} and back.state.master == 0


def test_a_replica_that_renews_after_the_loss_is_elected_and_keeps_the_others():
    live = {1: key(1, 1000, "b:1", 45), 2: key(2, 1000, "c:1", 40)}
    state = STATE.replace(in_sync=frozenset({0, 1, 2}),
                          incarnations={0: "a:1", 1: "b:1", 2: "c:1"})
    assert reconcile(state, live, lost_at=50).pending == {1, 2}
    live[1] = key(1, 1000, "b:1", 51)
    decision = reconcile(state, live, lost_at=50)
    assert decision.election is not None and decision.election.clean
    assert decision.state.master == 1 and decision.state.in_sync == {1, 2}
    assert not decision.needs_master


def test_no_unclean_election_while_an_in_sync_candidate_may_still_prove_it_is_alive():
    live = {1: key(1, 5000, "b:1", 51), 2: key(2, 1000, "c:1", 40)}   # 1 is not a member
    decision = reconcile(STATE, live, lost_at=50, unclean=True)
    assert decision.election is None and decision.pending == {2}
    live[2] = key(2, 1000, "c:1", 52)
    assert reconcile(STATE, live, lost_at=50, unclean=True).election.clean


def test_a_serving_master_needs_no_proof_and_a_broker_that_does_not_renew_counts_as_live():
    assert not reconcile(STATE, {0: key(0, 1000, "a:1", 10)}, lost_at=50).needs_master
    legacy = LiveReplica("g", 2, log_end=1000, epoch=1, incarnation="c:1", mod_revision=10)
    assert reconcile(STATE, {2: legacy}, lost_at=50).state.master == 2


# -- eligible leaders: a group never waits for nobody while a complete copy survives ----------
def test_the_old_master_stays_electable_when_the_replica_elected_instead_loses_its_copy():
    """The window proof of life leaves: member 2 renews after master 0 is lost, is elected
    (alone: 1 is out of the set), then dies and comes back wiped. Master 2 could acknowledge
    nothing alone (quorum), so 0 — dead but complete when it was removed — is kept as an
    eligible leader: the group waits for it, not for nobody, and elects it when it returns."""
    elected = reconcile(STATE, {2: key(2, 1000, "c:1", 51)}, lost_at=50)
    assert elected.state.master == 2 and elected.state.in_sync == {2}
    assert elected.state.eligible_leaders == {0: "a:1"}
    wiped = reconcile(elected.state, {2: key(2, 0, "new:1", 60, epoch=0)}, lost_at=60)
    assert wiped.election is None and wiped.state.in_sync == set()
    assert wiped.state.waiting_for == {0} and wiped.state.master == NO_MASTER
    back = reconcile(wiped.state, {0: key(0, 1000, "a:1", 70), 2: key(2, 0, "new:1", 71)},
                     lost_at=60)
    assert back.election.clean and back.state.master == 0 and back.state.in_sync == {0}
    assert back.state.epoch > wiped.state.epoch


def test_eligible_leaders_are_forgotten_once_acknowledgements_may_resume():
    alone = elect(STATE, {2: 1000}, incarnations={2: "c:1"}, quorum={2}).state
    assert alone.eligible_leaders == {0: "a:1"}
    grown = alter_in_sync(alone, alone.epoch, 2, {1, 2}, {1: "b:1"}, {1: "b:1"}, quorum=True)
    assert grown.eligible_leaders == {}
    # without a quorum the master may acknowledge alone: nobody else is complete
    assert elect(STATE, {2: 1000}, incarnations={2: "c:1"}).state.eligible_leaders == {}
    # a shrink that leaves a quorum master alone keeps the member it removes
    shrunk = alter_in_sync(STATE, 1, 0, {0}, quorum=True)
    assert shrunk.eligible_leaders == {2: "c:1"}
    # an eligible leader back without its copy is no longer one
    assert refresh(shrunk, {2: 0}, {2: "new:1"}).eligible_leaders == {}
    assert refresh(shrunk, {2: 1000}, {2: "c:2"}).eligible_leaders == {2: "c:2"}


# -- the model: processes, stores and live keys, the controller reacting to every key event ----
MIN_IN_SYNC = 2   # SYNC_MASTER, min_in_sync_replicas 2: every replica says quorum_acks
WIPEABLE = 2      # one replica's disk may be replaced (any number of times); two copies of
                  # every acknowledged byte survive then, so the group can always recover
replica = st.sampled_from(range(3))


class IncarnationMachine(RuleBasedStateMachine):
    """Brokers as processes (running, or killed / frozen with their live key left behind until
    it expires), stores (replica 2's may be wiped), logs and live keys with revisions; the
    controller runs `reconcile` on every key event, as the service does, remembering the
    revision at which it first saw the group without a serving master. The master counts only
    the recorded in-sync set and acknowledges only with MIN_IN_SYNC members. Checked: no
    election loses an acknowledged byte or elects a process that is gone; every member and
    eligible leader that still has the store it was counted under holds every acknowledged
    byte; and once nothing is pending, a group without a master always waits for a replica
    that can end the wait cleanly — never for nobody."""

    def __init__(self) -> None:
        super().__init__()
        self.revision = 0
        self.stores = {r: f"s{r}" for r in range(3)}
        self.starts = dict.fromkeys(range(3), 1)
        self.running = set(range(3))
        self.frozen: set[int] = set()   # stopped but not killed: SIGCONT resumes them
        self.log = dict.fromkeys(range(3), 0)
        self.known_epoch = dict.fromkeys(range(3), 0)
        self.keys: dict[int, LiveReplica] = {}
        self.state: GroupState | None = None
        self.lost_at: int | None = None
        self.pending: frozenset[int] = frozenset()
        self.acked = 0
        self.wipes = 0
        for r in range(3):
            self.put(r)
        self.expand(1)   # a group of three in sync, as it runs normally
        self.expand(2)

    # -- what the brokers are -------------------------------------------------------------
    def incarnation(self, r: int) -> str:
        return f"{self.stores[r]}:{self.starts[r]}"

    def serving(self) -> int | None:
        """The master that may append and acknowledge: named, running, lease (key) alive,
        and holding the copy it was named under (the broker guard)."""
        state = self.state
        if state is None or state.master not in self.running or state.master not in self.keys:
            return None
        counted = state.incarnations.get(state.master, "")
        if state.master not in state.in_sync or counted.split(":")[0] != self.stores[
                state.master]:
            return None
        return state.master

    def confirmed(self) -> int:
        master = self.serving()
        if master is None or len(self.state.in_sync) < MIN_IN_SYNC:
            return -1
        return min(self.log[r] for r in self.state.in_sync)

    def acknowledge(self) -> None:
        self.acked = max(self.acked, self.confirmed())

    # -- live keys and the controller -----------------------------------------------------
    def put(self, r: int) -> None:
        self.revision += 1
        self.keys[r] = LiveReplica(
            "g", r, log_end=self.log[r], epoch=self.known_epoch[r], fence_ms=3000,
            quorum_acks=True, incarnation=self.incarnation(r),
            confirmed=self.confirmed() if self.serving() == r else -1,
            mod_revision=self.revision)
        self.control()

    def delete(self, r: int) -> None:
        self.revision += 1
        del self.keys[r]
        self.control()

    def control(self) -> None:
        lost_at = self.revision if self.lost_at is None else self.lost_at
        decision = reconcile(self.state, self.keys, lost_at=lost_at)
        self.lost_at = lost_at if decision.needs_master else None
        self.pending = decision.pending
        if decision.election is not None:
            new = decision.election.state
            assert decision.election.clean and new.epoch > self.state.epoch
            assert new.master in self.running, f"elected replica {new.master}, which is gone"
            assert self.log[new.master] >= self.acked, "a clean election lost acknowledged bytes"
            for r in range(3):   # epoch truncation, when each follows it
                self.log[r] = min(self.log[r], self.log[new.master])
        if decision.state is not None:
            self.state = decision.state
            for r in self.running:
                self.known_epoch[r] = max(self.known_epoch[r], self.state.epoch)

    # -- the master ---------------------------------------------------------------------------
    @rule(size=st.integers(1, 100))
    def append(self, size):
        master = self.serving()
        if master is not None and len(self.state.in_sync) >= MIN_IN_SYNC:
            self.log[master] += size
            self.acknowledge()

    @rule(follower=replica, size=st.integers(1, 200))
    def replicate(self, follower, size):
        master = self.serving()
        if master is not None and follower != master and follower in self.running:
            self.log[follower] = min(self.log[master], self.log[follower] + size)
            self.acknowledge()

    @rule(member=replica)
    def shrink(self, member):
        master = self.serving()
        if master is not None and member != master and member in self.state.in_sync:
            self.state = alter_in_sync(self.state, self.state.epoch, master,
                                       self.state.in_sync - {member}, quorum=True)
            self.control()

    @rule(candidate=replica)
    def expand(self, candidate):
        master = self.serving()
        if (master is not None and candidate in self.running and candidate in self.keys
                and candidate not in self.state.in_sync
                and self.log[candidate] >= max(self.acked, self.confirmed())):
            try:
                self.state = alter_in_sync(
                    self.state, self.state.epoch, master, self.state.in_sync | {candidate},
                    {candidate: self.incarnation(candidate)},
                    {r: key.incarnation for r, key in self.keys.items()}, quorum=True)
            except InvalidInSyncSet:   # its live key still shows its previous process
                assert self.keys[candidate].incarnation != self.incarnation(candidate)
                return
            self.control()
            self.acknowledge()

    # -- processes, stores, keys --------------------------------------------------------------
    @rule(r=replica)
    def renew(self, r):
        if r in self.running:
            self.put(r)   # a rewrite; or, its key gone, a new session's key

    @rule(r=replica)
    def kill(self, r):
        self.running.discard(r)   # its key stays until it expires
        self.frozen.discard(r)

    @rule(r=replica)
    def freeze(self, r):
        if r in self.running:
            self.running.discard(r)
            self.frozen.add(r)

    @rule(r=replica)
    def expire(self, r):
        if r not in self.running and r in self.keys:
            self.delete(r)

    @rule(r=replica)
    def resume(self, r):
        if r in self.frozen:
            self.frozen.discard(r)
            self.running.add(r)   # SIGCONT: the same process, the same incarnation

    @rule(r=replica)
    def restart(self, r):
        if r not in self.running and r not in self.frozen:
            self.starts[r] += 1
            self.running.add(r)
            if r in self.keys:
                self.delete(r)   # a restarted broker drops its old key first
            self.put(r)

    @rule()
    def wipe(self):
        if WIPEABLE not in self.running and WIPEABLE not in self.frozen:
            self.wipes += 1
            self.stores[WIPEABLE] = f"w{self.wipes}"
            self.log[WIPEABLE] = 0
            self.known_epoch[WIPEABLE] = 0

    # -- invariants -----------------------------------------------------------------------------
    def counted_copy(self, r: int) -> bool:
        """`r` still has the store the group counts it under (member or eligible leader)."""
        recorded = recorded_copy(self.state, r)
        return bool(recorded) and recorded.split(":")[0] == self.stores[r]

    @invariant()
    def every_counted_copy_holds_every_acknowledged_byte(self):
        for r in self.state.in_sync | set(self.state.eligible_leaders):
            assert self.state.incarnations.get(r) or self.state.eligible_leaders.get(r)
            if self.counted_copy(r):
                assert self.log[r] >= self.acked, (r, self.state)

    @invariant()
    def eligible_leaders_only_while_nothing_can_be_acknowledged(self):
        assert not self.state.eligible_leaders or len(self.state.in_sync) < MIN_IN_SYNC

    @invariant()
    def a_group_without_a_master_never_waits_for_nobody(self):
        has_master = self.state.master in self.keys and self.state.master in self.state.in_sync
        if has_master or self.pending or not self.keys:
            return
        assert self.state.waiting_for, f"waiting for nobody: {self.state}"
        assert any(self.counted_copy(r) for r in self.state.waiting_for), \
            f"waiting only for lost copies: {self.state} (stores {self.stores})"


IncarnationMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50,
                                                deadline=None)
TestIncarnations = IncarnationMachine.TestCase


def test_the_model_replays_the_colleagues_sequence_and_the_window_proof_of_life_leaves():
    group = IncarnationMachine()
    group.append(100)
    group.replicate(1, 100)
    group.replicate(2, 100)
    group.kill(1)                # the slave stopped for maintenance leaves the set
    group.shrink(1)
    group.append(50)
    group.replicate(2, 50)       # 150 acknowledged, on 0 and 2
    group.freeze(0)              # the master frozen ...
    group.kill(2)                # ... a slave killed, its old key still valid
    group.expire(0)              # the master's key expires: 2's stale key elects nobody
    assert group.state.master == 0 and group.pending == {2}
    group.wipe()
    group.restart(2)             # back with an empty store: out of the set
    assert group.state.in_sync == {0} and group.state.waiting_for == {0}
    group.a_group_without_a_master_never_waits_for_nobody()

    window = IncarnationMachine()
    window.kill(1)
    window.shrink(1)
    window.append(100)
    window.replicate(2, 100)     # 100 acknowledged, on 0 and 2
    window.freeze(0)
    window.expire(0)
    window.renew(2)              # 2 proves it is alive after the loss: elected, alone
    assert window.state.master == 2 and window.state.eligible_leaders == {0: "s0:1"}
    window.kill(2)
    window.expire(2)
    window.wipe()
    window.restart(2)            # the new master comes back wiped: the group waits for 0
    assert window.state.in_sync == set() and window.state.waiting_for == {0}
    window.a_group_without_a_master_never_waits_for_nobody()
    window.resume(0)
    window.renew(0)              # the old master, complete, returns: elected cleanly
    assert window.state.master == 0 and window.log[0] >= window.acked == 100
