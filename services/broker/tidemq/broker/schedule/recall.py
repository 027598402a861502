"""Recalling a scheduled message before it is delivered (RocketMQ 5.3's RecallMessage).

A recall finds the waiting record in SCHEDULE_TOPIC_XXXX by its unique id (the store's key
index), refuses one already due, and appends a marker — the unique id, the real topic, the due
time — to TIDEMQ_SYS_RECALLED. Markers are CommitLog records like any other: persisted,
replicated, and read back into the ledger by whichever replica's deliverer starts serving as
master, so a recall holds across a restart and a failover. The deliverer drops a due record
whose unique id the ledger holds.

The recall is answered only once its marker is stored, and a record the deliverer moves while
the marker is being appended is reported delivered (the recall fails), so a successful recall
is never followed by a delivery.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from enum import Enum

from tidemq.broker.messaging import Messaging
from tidemq.broker.store import AppendStatus, GetStatus
from tidemq.common import errors, record
from tidemq.common.system_topics import RECALL_TOPIC, SCHEDULE_TOPIC

PAGE = 512
KEEP_AFTER_DUE_MS = 24 * 3600 * 1000   # a recalled record is long gone from the timer by then


class _State(Enum):
    PENDING = 1     # its marker is being appended
    RECALLED = 2    # its marker is stored
    DELIVERED = 3   # the deliverer moved it while the marker was pending


class RecallLedger:
    """The unique ids of recalled scheduled messages (with their due times), shared by the
    broker's RPC loop and the deliverer's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[_State, int]] = {}

    def begin(self, unique_id: str, due_ms: int) -> bool:
        """Mark a recall in progress; False if the message is recalled already."""
        with self._lock:
            state = self._entries.get(unique_id)
            if state is not None and state[0] is _State.RECALLED:
                return False
            self._entries[unique_id] = (_State.PENDING, due_ms)
            return True

    def confirm(self, unique_id: str) -> bool:
        """The marker is stored; False if the record was delivered meanwhile."""
        with self._lock:
            state, due = self._entries.get(unique_id, (None, 0))
            if state is _State.PENDING:
                self._entries[unique_id] = (_State.RECALLED, due)
                return True
            self._entries.pop(unique_id, None)
            return state is _State.RECALLED

    def abort(self, unique_id: str) -> None:
        with self._lock:
            if self._entries.get(unique_id, (None,))[0] is not _State.RECALLED:
                self._entries.pop(unique_id, None)

    def drops(self, unique_id: str) -> bool:
        """The deliverer is about to move this record: True if it was recalled (drop it)."""
        if not self._entries:   # the common case: nothing recalled, no lock
            return False
        with self._lock:
            state = self._entries.get(unique_id)
            if state is None:
                return False
            if state[0] is _State.PENDING:
                self._entries[unique_id] = (_State.DELIVERED, state[1])
                return False
            return state[0] is _State.RECALLED

    def load(self, markers: Iterator[tuple[str, int]], now_ms: int) -> None:
        """Replace the ledger with the stored markers (a replica starting to serve as master)."""
        entries = {unique_id: (_State.RECALLED, due) for unique_id, due in markers
                   if due + KEEP_AFTER_DUE_MS > now_ms}
        with self._lock:
            self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)


class Recalls:
    """The broker's half of RecallMessage: the checks, the marker, the ledger."""

    def __init__(self, messaging: Messaging, ledger: RecallLedger,
                 ensure_topic: Callable[[str, int], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.messaging, self.ledger, self.clock = messaging, ledger, clock
        self._ensure_topic = ensure_topic

    def find_due(self, topic: str, unique_id: str) -> int:
        """The due time of the scheduled record of `topic` with this unique id (blocking)."""
        found = self.messaging.store.query_by_key(SCHEDULE_TOPIC, unique_id, 0, 2**62, 8)
        dues = [_due(raw) for raw in found if _real_topic(raw) == topic]
        if not dues:
            raise errors.NotFound(
                f"no scheduled message of topic {topic!r} has unique id {unique_id!r} on this "
                "broker: it was not sent as a delayed message, or is older than retention",
                code="MESSAGE_NOT_FOUND")
        return max(dues)

    async def recall(self, topic: str, unique_id: str) -> int:
        """Recall it; its due time. MESSAGE_ALREADY_DELIVERED once it is due."""
        due = await asyncio.to_thread(self.find_due, topic, unique_id)
        now = int(self.clock() * 1000)
        if due <= now:
            raise _delivered(topic, unique_id, due)
        if not self.ledger.begin(unique_id, due):
            return due   # recalled before: the same answer
        try:
            await asyncio.to_thread(self._ensure_topic, RECALL_TOPIC, 1)
            marker, _ = record.encode_message(
                record.OutgoingMessage(RECALL_TOPIC, unique_id.encode(), properties={
                    record.PROP_REAL_TOPIC: topic, record.PROP_TIMER_OUT_MS: str(due)}),
                born_timestamp=now)
            result = await self.messaging.send(RECALL_TOPIC, 0, marker, 1)
        except BaseException:
            self.ledger.abort(unique_id)
            raise
        if result.status is not AppendStatus.PUT_OK:
            self.ledger.abort(unique_id)
            raise errors.ServiceUnavailable(
                f"the recall of {unique_id!r} was not stored on the in-sync replicas "
                f"({result.status.name}); it may or may not hold: recall again")
        if not self.ledger.confirm(unique_id):
            raise _delivered(topic, unique_id, due)
        return due

    def stored_markers(self) -> Iterator[tuple[str, int]]:
        """(unique id, due) of every marker in TIDEMQ_SYS_RECALLED (blocking)."""
        store = self.messaging.store
        offset = store.min_offset(RECALL_TOPIC, 0)
        end = store.max_offset(RECALL_TOPIC, 0)
        while offset < end:
            got = store.get_messages(RECALL_TOPIC, 0, offset, PAGE, 8 << 20)
            if got.status is not GetStatus.FOUND:
                break
            view = memoryview(got.records)
            for pos, header in record.scan_records(view, verify_crc=False):
                due = int(record.property_at(view, pos, header, record.PROP_TIMER_OUT_MS) or 0)
                yield bytes(record.body_at(view, pos, header)).decode(), due
            view.release()
            offset = max(offset + 1, got.next_begin_offset)


def _delivered(topic: str, unique_id: str, due: int) -> errors.PreconditionFailed:
    return errors.PreconditionFailed(
        f"the scheduled message {unique_id!r} of topic {topic!r} was due at {due} (epoch ms) "
        "and has been delivered: only a message still waiting can be recalled",
        code="MESSAGE_ALREADY_DELIVERED")


def _due(raw) -> int:
    header = record.checked_header(raw, 0, verify_crc=False)
    return int(record.property_at(raw, 0, header, record.PROP_TIMER_OUT_MS) or 0)


def _real_topic(raw) -> str:
    header = record.checked_header(raw, 0, verify_crc=False)
    return record.property_at(raw, 0, header, record.PROP_REAL_TOPIC) or ""


def unique_id_of(raw) -> str:
    header = record.checked_header(raw, 0, verify_crc=False)
    return record.property_at(raw, 0, header, record.PROP_UNIQ_KEY) or ""
