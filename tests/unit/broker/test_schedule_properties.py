"""Property tests of the timer: the wheel's placement arithmetic, and the deliverer over a real
store driven by a test clock through random sends, clock steps and restarts.

Invariants: a message is never delivered before its due time; one with an exact time is
delivered in the first tick after its level-0 slot (250 ms) ended, one with a delay level in
the first tick at or after its due time, whatever the clock's steps (a jump of days
included); exact-time messages come out in due order, each level's in send order; a restart (a new deliverer from the persisted
progress) loses nothing — it may deliver a message twice (at least once)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.schedule import TimingWheel
from tidemq.broker.store import MetadataFile
from tidemq.client.message import Message

from tests.support.clock import FakeClock
from tests.unit.broker.scheduling import LEVELS, TOPIC, Scheduled

WHEEL = TimingWheel()
FINE = WHEEL.levels[0]


@given(now=st.integers(0, 2**41), ahead=st.integers(1, WHEEL.capacity_ms))
def test_a_placement_is_a_slot_not_read_yet_within_its_level_s_reach(now, ahead):
    placed = WHEEL.place(now, now + ahead)
    level = WHEEL.levels[placed.level]
    assert placed.abs_slot == level.slot(now + ahead)
    assert placed.abs_slot > level.read_up_to(now)            # read later, never skipped
    assert placed.abs_slot - level.slot(now) <= level.slots - level.guard
    assert WHEEL.level_of_queue(placed.queue_id) == level
    if placed.level:  # the finer level could not take it
        finer = WHEEL.levels[placed.level - 1]
        assert finer.slot(now + ahead) - finer.slot(now) > finer.slots - finer.guard


def test_every_queue_belongs_to_one_level_or_is_a_delay_level():
    owners = [WHEEL.level_of_queue(q) for q in range(WHEEL.queue_count)]
    assert owners[:18] == [None] * 18 and None not in owners[18:]
    assert WHEEL.capacity_ms > 3 * 24 * 3600 * 1000   # the default max_delay_ms fits


SECOND, HOUR = 1000, 3600 * 1000
dues = st.one_of(st.integers(-SECOND, 3 * SECOND), st.integers(-SECOND, 3 * SECOND),
                 st.integers(3 * SECOND, 20 * SECOND), st.integers(20 * SECOND, 30 * HOUR))
steps = st.one_of(st.integers(1, 300), st.integers(1, 300), st.integers(300, 20 * SECOND),
                  st.integers(20 * SECOND, 40 * HOUR))
operations = st.lists(st.one_of(
    st.tuples(st.just("send"), st.lists(dues, min_size=1, max_size=12)),
    st.tuples(st.just("level"), st.lists(st.integers(1, 18), min_size=1, max_size=4)),
    st.tuples(st.just("step"), steps),
    st.tuples(st.just("restart"), st.booleans())), min_size=1, max_size=40)


class Run:
    """One example: what was sent (due times), what came out, at which tick."""

    def __init__(self, broker: Scheduled, clock: FakeClock) -> None:
        self.broker, self.clock = broker, clock
        self.due: dict[bytes, int] = {}
        self.immediate: set[bytes] = set()     # due when sent: stored at once
        self.levels: dict[bytes, int] = {}     # delay-level messages: their level
        self.first_out: list[bytes] = []       # first copies, in store order
        self.seen = 0
        self.previous_tick = clock.ms()

    def send(self, due_in: list[int]) -> None:
        now = self.clock.ms()
        messages = []
        for ahead in due_in:
            body, due = f"m{len(self.due)}".encode(), max(now + ahead, 0)
            self.due[body] = due
            if due <= now:
                self.immediate.add(body)
            messages.append(Message(TOPIC, body, deliver_at_ms=due))
        self.broker.send(*messages)
        self.collect(None)

    def send_levels(self, levels: list[int]) -> None:
        now = self.clock.ms()
        messages = []
        for level in levels:
            body = f"m{len(self.due)}".encode()
            self.due[body], self.levels[body] = now + LEVELS[level - 1], level
            messages.append(Message(TOPIC, body, delay_level=level))
        self.broker.send(*messages)
        self.collect(None)

    def tick(self) -> None:
        now = self.clock.ms()
        self.broker.tick()
        self.collect(now)
        self.previous_tick = now

    def collect(self, tick_ms: int | None) -> None:
        records = self.broker.real()
        for rec in records[self.seen:]:
            body = bytes(rec.body)
            if body in self.first_out:
                continue  # a second copy after a crash: at least once
            self.first_out.append(body)
            if body in self.immediate:
                continue
            assert tick_ms is not None, "a scheduled message came out at its send"
            due = self.due[body]
            if body in self.levels:  # a level queue: at the first tick at or after its due
                assert self.previous_tick < due <= tick_ms, "a level message out of time"
                continue
            assert due < FINE.slot(tick_ms) * FINE.slot_ms, "delivered before its time"
            slot_end = (FINE.slot(due) + 1) * FINE.slot_ms
            assert self.previous_tick < slot_end, "an earlier tick should have delivered it"
        self.seen = len(records)

    def restart(self, crash: bool) -> None:
        """A new deliverer from the progress on disk (crash: without the last commits)."""
        broker = self.broker
        if not crash:
            broker.offsets.persist()
        broker.offsets = ConsumerOffsetManager(MetadataFile(broker.dir / "offsets.json"))
        broker.deliverer = broker.new_deliverer()


@settings(max_examples=40, deadline=None)
@given(operations=operations)
def test_messages_due_in_random_order_come_out_in_due_order_and_in_time(operations):
    scratch = Path(tempfile.mkdtemp(prefix="schedule-prop-"))
    clock = FakeClock(time.time())
    broker = Scheduled(scratch, clock)
    try:
        run = Run(broker, clock)
        for kind, arg in operations:
            if kind == "send":
                run.send(arg)
            elif kind == "level":
                run.send_levels(arg)
            elif kind == "step":
                clock.offset += arg / 1000
                run.tick()
            else:
                run.restart(arg)
        clock.offset += 31 * 3600   # past every due time: everything comes out
        run.tick()
        assert set(run.first_out) == set(run.due), "a message was lost"
        timed = [run.due[b] for b in run.first_out
                 if b not in run.immediate and b not in run.levels]
        assert timed == sorted(timed), "scheduled messages came out of due order"
        for level in set(run.levels.values()):   # FIFO within a level
            sent = [b for b in run.due if run.levels.get(b) == level]
            assert [b for b in run.first_out if run.levels.get(b) == level] == sent
    finally:
        broker.close()
        shutil.rmtree(scratch, ignore_errors=True)
