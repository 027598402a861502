"""The broker's answer-by arithmetic (broker/deadlines.py): a send waiting for its replicas or
its fsync is answered a margin — max(50 ms, 10 % of what is left) — before its caller gives up,
never at a negative delay, and never later for a caller with less time left."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.broker.deadlines import (
    MARGIN_FRACTION,
    MIN_MARGIN_S,
    answer_within,
    answer_within_deadline,
    call_deadline,
)


@pytest.mark.parametrize(("remaining", "within"), [
    (3.0, 2.7),      # the SDK's send timeout: 10 % = 300 ms
    (1.0, 0.9),      # 10 % = 100 ms
    (0.3, 0.25),     # 10 % = 30 ms < 50 ms: the floor
    (0.05, 0.0),     # nothing left after the margin: answer at once
    (0.0, 0.0),
    (-1.0, 0.0),     # already past: at once, not "in -1 s"
])
def test_the_answer_comes_a_margin_before_the_callers_deadline(remaining, within):
    assert answer_within(remaining) == pytest.approx(within)


@given(st.floats(min_value=0, max_value=86_400), st.floats(min_value=0, max_value=86_400))
def test_the_margin_is_kept_and_less_time_never_means_a_later_answer(first, second):
    shorter, longer = sorted((first, second))
    assert 0 <= answer_within(shorter) <= answer_within(longer)
    for remaining in (shorter, longer):
        margin = max(MIN_MARGIN_S, MARGIN_FRACTION * remaining)
        assert answer_within(remaining) <= max(0.0, remaining - margin) + 1e-9


class Context:
    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining

    def time_remaining(self) -> float | None:
        return self.remaining


def test_a_call_without_deadline_has_no_answer_by():
    assert call_deadline(None) is None
    assert call_deadline(Context(None)) is None
    assert answer_within_deadline(None) is None


def test_the_answer_by_follows_the_time_left_now_not_when_the_call_arrived():
    before = time.monotonic()
    deadline = call_deadline(Context(2.0))
    assert before + 2.0 <= deadline <= time.monotonic() + 2.0
    assert 1.7 < answer_within_deadline(deadline) <= 1.8
    assert answer_within_deadline(time.monotonic() + 1.0) <= 0.9
    assert answer_within_deadline(time.monotonic() - 5.0) == 0.0
