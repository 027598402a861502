"""The controller's probe of masters (controller/probe.py) with a scripted health check: how
long checks have failed, refused vs not answered, that an answer resets it, and that a master
restarted at the same address (a new incarnation) starts from nothing."""

from __future__ import annotations

import threading

from tidemq.nameserver.controller.probe import MasterProber

from tests.support.processes import wait_until

OLD, NEW = ("m:1", "a:1@5"), ("m:1", "a:2@9")   # (address, incarnation identity)


def test_failing_since_the_first_failed_check_until_one_is_answered():
    answers = {"m:1": (False, True)}   # addr -> (answered SERVING, refused)
    checked = threading.Event()

    def check(addr, timeout_s):
        checked.set()
        return answers[addr]

    targets = [{OLD}]   # replaced, never mutated (as the controller does)
    prober = MasterProber(lambda: targets[0], interval_s=0.01, timeout_s=0.1, check=check).start()
    try:
        assert prober.probe("m:2", OLD[1]) is None   # never a target
        wait_until(lambda: prober.probe(*OLD) is not None, 10, message="a first check")
        first = prober.probe(*OLD)
        assert first.refused
        wait_until(lambda: prober.probe(*OLD).failing_s > first.failing_s, 10,
                   message="failing for longer")
        answers["m:1"] = (False, False)   # frozen: not answered, not refused
        wait_until(lambda: not prober.probe(*OLD).refused, 10, message="a timeout")
        assert prober.probe(*OLD).failing_s > first.failing_s   # still failing since
        assert not first.answered
        answers["m:1"] = (True, False)
        wait_until(lambda: prober.probe(*OLD).failing_s == 0, 10, message="answered")
        assert prober.probe(*OLD).answered
        targets[0] = set()   # no longer a master: forgotten
        wait_until(lambda: prober.probe(*OLD) is None, 10, message="forgotten")
        prober.reset()
    finally:
        prober.stop()


def test_a_master_restarted_at_the_same_address_is_judged_from_its_own_checks():
    """The old process answered, then was killed (refused); the new one registers at the same
    address before its gRPC server listens. Nothing of the old one's streak is reported for
    the new incarnation, and the new one has not answered yet (so refusals prove nothing)."""
    answers = {"m:1": (True, False)}
    targets = [{OLD}]
    prober = MasterProber(lambda: targets[0], interval_s=0.01, timeout_s=0.1,
                          check=lambda addr, timeout_s: answers[addr]).start()
    try:
        wait_until(lambda: (p := prober.probe(*OLD)) is not None and p.answered, 10,
                   message="the old process answered")
        answers["m:1"] = (False, True)   # killed
        wait_until(lambda: prober.probe(*OLD).refused, 10, message="the old process refused")
        targets[0] = {NEW}               # restarted: a new incarnation at the same address
        assert prober.probe(*NEW) is None
        wait_until(lambda: prober.probe(*NEW) is not None, 10, message="a check of the new one")
        fresh = prober.probe(*NEW)
        assert fresh.refused and not fresh.answered
        wait_until(lambda: prober.probe(*OLD) is None, 10, message="the old one forgotten")
        answers["m:1"] = (True, False)   # its server listens now
        wait_until(lambda: (p := prober.probe(*NEW)).answered and p.failing_s == 0, 10,
                   message="the new one answered")
    finally:
        prober.stop()
