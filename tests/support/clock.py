"""The one fake clock of the tests: what they hand to code that takes a `clock` callable."""

from __future__ import annotations

import time


class FakeClock:
    """`start` plus an `offset` the test moves (`advance`, or set `offset` or `now`); the
    time stays an int while `start` and the moves are ints (millisecond clocks).

    `FakeClock.following_real_time()` reads the real clock plus the offset instead: never
    behind real time, for code over a store that stamps records with the real clock, so those
    stamps are never in this clock's future."""

    def __init__(self, start: float = 0) -> None:
        self._start: float | None = start
        self.offset: float = 0

    @classmethod
    def following_real_time(cls) -> FakeClock:
        clock = cls()
        clock._start = None
        return clock

    def _base(self) -> float:
        return time.time() if self._start is None else self._start

    def __call__(self) -> float:
        return self._base() + self.offset

    @property
    def now(self) -> float:
        return self()

    @now.setter
    def now(self, value: float) -> None:
        self.offset = value - self._base()

    def advance(self, by: float) -> None:
        self.offset += by

    def ms(self) -> int:
        return int(self() * 1000)
