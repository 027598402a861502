"""The deliverer: on the master, moves due records of SCHEDULE_TOPIC_XXXX to their real queue.

Every tick (`schedule_tick_ms`) it reads, from its cursor, each delay-level queue up to its
first record not yet due (FIFO: one delay per level) and each wheel slot whose time came
(wheel.py): a due record is moved back with one `record.retarget` (real topic and queue,
schedule properties dropped), one not yet due but read early (a coarse slot) is placed again in
a finer slot. A tick's deliveries are appended in due order.

A record recalled before it was due (recall.py) is dropped instead of moved.

Progress is the cursor of every schedule queue and the last slot read of every wheel level,
kept as the committed offsets of the system group SCHEDULE_PROGRESS: the offset table is
persisted every few seconds and copied to the slaves (replication/offset_copy.py), so a
restarted or promoted broker goes on from where its old master was. A cursor moves only after
the tick's appends succeeded, so a crash delivers a few records twice (at least once, the
unique id tells them apart) and never loses one. A slave delivers nothing; when it becomes
master it reloads the progress it copied.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.broker import trace_events
from tidemq.broker.messaging import Messaging
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.schedule.recall import Recalls, unique_id_of
from tidemq.broker.schedule.service import SCHEDULE_PROPERTIES
from tidemq.broker.schedule.wheel import TimingWheel, WheelLevel
from tidemq.broker.store import GetStatus
from tidemq.common import errors, record
from tidemq.common.delays import DELAY_LEVEL_COUNT
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import SCHEDULE_TOPIC

log = get_logger(__name__)

PROGRESS_GROUP = "SCHEDULE_PROGRESS"
WHEEL_PROGRESS = SCHEDULE_TOPIC + "%WHEEL"  # "queue" = wheel level, "offset" = last slot read
PAGE = 512
TICK_BUDGET = 8192   # records moved per tick at most; the rest in the next one, at once


@dataclass
class _Round:
    """What one tick read: the moves to make, then the progress to commit."""

    now_ms: int
    deliveries: list[tuple[int, bytes]] = field(default_factory=list)   # (due, raw)
    replacements: list[tuple[int, bytes]] = field(default_factory=list)  # (due, raw)
    cursors: dict[int, int] = field(default_factory=dict)
    read_through: dict[int, int] = field(default_factory=dict)
    full: bool = False

    @property
    def moves(self) -> int:
        return len(self.deliveries) + len(self.replacements)


class Deliverer:
    def __init__(self, messaging: Messaging, offsets: ConsumerOffsetManager, wheel: TimingWheel,
                 *, tick_ms: int = 100, clock: Callable[[], float] = time.time,
                 recalls: Recalls | None = None) -> None:
        self.messaging, self.offsets, self.wheel = messaging, offsets, wheel
        self.tick_ms, self.clock = tick_ms, clock
        self.recalls = recalls
        self.dropped_recalled = 0
        self.cursors: dict[int, int] = {}
        self.read_through: dict[int, int] = {}
        self.delivered = 0
        self.behind = False   # the last tick left due records for the next one
        self._was_master = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- progress -------------------------------------------------------------------------------

    def load(self) -> None:
        """Take up the progress in the offset table (this broker's, or the copy of its old
        master's after a failover)."""
        self.cursors, self.read_through = {}, {}
        if self.recalls is not None:   # the recalls stored by whichever master took them
            self.recalls.ledger.load(self.recalls.stored_markers(), int(self.clock() * 1000))
        for topic, queue, offset in self.offsets.query(PROGRESS_GROUP):
            if topic == SCHEDULE_TOPIC:
                self.cursors[queue] = offset
            elif topic == WHEEL_PROGRESS:
                self.read_through[queue] = offset

    def _commit(self, done: _Round) -> None:
        self.cursors.update(done.cursors)
        self.read_through.update(done.read_through)
        entries = [(SCHEDULE_TOPIC, q, o) for q, o in done.cursors.items()]
        entries += [(WHEEL_PROGRESS, level, slot) for level, slot in done.read_through.items()]
        if entries:
            self.offsets.commit(PROGRESS_GROUP, entries)

    def waiting(self) -> int:
        """Schedule records not read yet (0 on a slave, whose cursors are not its own)."""
        if not self._was_master:
            return 0
        store, cursors = self.messaging.store, dict(self.cursors)
        return sum(max(0, store.max_offset(SCHEDULE_TOPIC, q) - cursors.get(q, 0))
                   for q in store.queue_ids(SCHEDULE_TOPIC))

    # -- one tick -------------------------------------------------------------------------------

    def _serving_master(self) -> bool:
        master = self.messaging.accepts_writes and self.messaging.store.is_master
        if master and not self._was_master:
            self.load()
        self._was_master = master
        return master

    async def tick(self) -> int:
        """Read what came due and move it; the records delivered to their real topics."""
        if not self._serving_master():
            return 0
        store = self.messaging.store
        await asyncio.to_thread(store.wait_dispatched, 1.0)
        now = int(self.clock() * 1000)
        done = _Round(now)
        for queue_id in range(DELAY_LEVEL_COUNT):
            if not done.full:
                self._read(queue_id, done, lambda due: due <= now, now)
        for level in reversed(self.wheel.levels):  # coarse first: a replacement lands finer
            self._read_level(level, done)
        await self._move(done)
        self._commit(done)
        self.delivered += len(done.deliveries)
        self.behind = done.full
        return len(done.deliveries)

    def _read_level(self, level: WheelLevel, done: _Round) -> None:
        # Wheel records are delivered at the end of their level-0 slot, never before: one due
        # but read early from a coarse slot joins its level-0 slot, so deliveries keep due order.
        fine = self.wheel.levels[0]
        deliver_before = fine.slot(done.now_ms) * fine.slot_ms
        for abs_slot in self.wheel.slots_to_read(level, self.read_through.get(level.index),
                                                 done.now_ms):
            # Take a record of this slot (delivered if due, else placed finer); stop at one of
            # a later revolution of the same queue, placed after this slot was read.
            if done.full or not self._read(level.queue(abs_slot), done,
                                           lambda due, s=abs_slot: level.slot(due) <= s,
                                           deliver_before - 1):
                return  # an unfinished slot is read again next tick
            done.read_through[level.index] = abs_slot

    def _read(self, queue_id: int, done: _Round, take, deliver_through: int) -> bool:
        """Read the queue from its cursor while `take(due)` holds, delivering records due by
        `deliver_through` and placing the others again; False if the tick's budget ran out
        before the queue's end."""
        store = self.messaging.store
        cursor = done.cursors.get(queue_id, self.cursors.get(queue_id))
        cursor = max(cursor or 0, store.min_offset(SCHEDULE_TOPIC, queue_id))
        end = store.max_offset(SCHEDULE_TOPIC, queue_id)
        while cursor < end:
            got = store.get_messages(SCHEDULE_TOPIC, queue_id, cursor, PAGE, 8 << 20)
            if got.status is not GetStatus.FOUND:
                cursor = max(cursor, min(got.next_begin_offset, end))  # a hole: retention
                break
            view = memoryview(got.records)
            for pos, header in record.scan_records(view, verify_crc=False):
                if done.moves >= TICK_BUDGET:
                    done.full = True
                    break
                due = int(record.property_at(view, pos, header, record.PROP_TIMER_OUT_MS)
                          or 0)
                if not take(due):
                    end = cursor  # the rest waits
                    break
                raw = bytes(view[pos:pos + header[record.H_TOTAL_SIZE]])
                (done.deliveries if due <= deliver_through else done.replacements).append(
                    (due, raw))
                cursor = header[record.H_QUEUE_OFFSET] + 1
            else:
                cursor = max(cursor, got.next_begin_offset)
            view.release()
            if done.full:
                break
        done.cursors[queue_id] = cursor
        return not done.full

    # -- moving records -------------------------------------------------------------------------

    async def _move(self, done: _Round) -> None:
        """Append the tick's deliveries (in due order) and replacements; raises, leaving every
        cursor where it was, if an append fails (the next tick moves them again)."""
        batches: dict[tuple[str, int], list[bytes]] = {}
        for _due, raw in sorted(done.deliveries, key=lambda item: item[0]):
            if self.recalls is not None and self.recalls.ledger.drops(unique_id_of(raw)):
                self.dropped_recalled += 1
                continue
            moved = self._to_real_topic(raw)
            if moved is not None:
                batches.setdefault(moved[0], []).append(moved[1])
        for due, raw in done.replacements:
            queue = self.wheel.place(done.now_ms, due).queue_id
            batches.setdefault((SCHEDULE_TOPIC, queue), []).append(
                record.retarget(raw, SCHEDULE_TOPIC, queue_id=queue))
        for (topic, queue), records in batches.items():
            began_ns = time.time_ns()
            await self.messaging.send(topic, queue, b"".join(records), len(records))
            if topic != SCHEDULE_TOPIC:
                trace_events.delayed_delivered(topic, queue, records, began_ns)

    def _to_real_topic(self, raw: bytes) -> tuple[tuple[str, int], bytes] | None:
        header = record.checked_header(raw, 0, verify_crc=False)
        name = record.property_at(raw, 0, header, record.PROP_REAL_TOPIC) or ""
        topic = self.messaging.topics.get(name)
        if topic is None:
            log.warning("scheduled_message_dropped", topic=name,
                        reason="its topic is not served here any more")
            return None
        queue = int(record.property_at(raw, 0, header, record.PROP_REAL_QUEUE_ID) or 0) \
            % topic.queues
        return (topic.name, queue), record.retarget(
            raw, topic.name, queue_id=queue, drop_properties=SCHEDULE_PROPERTIES,
            clear_sys_flags=record.SYS_FLAG_SCHEDULED)

    # -- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()),
                                        name="schedule-deliverer", daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.tick()
            except errors.TideMQError as exc:
                log.warning("schedule_tick_failed", error=str(exc))
            except Exception:  # keep delivering: one bad tick must not stop the timer
                log.exception("schedule_tick_failed")
            if not self.behind:
                await asyncio.to_thread(self._stop.wait, self.tick_ms / 1000)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
