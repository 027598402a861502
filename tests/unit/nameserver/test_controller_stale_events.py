"""Events about a previous incarnation of a replica never act on the current one (issue #36
follow-up). The wiped-replica sequence once ended in a spurious election: the old master came
back at the same address and, the group having kept it, at the same epoch; the replaced slave's
last report still said "master gone" (about the killed process) and the new process's gRPC
server did not listen yet (a broker writes its live key first), so the controller judged the
returned master gone, fenced out its new key and elected the slave.

The controller's view is fed real config-center events (`ReplicationView.apply`), the evidence
is gathered as the controller gathers it (`detection.gather`) and judged by `verdict`."""

from __future__ import annotations

import json

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tidemq.common.kv import KeyValue
from tidemq.configclient.replication import GroupState, group_key, live_key
from tidemq.nameserver.controller.detection import (
    GONE,
    DetectionSettings,
    Probe,
    gather,
    verdict,
)
from tidemq.nameserver.controller.probe import MasterProber
from tidemq.nameserver.controller.state import NotMaster, alter_in_sync
from tidemq.nameserver.controller.store import ReplicationView

GROUP = "broker-a"
RULES = DetectionSettings()
MASTER_ADDR = "127.0.0.1:7001"


def live(replica: int, incarnation: str, revision: int, *, created: int | None = None,
         contact: dict | None = None, role_master: bool = False) -> KeyValue:
    doc = {"addr": MASTER_ADDR if replica == 0 else f"127.0.0.1:70{replica}1",
           "ha_addr": f"127.0.0.1:70{replica}2", "epoch": 1, "log_end": 1000,
           "fence_ms": 3000, "quorum_acks": True, "incarnation": incarnation,
           "confirmed": 1000 if role_master else -1}
    if contact is not None:
        doc["contact"] = contact
    return KeyValue(live_key(GROUP, replica), json.dumps(doc).encode(),
                    revision if created is None else created, revision, 1)


def deleted(replica: int, revision: int) -> KeyValue:
    return KeyValue(live_key(GROUP, replica), b"", 0, revision, 0)


def group(state: GroupState, revision: int) -> KeyValue:
    return KeyValue(group_key(GROUP), json.dumps(state.to_json()).encode(), 1, revision, 1)


GONE_CONTACT = {"epoch": 1, "silent_ms": 9000, "gone": True}
HEARD = {"epoch": 1, "silent_ms": 50, "gone": False}


def judge(view: ReplicationView, probe: Probe | None):
    state = view.groups[GROUP].state
    evidence = gather(state, view.live[GROUP], lambda key: probe, now=0.0)
    return None if evidence is None else verdict(evidence, RULES)


def the_wiped_replica_sequence() -> ReplicationView:
    """Up to the old master's return: the events the controller saw, in revision order."""
    view = ReplicationView()
    events = [
        (live(0, "a:1", 10, role_master=True), False),
        (live(2, "c:1", 11, contact=HEARD), False),
        (group(GroupState(0, 1, frozenset({0, 2}), incarnations={0: "a:1", 2: "c:1"},
                          confirmed_offset=1000), 12), False),
        # slave 2's disk replaced: its old key deleted by the new process, its new key written;
        # it follows the (frozen, then killed) master's address at epoch 1 and reports it gone
        (deleted(2, 13), True),
        (live(2, "z:1", 14), False),
        (live(2, "z:1", 15, created=14, contact=GONE_CONTACT), False),
        # the master's lease expires: the group waits for it, master 0 at epoch 1
        (deleted(0, 16), True),
        (group(GroupState(0, 1, frozenset({0}), incarnations={0: "a:1"},
                          confirmed_offset=1000, waiting_for=frozenset({0})), 17), False),
        # the old master returns (a new process, same store, same address): kept at epoch 1
        (live(0, "a:2", 18, role_master=True), False),
        (group(GroupState(0, 1, frozenset({0}), incarnations={0: "a:2"},
                          confirmed_offset=1000), 19), False),
        # slave 2 caught up from it at once; the master puts it back in the in-sync set before
        # slave 2 rewrote its report
        (group(GroupState(0, 1, frozenset({0, 2}), incarnations={0: "a:2", 2: "z:1"},
                          confirmed_offset=1000), 20), False),
    ]
    for kv, is_delete in events:
        view.apply(kv, is_delete)
    return view


def test_a_slaves_report_about_the_previous_master_process_never_fences_out_the_returned_one():
    view = the_wiped_replica_sequence()
    # the new process's gRPC server does not listen yet: its checks are refused. Even a probe
    # that had seen this incarnation answer would not make the old report count.
    assert judge(view, Probe(0.05, refused=True, answered=True)) is None
    assert view.live[GROUP][0].registered == 18 and view.live[GROUP][2].mod_revision == 15
    # slave 2 reports again, about the new process: it hears it
    view.apply(live(2, "z:1", 21, created=14, contact=HEARD), False)
    assert judge(view, Probe(0.05, refused=True, answered=True)) is None


def test_refusals_of_a_master_that_never_answered_prove_nothing():
    """A report written after the new incarnation registered may still say "gone" (its HA
    server listens only once it is master again) while its gRPC server is not up yet."""
    view = the_wiped_replica_sequence()
    view.apply(live(2, "z:1", 21, created=14, contact=GONE_CONTACT), False)
    assert judge(view, Probe(0.05, refused=True, answered=False)) is None


def test_the_returned_master_is_still_judged_gone_once_it_is_gone():
    """The rule is about which process the evidence is for, not a blind spot: once the new
    process answered and then refused, and the slave saw its stream refused after it
    registered, the verdict is GONE at once."""
    view = the_wiped_replica_sequence()
    view.apply(live(2, "z:1", 21, created=14, contact=GONE_CONTACT), False)
    assert judge(view, Probe(0.05, refused=True, answered=True)) == GONE


def test_an_event_older_than_the_key_held_neither_removes_nor_replaces_it():
    view = the_wiped_replica_sequence()
    view.apply(deleted(0, 16), True)                     # the old key's deletion, again
    view.apply(live(0, "a:1", 15, role_master=True), False)   # the old process's value
    held = view.live[GROUP][0]
    assert held.incarnation == "a:2" and held.mod_revision == 18 and held.registered == 18
    view.apply(deleted(0, 22), True)                     # a deletion of the key held
    assert 0 not in view.live[GROUP]


def test_registered_is_where_the_key_began_showing_its_incarnation():
    view = ReplicationView()
    view.apply(live(1, "b:1", 30, created=25), False)    # read in a snapshot
    assert view.live[GROUP][1].registered == 25
    view.apply(live(1, "b:1", 31, created=25), False)    # a renewal
    assert view.live[GROUP][1].registered == 25
    view.apply(live(1, "b:2", 32, created=25), False)    # restarted without deleting it
    assert view.live[GROUP][1].registered == 32
    assert view.live[GROUP][1].identity == "b:2@32"
    view.apply(live(1, "b:2", 40), False)                # deleted unseen, created again
    assert view.live[GROUP][1].registered == 40


def test_an_in_sync_proposal_from_the_masters_previous_process_is_refused():
    state = GroupState(0, 1, frozenset({0}), incarnations={0: "a:2"}, confirmed_offset=1000)
    with pytest.raises(NotMaster, match="previous process"):
        alter_in_sync(state, 1, 0, {0, 2}, {0: "a:1", 2: "z:1"}, {0: "a:2", 2: "z:1"})
    grown = alter_in_sync(state, 1, 0, {0, 2}, {0: "a:2", 2: "z:1"}, {0: "a:2", 2: "z:1"})
    assert grown.in_sync == {0, 2}


class TwoIncarnations(RuleBasedStateMachine):
    """Replica 0, master of a group that keeps it at epoch 1, restarted once at the same
    address (incarnation A, then B), against a config center with etcd's lease rules (a key
    written under a new lease is detached from the old one: the old lease's expiry no longer
    deletes it) and the real prober's bookkeeping (`MasterProber._one`, checks scripted).
    Slave 2 reports about whichever process listens at the master's address when it writes;
    the controller's view sees every event, some twice and late (a resumed watch). Registrations,
    expiries, promotions, kills, reports and probes interleave freely.

    Invariant: while the process whose key the view holds is alive, the verdict is None. And
    detection is not switched off: once that process answered a probe, died, was refused, and
    slave 2 reported it gone after it registered, the verdict is GONE."""

    @initialize()
    def start(self):
        self.revision = 0
        self.view = ReplicationView()
        self.events: list[tuple[KeyValue, bool]] = []
        self.key: tuple[str, int, int] | None = None   # (incarnation, lease, created)
        self.leases: dict[int, bool] = {}               # lease -> alive
        self.process: dict[str, dict] = {}              # incarnation -> process state
        self.current = ""                               # the incarnation running now
        self.next_lease = 100
        self.answers: dict[str, tuple[bool, bool]] = {}
        self.prober = MasterProber(lambda: set(), interval_s=60, timeout_s=0.1,
                                   check=lambda addr, timeout_s: self.answers[addr])
        self.slave_gone_since_registration = False
        self.previous_identity = "a:0@1"   # a registration before any of these
        self._event(group(GroupState(0, 1, frozenset({0, 2}), incarnations={0: "a:1"},
                                     confirmed_offset=1000), self._next()), False)
        self._event(live(2, "z:1", self._next(), contact=HEARD), False)
        self._register("a:1")

    # -- the world --------------------------------------------------------------------------
    def _next(self) -> int:
        self.revision += 1
        return self.revision

    def _event(self, kv: KeyValue, is_delete: bool) -> None:
        self.events.append((kv, is_delete))
        self.view.apply(kv, is_delete)

    def _register(self, incarnation: str) -> None:
        """A broker start: a fresh lease, its previous process's key deleted, its own put."""
        lease, self.next_lease = self.next_lease, self.next_lease + 1
        self.leases[lease] = True
        held = self.view.live.get(GROUP, {}).get(0)
        if held is not None:
            self.previous_identity = held.identity
        if self.key is not None:
            self._event(deleted(0, self._next()), True)
        revision = self._next()
        self.key = (incarnation, lease, revision)
        self.current = incarnation
        self.process[incarnation] = {"alive": True, "grpc": False, "ha": False}
        self.slave_gone_since_registration = False
        self._event(live(0, incarnation, revision, role_master=True), False)

    def _listening(self, kind: str) -> bool:
        proc = self.process.get(self.current)
        return proc is not None and proc["alive"] and proc[kind]

    @precondition(lambda self: self.current == "a:1" and not self.process["a:1"]["alive"])
    @rule()
    def restart_as_b(self):
        self._register("a:2")

    @precondition(lambda self: self.current)
    @rule(kind=st.sampled_from(["grpc", "ha"]))
    def a_server_starts_listening(self, kind):
        proc = self.process[self.current]
        if proc["alive"]:
            proc[kind] = True

    @precondition(lambda self: self.current and self.process[self.current]["alive"])
    @rule()
    def kill(self):
        self.process[self.current]["alive"] = False

    @precondition(lambda self: self.key is not None)
    @rule()
    def renewal_or_expiry(self):
        """The live process renews its key; a dead one's lease expires (etcd deletes the key
        only if it is still attached to that lease)."""
        incarnation, lease, created = self.key
        if self.process[incarnation]["alive"]:
            self._event(live(0, incarnation, self._next(), created=created, role_master=True),
                        False)
        else:
            self.leases[lease] = False
            self.key = None
            self._event(deleted(0, self._next()), True)

    @precondition(lambda self: any(not alive for alive in self.leases.values()) or
                  len(self.leases) > 1)
    @rule()
    def an_old_lease_expires(self):
        """A lease the key is no longer attached to expires: etcd deletes nothing."""
        for lease in self.leases:
            if self.key is None or lease != self.key[1]:
                self.leases[lease] = False

    @rule()
    def slave_reports(self):
        heard = self._listening("ha")
        self._event(live(2, "z:1", self._next(), contact=HEARD if heard else GONE_CONTACT),
                    False)
        if self.key is not None and not heard:
            self.slave_gone_since_registration = True
        elif heard:
            self.slave_gone_since_registration = False

    @precondition(lambda self: len(self.events) > 1)
    @rule(data=st.data())
    def a_stale_event_is_delivered_again(self, data):
        kv, is_delete = data.draw(st.sampled_from(self.events[:-1]))
        self.view.apply(kv, is_delete)

    @precondition(lambda self: GROUP in self.view.live and 0 in self.view.live[GROUP])
    @rule(late=st.booleans())
    def a_probe_finishes(self, late):
        """A check of the incarnation the view holds, or (late) one of the previous
        registration finishing now (it saw whatever listens at the address now)."""
        identity = self.previous_identity if late else self.view.live[GROUP][0].identity
        self.answers[MASTER_ADDR] = (self._listening("grpc"), not self._listening("grpc"))
        self.prober._one((MASTER_ADDR, identity))

    # -- the properties ---------------------------------------------------------------------
    def _verdict(self):
        state = self.view.groups[GROUP].state
        evidence = gather(state, self.view.live.get(GROUP, {}),
                          lambda key: self.prober.probe(key.addr, key.identity), now=0.0)
        return None if evidence is None else verdict(evidence, RULES)

    @invariant()
    def the_view_holds_the_key_the_store_holds(self):
        held = self.view.live.get(GROUP, {}).get(0)
        if self.key is None:
            assert held is None
        else:
            assert held is not None and (held.incarnation, held.registered) == \
                (self.key[0], self.key[2])

    @invariant()
    def a_live_process_is_never_judged_failed(self):
        held = self.view.live.get(GROUP, {}).get(0)
        if held is None:
            return
        if self.process[held.incarnation]["alive"]:
            assert self._verdict() is None, f"{held.incarnation} alive but judged failed"

    @invariant()
    def a_gone_process_is_judged_gone(self):
        held = self.view.live.get(GROUP, {}).get(0)
        if held is None or self.process[held.incarnation]["alive"]:
            return
        probe = self.prober.probe(MASTER_ADDR, held.identity)
        if probe is not None and probe.answered and probe.refused \
                and self.slave_gone_since_registration:
            assert self._verdict() == GONE


TwoIncarnations.TestCase.settings = settings(max_examples=300, stateful_step_count=40,
                                             deadline=None)
test_two_incarnations = TwoIncarnations.TestCase
