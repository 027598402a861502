"""poll: the one wait for a remote state (admin and gateway topic creation)."""

from __future__ import annotations

import itertools

from tidemq.common.polling import poll


def test_returns_the_first_outcome_that_holds():
    counter = itertools.count()
    assert poll(lambda: next(counter), 30, interval=0) == 1
    calls = itertools.count()
    outcome = poll(lambda: (next(calls) >= 3, "brokers"), 30, interval=0,
                   until=lambda o: o[0])
    assert outcome == (True, "brokers")


def test_at_the_deadline_returns_the_last_outcome():
    assert poll(lambda: (False, ["broker-a"]), 0, until=lambda o: o[0]) == (False, ["broker-a"])
    assert poll(lambda: None, 0) is None
