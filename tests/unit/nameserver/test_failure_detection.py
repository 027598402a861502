"""The controller's failure detection (controller/detection.py): when a master whose lease still
runs may be fenced out, and — a hypothesis state machine over the master's renewals, the config
store's compare-and-set, the controller's delayed view and freezes — that a master fenced out
never acknowledges anything after that moment."""

from __future__ import annotations

import math

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.nameserver.controller.detection import (
    FENCED,
    GONE,
    Contact,
    DetectionSettings,
    Evidence,
    Probe,
    verdict,
)

RULES = DetectionSettings()
SILENT = Contact(epoch=4, silent_s=2.5, gone=False)
FROZEN = Evidence(epoch=4, renewed_ago_s=3.6, fence_s=3.0, quorum_acks=True,
                  probe=Probe(failing_s=1.5, refused=False, answered=True),
                  slaves={1: SILENT, 2: SILENT})


def with_(evidence: Evidence, **changes) -> Evidence:
    return Evidence(**{**evidence.__dict__, **changes})


def test_a_frozen_master_is_fenced_once_its_fence_passed_and_everyone_agrees():
    assert verdict(FROZEN, RULES) == FENCED


def test_any_sign_of_life_or_a_recent_renewal_keeps_the_master():
    assert verdict(with_(FROZEN, renewed_ago_s=3.4), RULES) is None   # inside fence + margin
    assert verdict(with_(FROZEN, probe=Probe(0.0, False, True)), RULES) is None   # it answers
    assert verdict(with_(FROZEN, probe=Probe(0.5, False, True)), RULES) is None   # not long enough
    assert verdict(with_(FROZEN, probe=None), RULES) is None   # never probed (new term)
    heard = Contact(4, 0.3, False)
    assert verdict(with_(FROZEN, slaves={1: SILENT, 2: heard}), RULES) is None
    assert verdict(with_(FROZEN, fence_s=0.0), RULES) is None   # a broker that does not renew


def test_nothing_to_elect_or_slaves_of_another_epoch_leave_it_to_the_lease():
    assert verdict(with_(FROZEN, slaves={}), RULES) is None
    assert verdict(with_(FROZEN, slaves={1: SILENT, 2: None}), RULES) is None
    assert verdict(with_(FROZEN, slaves={1: SILENT, 2: Contact(3, 9.0, True)}), RULES) is None
    assert verdict(FROZEN, DetectionSettings(enabled=False)) is None


def test_a_gone_process_is_replaced_at_once_only_where_a_second_replica_confirms_acks():
    gone = Contact(4, 0.2, True)
    killed = with_(FROZEN, renewed_ago_s=0.3, probe=Probe(0.1, True, True),
                   slaves={1: gone, 2: gone})
    assert verdict(killed, RULES) == GONE
    assert verdict(with_(killed, quorum_acks=False), RULES) is None   # waits for the fence
    assert verdict(with_(killed, quorum_acks=False, renewed_ago_s=3.6,
                         probe=Probe(1.2, True, True)), RULES) == FENCED
    assert verdict(with_(killed, probe=Probe(0.1, False, True)), RULES) is None   # it still listens
    assert verdict(with_(killed, slaves={1: gone, 2: Contact(4, 0.2, False)}), RULES) is None
    # a master that never answered a probe may be starting (its key is written before its
    # gRPC server listens): refused is no proof it is gone, the fence decides
    assert verdict(with_(killed, probe=Probe(0.1, True, False)), RULES) is None


FENCE_S = 3.0


class RenewalsAndFencing(RuleBasedStateMachine):
    """One master renewing its live key (compare-and-set on its last revision) and
    acknowledging while `now < send time of its last successful renewal + fence`; a controller
    that sees each write some time after it happened, judges with `verdict` (its probe and the
    slaves always say "silent": the worst case) and fences out with a compare-and-set delete.
    Renewals are delayed at every step (in flight, applied, answered) and the master freezes."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.revision = 1            # the live key's mod revision in the store (0 = deleted)
        self.next_revision = 2
        self.master_expects = 1      # the revision the master wrote last
        self.serve_until = FENCE_S   # the first write just happened
        self.frozen = False
        self.in_flight: tuple[float, str] | None = None   # (send time, "sent" | "applied")
        self.applied_ok = False
        self.seen_revision, self.seen_at = 1, 0.0
        self.unseen: list[tuple[int, float]] = []   # writes the controller has not seen yet
        self.fenced_out_at = math.inf

    @rule(dt=st.floats(0.01, 2.0))
    def time_passes(self, dt):
        self.now += dt

    @rule()
    def freeze_or_resume(self):
        self.frozen = not self.frozen

    @precondition(lambda self: not self.frozen and self.in_flight is None)
    @rule()
    def master_sends_renewal(self):
        self.in_flight = (self.now, "sent")

    @precondition(lambda self: self.in_flight is not None and self.in_flight[1] == "sent")
    @rule()
    def store_applies_renewal(self):
        sent, _ = self.in_flight
        self.applied_ok = self.revision == self.master_expects and self.revision != 0
        if self.applied_ok:
            self.revision, self.next_revision = self.next_revision, self.next_revision + 1
            self.unseen.append((self.revision, self.now))
        self.in_flight = (sent, "applied")

    @precondition(lambda self: not self.frozen and self.in_flight is not None
                  and self.in_flight[1] == "applied")
    @rule()
    def master_gets_reply(self):
        sent, _ = self.in_flight
        self.in_flight = None
        if self.applied_ok:
            self.master_expects = self.revision
            self.serve_until = sent + FENCE_S
        else:   # fenced out: LeaseLost, nothing more under this key
            self.serve_until = -math.inf

    @precondition(lambda self: self.unseen)
    @rule()
    def controller_sees_a_write(self):
        revision, _ = self.unseen.pop(0)
        self.seen_revision, self.seen_at = revision, self.now

    @rule()
    def controller_judges(self):
        evidence = Evidence(epoch=1, renewed_ago_s=self.now - self.seen_at, fence_s=FENCE_S,
                            quorum_acks=False, probe=Probe(99.0, False, True),
                            slaves={1: Contact(1, 99.0, False)})
        if verdict(evidence, RULES) != FENCED or self.revision != self.seen_revision:
            return   # kept, or the compare-and-set delete fails: a renewal landed meanwhile
        self.revision = 0
        self.fenced_out_at = min(self.fenced_out_at, self.now)
        assert self.serve_until <= self.now, "fenced out while the master may still serve"

    @precondition(lambda self: not self.frozen)
    @rule()
    def master_acknowledges(self):
        if self.now < self.serve_until:
            assert self.now < self.fenced_out_at, "acknowledged after being fenced out"

    @invariant()
    def a_fenced_out_master_never_serves_again(self):
        assert self.serve_until <= self.fenced_out_at


RenewalsAndFencing.TestCase.settings = settings(max_examples=300, stateful_step_count=60,
                                                deadline=None)
test_renewals_and_fencing = RenewalsAndFencing.TestCase
