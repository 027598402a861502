"""Retries and dead letters: a message a consumer gave back moves to `%RETRY%{group}` or, past
the group's `retry_max_times`, to `%DLQ%{group}` (RocketMQ's sendMessageBack), and a dead
letter can be re-driven to its original topic.

Every move is one `record.retarget` of the stored bytes appended through the normal send path,
so the retry and dead-letter records are CommitLog records like any other (the replication
stream carries them, a restart keeps them), and the two system topics are ordinary topic
definitions in the config center, created on first use. Nothing is kept in memory.

A given-back message waits RocketMQ's retry back-off before it is visible in the retry topic:
retry n is stored in SCHEDULE_TOPIC_XXXX with delay level 3 + n (10 s, 30 s, 1 m, ... capped at
the last level; schedule/), and the timer moves it into `%RETRY%{group}` when due. A pop revive
is visible at once (its invisible time was the wait).
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.broker import trace_events
from tidemq.broker.messaging import Messaging
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.broker.system_topics import SystemTopics
from tidemq.common import errors, record
from tidemq.common.delays import retry_delay_level
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import DLQ_PREFIX, RETRY_PREFIX, dlq_topic, retry_topic

if TYPE_CHECKING:
    from tidemq.broker.idempotence import IdempotentSends
    from tidemq.broker.schedule import ScheduleService

log = get_logger(__name__)

# what a message sent with a delay still carries (RocketMQ keeps them; a retry must not be
# delayed again by the producer's original level)
SCHEDULE_LEFTOVERS = (record.PROP_DELAY, record.PROP_TIMER_DELIVER_MS)
DLQ_QUEUES = 1  # RocketMQ: one dead-letter queue per group and broker
REVIVE_PRODUCER = "%REVIVE%"  # the idempotent producer a revived pop's retry copy is sent as


@dataclass(frozen=True, slots=True)
class Moved:
    """Where a given-back or re-driven message was appended."""

    topic: str
    queue_id: int
    queue_offset: int
    reconsume_times: int
    dead_letter: bool = False


class RetryService:
    def __init__(self, messaging: Messaging, groups: SubscriptionGroupTable,
                 system_topics: SystemTopics, *,
                 schedule: ScheduleService | None = None) -> None:
        self.messaging = messaging
        self.groups = groups
        self.system_topics = system_topics
        self.schedule = schedule  # None: retries are visible at once (no timer)
        # Revived pops are moved through the idempotent send path (app.py sets it), so a move
        # repeated after a failure past its append stores one copy (see `move`).
        self.idempotence: IdempotentSends | None = None

    def _stored(self, physical_offset: int) -> tuple[bytes, record.Record]:
        raw = self.messaging.view(physical_offset)
        return raw, record.decode(raw)

    async def send_back(self, group: str, physical_offset: int, *, dead_letter: bool = False,
                        reconsume_times: int = 0) -> Moved:
        """Move the failed message at `physical_offset` into the group's retry or DLQ topic
        (`dead_letter`: straight to the DLQ, for orderly consumers that retried in place
        `reconsume_times` times)."""
        if not group:
            raise errors.InvalidArgument("consumer_group must not be empty")
        raw, stored = self._stored(physical_offset)
        if stored.topic.startswith(DLQ_PREFIX):
            raise errors.PreconditionFailed(
                f"message at {physical_offset} is a dead letter of {stored.topic!r}; "
                "re-drive it instead", code="MESSAGE_IS_DEAD_LETTER")
        if stored.topic.startswith(RETRY_PREFIX) and stored.topic != retry_topic(group):
            raise errors.PreconditionFailed(
                f"message at {physical_offset} is a retry of another group ({stored.topic!r})",
                code="NOT_THIS_GROUPS_RETRY")
        return await self.move(group, raw, stored, delayed=True, dead_letter=dead_letter,
                               times=max(reconsume_times, stored.reconsume_times) + 1)

    async def move(self, group: str, raw: bytes, stored: record.Record, *, delayed: bool,
                   dead_letter: bool = False, times: int = 0,
                   revive_key: str = "") -> Moved:
        """Append `stored` (the record bytes `raw`) to the group's retry topic with
        reconsume_times + 1 — `delayed`: through the timer, after the retry's delay level —
        or to its DLQ past retry_max_times (also pop's revive path).

        `revive_key` (pop's revive: the delivery's "<checkpoint>:<queue offset>") makes the
        move idempotent: the copy goes to a queue chosen by the key, through the idempotent
        send table under the producer REVIVE_PRODUCER, so moving the same delivery again — after
        an append whose answer failed, or on a new master that replays an unclosed revive —
        stores no second copy (a second copy would hand an acked message out again)."""
        definition = self.groups.effective(group)
        times = times or stored.reconsume_times + 1
        dead = dead_letter or times > definition.retry_max_times
        now_ms = int(time.time() * 1000)
        origin = {record.PROP_RETRY_TOPIC: stored.topic,
                  record.PROP_ORIGIN_MESSAGE_ID: stored.msg_id,
                  record.PROP_FIRST_FAILURE_MS: str(now_ms)}
        if dead:
            topic = await asyncio.to_thread(self.system_topics.ensure, dlq_topic(group),
                                            DLQ_QUEUES)
            queue_id = 0
        else:
            topic = await asyncio.to_thread(self.system_topics.ensure, retry_topic(group),
                                            definition.retry_queue_nums)
            queue_id = (zlib.crc32(revive_key.encode()) % topic.queues if revive_key
                        else random.randrange(topic.queues))
        keyed = {record.PROP_PRODUCER_ID: REVIVE_PRODUCER,
                 record.PROP_IDEMPOTENCE_KEY: revive_key} if revive_key else None
        moved = record.retarget(raw, topic.name, queue_id=queue_id, reconsume_times=times,
                                keep_properties=origin, set_properties=keyed,
                                drop_properties=SCHEDULE_LEFTOVERS)
        began_ns = time.time_ns()
        if delayed and not dead and self.schedule is not None:
            await self.schedule.defer(moved, topic.name, queue_id, retry_delay_level(times - 1))
            # where it will be: the retry topic's offset is known once the timer moves it
            queue_offset, physical_offset = -1, -1
        elif revive_key and self.idempotence is not None:
            kept = await self.idempotence.send(REVIVE_PRODUCER, topic.name, queue_id, moved, 1)
            queue_offset, physical_offset = kept.first_queue_offset, kept.physical_offsets[0]
        else:
            result = await self.messaging.send(topic.name, queue_id, moved, 1)
            queue_offset, physical_offset = result.first_queue_offset, result.physical_offsets[0]
        trace_events.message_moved(group, stored, topic.name, times, dead,
                                   store_host=self.messaging.store.store_host,
                                   physical_offset=physical_offset, began_ns=began_ns)
        if dead:
            log.info("dead_letter", group=group, origin=stored.topic, reconsume_times=times)
        return Moved(topic.name, queue_id, queue_offset, times, dead)

    async def redrive(self, group: str, physical_offset: int) -> Moved:
        """Append the dead letter at `physical_offset` to its original topic, reconsume_times 0."""
        raw, stored = self._stored(physical_offset)
        if stored.topic != dlq_topic(group):
            raise errors.PreconditionFailed(
                f"message at {physical_offset} is in {stored.topic!r}, not in "
                f"{dlq_topic(group)!r}", code="NOT_A_DEAD_LETTER")
        origin = stored.properties.get(record.PROP_RETRY_TOPIC, "")
        topic = self.messaging.topic(origin)  # TopicNotExist if it was deleted since
        queue_id = random.randrange(topic.queues)
        moved = record.retarget(raw, topic.name, queue_id=queue_id, reconsume_times=0)
        result = await self.messaging.send(topic.name, queue_id, moved, 1)
        trace_events.message_redriven(group, stored, topic.name)
        return Moved(topic.name, queue_id, result.first_queue_offset, 0)
