"""A group's dead-letter queue (`%DLQ%{group}`): list it and re-drive messages to their
original topic (docs/consumption.md).

Nobody consumes a DLQ automatically. Listing reads every broker's DLQ queue from the group's
DLQ offset (where the last `requeue_all` stopped) to its end; a re-drive asks the broker that
holds the dead letter to re-target the stored record to its original topic with
reconsume_times 0, so the bytes are never re-encoded here.

    >>> with DeadLetters("127.0.0.1:9876", "billing") as dlq:      # doctest: +SKIP
    ...     for message in dlq.list():
    ...         print(message.msg_id, message.origin_topic, message.reconsume_times)
    ...     dlq.requeue_all()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidemq.client.consumer import PullConsumer
from tidemq.client.message import MessageExt, MessageQueue, PullStatus
from tidemq.common import errors
from tidemq.common.system_topics import dlq_topic
from tidemq.v1 import broker_pb2

PAGE = 64


@dataclass(frozen=True, slots=True)
class Redriven:
    msg_id: str        # of the dead letter
    topic: str         # where it went back to
    queue_id: int
    queue_offset: int
    broker_name: str = ""  # the broker group that held the dead letter and stored it again


class DeadLetters:
    def __init__(self, namesrv_addrs: str | Sequence[str], group: str, *,
                 timeout: float = 3.0) -> None:
        if not group:
            raise errors.InvalidArgument("group must not be empty")
        self.group = group
        self.topic = dlq_topic(group)
        self._puller = PullConsumer(namesrv_addrs, consumer_group=group, timeout=timeout)

    def queues(self) -> list[MessageQueue]:
        """The DLQ's queues ([] when nothing ever died: the topic is created on first use)."""
        try:
            return self._puller.fetch_queues(self.topic)
        except errors.TopicNotExist:
            return []

    def _start(self, mq: MessageQueue) -> int:
        committed = self._puller.committed(mq)
        low, _ = self._puller.queue_offsets(mq.topic, mq.broker_name).get(mq.queue_id, (0, 0))
        return max(low, committed or 0)

    def _read(self, mq: MessageQueue, limit: int) -> tuple[list[MessageExt], int]:
        messages, offset = [], self._start(mq)
        while len(messages) < limit:
            result = self._puller.pull(mq, offset, min(PAGE, limit - len(messages)))
            if result.status is PullStatus.OFFSET_ILLEGAL:
                offset = result.next_offset
                continue
            messages.extend(result.messages)
            if result.status is not PullStatus.FOUND or result.next_offset == offset:
                break
            offset = result.next_offset
        return messages, offset

    def list(self, limit: int = 1000) -> list[MessageExt]:
        """Dead letters not yet re-driven by `requeue_all`, oldest first per queue."""
        found: list[MessageExt] = []
        for mq in self.queues():
            found.extend(self._read(mq, limit - len(found))[0])
            if len(found) >= limit:
                break
        return found

    def requeue(self, message: MessageExt) -> Redriven:
        """Send one listed dead letter back to its original topic."""
        mq = MessageQueue(self.topic, message.broker_name, message.queue_id)
        reply = self._puller.brokers.get(self._puller.master_addr(mq)).call(
            "RedriveDeadLetter", broker_pb2.RedriveDeadLetterRequest(
                consumer_group=self.group, physical_offset=message.physical_offset))
        return Redriven(message.msg_id, reply.topic, reply.queue_id, reply.queue_offset,
                        mq.broker_name)

    def requeue_ids(self, msg_ids: Sequence[str]) -> list[Redriven]:
        """Re-drive the listed dead letters with these msg ids (NotFound names a missing one)."""
        by_id = {m.msg_id: m for m in self.list()}
        missing = [i for i in msg_ids if i not in by_id]
        if missing:
            raise errors.NotFound(f"no dead letter of group {self.group!r} has msg id "
                                  f"{', '.join(missing)}", code="DEAD_LETTER_NOT_FOUND")
        return [self.requeue(by_id[i]) for i in msg_ids]

    def requeue_all(self, limit: int = 1000) -> list[Redriven]:
        """Re-drive every listed dead letter, then move the group's DLQ offset past them so a
        second run does not send them again (at-least-once if it stops half way)."""
        done: list[Redriven] = []
        for mq in self.queues():
            messages, end = self._read(mq, limit - len(done))
            done.extend(self.requeue(m) for m in messages)
            if messages:
                self._puller.commit(mq, end)
            if len(done) >= limit:
                break
        return done

    def close(self) -> None:
        self._puller.close()

    def __enter__(self) -> DeadLetters:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
