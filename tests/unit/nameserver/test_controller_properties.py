"""Stateful property test of the controller's rules against a model of a replica group.

The model plays the brokers: the master appends, followers copy its log, the master shrinks
and expands the in-sync set through `alter_in_sync` (expanding only with a replica whose log
end has reached the confirmed offset, as the broker's tracker does), replicas die and come
back, and the controller elects. `acked` is the highest offset ever confirmed, i.e. the end of
everything a SYNC_MASTER acknowledged. Checked: a clean election never leaves the in-sync set
and never loses an acknowledged byte; epochs strictly increase; an election that loses
acknowledged bytes is always reported unclean. The config store may also forget the last
election before anything was acknowledged under it (a Redis failover that dropped the write
the new master had already read: what confirmed reads prevent, kept as a second line): the
replicas still know the epoch they served under, and the controller's next epoch goes above
it, so no epoch is ever granted twice while a replica that acted on it lives.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.nameserver.controller.state import (
    NoEligibleReplica,
    StaleEpoch,
    alter_in_sync,
    elect,
    elect_preferred,
    initial,
)

REPLICAS = range(3)
replica = st.sampled_from(REPLICAS)


class ReplicaGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alive = set(REPLICAS)
        self.log_end = dict.fromkeys(REPLICAS, 0)
        self.state = initial(self.alive)
        self.acked = 0
        self.epochs = [self.state.epoch]
        self.reported_losses = 0
        self.known_epoch = dict.fromkeys(REPLICAS, self.state.epoch)  # what each store holds
        self.before_election = None   # the state the store could still fall back to
        self.forgot = False

    # -- what the master sees --------------------------------------------------------------
    def confirmed(self) -> int:
        return min(self.log_end[r] for r in self.state.in_sync)

    def acknowledge(self) -> None:
        if self.state.master in self.alive and self.confirmed() > self.acked:
            self.acked = self.confirmed()
            # acknowledged under this state: it was confirmed in the store (WAIT), which can
            # no longer fall back past it
            self.before_election = None

    @property
    def master_alive(self) -> bool:
        return self.state.master in self.alive

    # -- brokers ---------------------------------------------------------------------------
    @precondition(lambda self: self.master_alive)
    @rule(size=st.integers(1, 100))
    def append(self, size):
        self.log_end[self.state.master] += size
        self.acknowledge()

    @precondition(lambda self: self.master_alive)
    @rule(follower=replica, size=st.integers(1, 200))
    def replicate(self, follower, size):
        master = self.state.master
        if follower != master and follower in self.alive:
            self.log_end[follower] = min(self.log_end[master], self.log_end[follower] + size)
            self.acknowledge()

    @precondition(lambda self: self.master_alive)
    @rule(member=replica)
    def shrink(self, member):
        if member != self.state.master and member in self.state.in_sync:
            self.state = alter_in_sync(self.state, self.state.epoch, self.state.master,
                                       self.state.in_sync - {member})
            self.before_election = None   # acted on: confirmed in the store
            self.acknowledge()

    @precondition(lambda self: self.master_alive)
    @rule(candidate=replica)
    def expand(self, candidate):
        if (candidate in self.alive and candidate not in self.state.in_sync
                and self.log_end[candidate] >= self.confirmed()):
            self.state = alter_in_sync(self.state, self.state.epoch, self.state.master,
                                       self.state.in_sync | {candidate})
            self.before_election = None

    @rule(epoch_back=st.integers(1, 3), member=replica)
    def deposed_master_proposes(self, epoch_back, member):
        before = self.state
        try:
            alter_in_sync(before, before.epoch - epoch_back, before.master, {before.master})
        except StaleEpoch:
            pass
        else:
            raise AssertionError("a proposal from an older epoch was accepted")
        assert self.state == before

    @rule(victim=replica)
    def die(self, victim):
        self.alive.discard(victim)

    @rule(returner=replica)
    def come_back(self, returner):
        self.alive.add(returner)

    # -- controller --------------------------------------------------------------------------
    def floor(self) -> int:
        return max((self.known_epoch[r] for r in self.alive), default=0)

    def apply(self, election) -> None:
        new = election.state
        assert new.epoch > self.state.epoch
        assert new.epoch > self.floor(), "an epoch a live replica acted on was granted again"
        if not self.forgot:   # else only live replicas' epochs bind (checked above)
            assert new.epoch > self.epochs[-1]
        self.epochs.append(new.epoch)
        self.before_election = self.state
        for r in self.alive:
            self.known_epoch[r] = new.epoch
        end = self.log_end[new.master]
        if end < self.acked:
            assert not election.clean, "a clean election lost acknowledged messages"
            self.reported_losses += 1
            self.acked = end
        if election.clean:
            assert new.master in self.state.in_sync
        # every other replica cuts the tail the new master does not have (epoch truncation)
        for r in REPLICAS:
            self.log_end[r] = min(self.log_end[r], end)
        self.state = new

    @precondition(lambda self: not self.master_alive)
    @rule(unclean=st.booleans(), preferred=st.none() | replica)
    def master_lost(self, unclean, preferred):
        live = {r: self.log_end[r] for r in self.alive}
        try:
            election = elect(self.state, live, unclean, preferred, epoch_floor=self.floor())
        except NoEligibleReplica:
            assert not (self.state.in_sync & self.alive)
            assert not unclean or not self.alive
            return
        self.apply(election)

    @precondition(lambda self: self.master_alive)
    @rule(preferred=st.none() | replica)
    def operator_elects(self, preferred):
        live = {r: self.log_end[r] for r in self.alive}
        before = self.state
        try:
            election = elect_preferred(before, live, preferred, epoch_floor=self.floor())
        except NoEligibleReplica:
            return
        if election.state is before:
            return
        assert election.clean and election.state.master in before.in_sync
        self.apply(election)

    @precondition(lambda self: self.before_election is not None)
    @rule()
    def store_forgets_the_last_election(self):
        self.state, self.before_election, self.forgot = self.before_election, None, True

    @precondition(lambda self: self.master_alive and self.floor() > self.state.epoch)
    @rule()
    def controller_sees_replicas_ahead_of_the_store(self):
        live = {r: self.log_end[r] for r in self.alive}
        try:
            election = elect(self.state, live, epoch_floor=self.floor())
        except NoEligibleReplica:
            return
        self.apply(election)

    @invariant()
    def master_is_in_sync(self):
        assert self.state.master in self.state.in_sync

    @invariant()
    def in_sync_members_hold_every_acknowledged_byte(self):
        assert all(self.log_end[r] >= self.acked for r in self.state.in_sync)


ReplicaGroupMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60,
                                                 deadline=None)
TestReplicaGroup = ReplicaGroupMachine.TestCase
