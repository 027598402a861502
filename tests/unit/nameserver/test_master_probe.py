"""The controller's probe of masters (controller/probe.py) with a scripted health check: how
long checks have failed, refused vs not answered, and that an answer resets it."""

from __future__ import annotations

import threading

from tidemq.nameserver.controller.probe import MasterProber

from tests.support.processes import wait_until


def test_failing_since_the_first_failed_check_until_one_is_answered():
    answers = {"m:1": (False, True)}   # addr -> (answered SERVING, refused)
    checked = threading.Event()

    def check(addr, timeout_s):
        checked.set()
        return answers[addr]

    targets = [{"m:1"}]   # replaced, never mutated (as the controller does)
    prober = MasterProber(lambda: targets[0], interval_s=0.01, timeout_s=0.1, check=check).start()
    try:
        assert prober.probe("m:2") is None   # never a target
        wait_until(lambda: prober.probe("m:1") is not None, 10, message="a first check")
        first = prober.probe("m:1")
        assert first.refused
        wait_until(lambda: prober.probe("m:1").failing_s > first.failing_s, 10,
                   message="failing for longer")
        answers["m:1"] = (False, False)   # frozen: not answered, not refused
        wait_until(lambda: not prober.probe("m:1").refused, 10, message="a timeout")
        assert prober.probe("m:1").failing_s > first.failing_s   # still failing since then
        answers["m:1"] = (True, False)
        wait_until(lambda: prober.probe("m:1").failing_s == 0, 10, message="answered")
        targets[0] = set()   # no longer a master: forgotten
        wait_until(lambda: prober.probe("m:1") is None, 10, message="forgotten")
        prober.reset()
    finally:
        prober.stop()
