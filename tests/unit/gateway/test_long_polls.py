"""A gunicorn worker's long-poll slots: a poll holds one while it waits, the rest wait not."""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.gateway.long_polls import RESERVED_THREADS, LongPolls


def test_polls_past_the_slots_are_granted_no_wait_and_a_slot_frees_on_return():
    polls = LongPolls(threads=RESERVED_THREADS + 2)
    with polls.waiting(5000) as first, polls.waiting(5000) as second:
        with polls.waiting(5000) as third:
            assert (first, second, third) == (5000, 5000, 0)
        with polls.waiting(0) as unasked:  # no wait asked: no slot taken either
            assert unasked == 0
    with polls.waiting(5000) as again:
        assert again == 5000


def test_a_worker_with_few_threads_still_parks_one_poll():
    assert LongPolls(threads=1).slots == 1


def test_the_refusal_is_a_429_that_names_the_slots_and_the_remedy():
    refusal = LongPolls(threads=RESERVED_THREADS + 8).refusal()
    assert (refusal.http_status, refusal.code, refusal.retry_after_s) == (
        429, "LONG_POLLS_EXHAUSTED", 1)
    assert "8 long-poll slots" in refusal.message and "--threads" in refusal.message


def test_a_poll_without_a_slot_that_finds_nothing_is_refused_and_one_that_finds_is_answered():
    polls = LongPolls(threads=RESERVED_THREADS + 1)
    with polls.waiting(5000):  # the one slot taken
        granted = []
        assert polls.poll(5000, lambda ms: granted.append(ms) or ["m"], lambda f: not f) == ["m"]
        with pytest.raises(errors.ResourceExhausted, match="long-poll slots taken"):
            polls.poll(5000, lambda ms: granted.append(ms) or [], lambda f: not f)
        assert polls.poll(0, lambda ms: [], lambda f: not f) == []  # no wait asked: answered
        assert granted == [0, 0]
    assert polls.poll(5000, lambda ms: [ms], lambda f: not f) == [5000]  # a slot again
