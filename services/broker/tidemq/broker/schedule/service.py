"""Scheduled sends: a delayed record is stored out of sight in SCHEDULE_TOPIC_XXXX.

Only batches the producer marked (SendRequest.scheduled) come here; ordinary sends never look
at a property. Each record of a marked batch is read once: a DELAY level puts it in schedule
queue level-1 (RocketMQ's per-level queues), a TIMER_DELIVER_MS time in the timing wheel's slot
(wheel.py), both by one `record.retarget` with the real topic and queue and the due time
(TIMER_OUT_MS) in its properties; the body is never decoded. A due time already past (or an
unmarked record of the batch) goes to the real queue at once. The deliverer (deliverer.py)
moves each one back when due.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.broker.messaging import Messaging
from tidemq.broker.schedule.wheel import TimingWheel
from tidemq.broker.store import AppendResult, AppendStatus
from tidemq.broker.system_topics import SystemTopics
from tidemq.common import errors, record
from tidemq.common.delays import DELAY_LEVEL_COUNT
from tidemq.common.system_topics import SCHEDULE_TOPIC

# What a delivered message no longer carries (the delay asked for, where it waited).
SCHEDULE_PROPERTIES = (record.PROP_REAL_TOPIC, record.PROP_REAL_QUEUE_ID,
                       record.PROP_TIMER_OUT_MS, record.PROP_DELAY, record.PROP_TIMER_DELIVER_MS)


@dataclass(frozen=True, slots=True)
class Destination:
    topic: str
    queue_id: int


def _invalid(message: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(message, code="INVALID_DELAY")


def due_time(level_text: str, at_text: str, now_ms: int, level_ms: tuple[int, ...],
             max_delay_ms: int) -> tuple[int, int]:
    """(delay level or 0, due time in epoch ms) of a marked record's DELAY and
    TIMER_DELIVER_MS properties; (0, 0) for a record with neither. INVALID_DELAY /
    DELAY_TOO_LONG for what no broker accepts."""
    if level_text and at_text:
        raise _invalid("a message has either a delay level or a delivery time, not both")
    if level_text:
        if not level_text.isdigit() or not 1 <= int(level_text) <= DELAY_LEVEL_COUNT:
            raise _invalid(f"delay level must be 1..{DELAY_LEVEL_COUNT}, got {level_text!r}")
        level = int(level_text)
        return level, now_ms + level_ms[level - 1]
    if at_text:
        if not at_text.isdigit():
            raise _invalid(f"delivery time must be epoch milliseconds >= 0, got {at_text!r}")
        due = int(at_text)
        if due - now_ms > max_delay_ms:
            raise errors.InvalidArgument(
                f"delivery time {due} is {due - now_ms} ms ahead; this broker holds messages "
                f"at most {max_delay_ms} ms (max_delay_ms)", code="DELAY_TOO_LONG")
        return 0, due
    return 0, 0


class ScheduleService:
    def __init__(self, messaging: Messaging, system_topics: SystemTopics, wheel: TimingWheel,
                 *, level_ms: tuple[int, ...], max_delay_ms: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.messaging, self.system_topics, self.wheel = messaging, system_topics, wheel
        self.level_ms, self.max_delay_ms, self.clock = level_ms, max_delay_ms, clock

    async def ensure_topic(self) -> None:
        if self.messaging.topics.get(SCHEDULE_TOPIC) is None:
            await asyncio.to_thread(self.system_topics.ensure, SCHEDULE_TOPIC,
                                    self.wheel.queue_count)

    def schedule_queue(self, level: int, now_ms: int, due_ms: int) -> int | None:
        """The schedule queue of a record due at `due_ms` (None: due now, deliver at once)."""
        if level:
            return level - 1
        if due_ms <= now_ms:
            return None
        return self.wheel.place(now_ms, due_ms).queue_id

    def to_schedule(self, raw, real: Destination, due_ms: int, queue_id: int) -> bytes:
        return record.retarget(raw, SCHEDULE_TOPIC, queue_id=queue_id, set_properties={
            record.PROP_REAL_TOPIC: real.topic, record.PROP_REAL_QUEUE_ID: str(real.queue_id),
            record.PROP_TIMER_OUT_MS: str(due_ms)})

    async def send(self, topic_name: str, queue_id: int, records: bytes,
                   record_count: int, *, deadline: float | None = None) -> AppendResult:
        """A marked batch: each delayed record into its schedule queue, the others (and those
        already due) into `topic_name`/`queue_id`. One append per destination queue: a batch
        spread over several is not all-or-nothing (the producer's retry may then store some
        twice — at least once). `deadline`: the caller's (Messaging.send)."""
        real = Destination(topic_name, queue_id)
        self.messaging.writable_queue(topic_name, queue_id)
        view = memoryview(records)
        try:
            found = record.scan_records(view)
        except record.RecordFormatError as exc:
            raise errors.InvalidArgument(f"rejected batch: {exc}") from None
        if len(found) != record_count:
            raise errors.InvalidArgument(
                f"record_count {record_count} does not match the {len(found)} records sent")
        now = int(self.clock() * 1000)
        groups: dict[int | None, list[tuple[int, bytes]]] = {}
        for index, (pos, header) in enumerate(found):
            raw = view[pos:pos + header[record.H_TOTAL_SIZE]]
            level, due = due_time(record.property_at(view, pos, header, record.PROP_DELAY) or "",
                                  record.property_at(view, pos, header,
                                                     record.PROP_TIMER_DELIVER_MS) or "",
                                  now, self.level_ms, self.max_delay_ms)
            target = self.schedule_queue(level, now, due) if due else None
            if target is not None:
                moved = self.to_schedule(raw, real, due, target)
            elif due:  # due already: stored at once, as the timer would deliver it
                moved = record.retarget(raw, topic_name, queue_id=queue_id,
                                        drop_properties=SCHEDULE_PROPERTIES,
                                        clear_sys_flags=record.SYS_FLAG_SCHEDULED)
            else:
                moved = bytes(raw)
            groups.setdefault(target, []).append((index, moved))
        if any(target is not None for target in groups):
            await self.ensure_topic()
        physical = [0] * record_count
        first_offset, status = -1, AppendStatus.PUT_OK
        for target, items in groups.items():
            topic, queue = (topic_name, queue_id) if target is None else (SCHEDULE_TOPIC, target)
            result = await self.messaging.send(topic, queue, b"".join(r for _, r in items),
                                               len(items), deadline=deadline)
            for (index, _), offset in zip(items, result.physical_offsets, strict=True):
                physical[index] = offset
            if items[0][0] == 0:
                first_offset = result.first_queue_offset
            if result.status is not AppendStatus.PUT_OK:
                status = result.status
        return AppendResult(status, first_offset, physical, 0)

    async def defer(self, raw: bytes, topic: str, queue_id: int,
                    delay_level: int) -> AppendResult:
        """Store the record `raw` (already addressed to `topic`/`queue_id`) to be delivered
        there after the given delay level: a consumer's retry (retry.py)."""
        await self.ensure_topic()
        now = int(self.clock() * 1000)
        moved = self.to_schedule(raw, Destination(topic, queue_id),
                                 now + self.level_ms[delay_level - 1], delay_level - 1)
        return await self.messaging.send(SCHEDULE_TOPIC, delay_level - 1, moved, 1)
