"""The hierarchical timing wheel of SCHEDULE_TOPIC_XXXX: where an exact-time message waits.

The wheel holds no message in memory: each slot of each level is a queue of the schedule topic,
so a backlog of millions costs ConsumeQueue units on disk, not Python objects. Queues 0..17
are RocketMQ's delay levels (FIFO: every message of a level has the same delay); the wheel's
levels follow. Level 0 has `slots` slots of `base_slot_ms`; each coarser level's slot is `fan`
fine slots (Kafka's hierarchical timing wheels, RocketMQ 5's timer rolls), so a 3-day delay
is re-placed at most once per level on its way down.

A slot's queue is read when its time comes (level 0: once the slot has ended, so every entry
in it is due; coarser levels: one slot early, so their entries land in a finer level before
they are due). `guard` keeps the last slots of a revolution free, so a queue holds entries of
one revolution at a time apart from the few placed after its slot was read; `lookback` is how
many already-read slots are looked at again (an append seen late by the dispatcher is still
found). This module is the arithmetic only; `deliverer.py` reads and moves the records.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.delays import DELAY_LEVEL_COUNT

BASE_SLOT_MS = 250   # level-0 precision: a message is delivered at most this (+ a tick) late
SLOTS = 64
FAN = 16             # a level-k slot spans FAN level-(k-1) slots: a quarter of its range
LEVELS = 5           # 250 ms x 16^4 x (64 - guard): about 11 days


@dataclass(frozen=True, slots=True)
class WheelLevel:
    index: int
    slot_ms: int
    slots: int
    first_queue: int
    guard: int
    lookback: int

    def slot(self, time_ms: int) -> int:
        """The absolute slot number (time // slot width) of `time_ms` at this level."""
        return time_ms // self.slot_ms

    def queue(self, abs_slot: int) -> int:
        return self.first_queue + abs_slot % self.slots

    def read_up_to(self, now_ms: int) -> int:
        """The last absolute slot whose queue is read at `now_ms`."""
        current = now_ms // self.slot_ms
        return current - 1 if self.index == 0 else current + 1

    def span_ms(self) -> int:
        """How far ahead this level takes a message: (slots - guard) slots."""
        return (self.slots - self.guard) * self.slot_ms


@dataclass(frozen=True, slots=True)
class Placement:
    level: int       # wheel level
    abs_slot: int
    queue_id: int    # of the schedule topic


class TimingWheel:
    def __init__(self, *, base_slot_ms: int = BASE_SLOT_MS, slots: int = SLOTS, fan: int = FAN,
                 levels: int = LEVELS) -> None:
        self.levels: list[WheelLevel] = []
        slot_ms, first = base_slot_ms, DELAY_LEVEL_COUNT
        for index in range(levels):
            # level 0 keeps a quarter free: its slots are re-read for a while (lookback)
            guard, lookback = (slots // 4, slots // 8) if index == 0 else (4, 2)
            self.levels.append(WheelLevel(index, slot_ms, slots, first, guard, lookback))
            slot_ms, first = slot_ms * fan, first + slots

    @property
    def queue_count(self) -> int:
        """Queues of the schedule topic: the delay levels, then every wheel slot."""
        last = self.levels[-1]
        return last.first_queue + last.slots

    @property
    def capacity_ms(self) -> int:
        """The longest delay the wheel can hold from now."""
        return self.levels[-1].span_ms() - self.levels[-1].slot_ms

    def place(self, now_ms: int, due_ms: int) -> Placement:
        """The slot of the finest level whose reach covers `due_ms` (due > now)."""
        for level in self.levels:
            due_slot = level.slot(due_ms)
            if due_slot - level.slot(now_ms) <= level.slots - level.guard:
                return Placement(level.index, due_slot, level.queue(due_slot))
        raise ValueError(f"due time {due_ms} is more than {self.capacity_ms} ms after {now_ms}")

    def level_of_queue(self, queue_id: int) -> WheelLevel | None:
        """The wheel level a schedule queue belongs to (None for a delay-level queue)."""
        for level in self.levels:
            if level.first_queue <= queue_id < level.first_queue + level.slots:
                return level
        return None

    def slots_to_read(self, level: WheelLevel, read_through: int | None,
                      now_ms: int) -> range:
        """The absolute slots of `level` to read at `now_ms`, oldest first, when every slot up
        to `read_through` was read already (None: nothing is known — a whole revolution)."""
        last = level.read_up_to(now_ms)
        oldest = last - level.slots + 1
        first = oldest if read_through is None else max(oldest,
                                                        read_through + 1 - level.lookback)
        return range(first, last + 1)
