"""Dispatcher ("reput"): turns CommitLog records into ConsumeQueue units and index entries.

It reads the log from `reput_offset` in chunks, so the queues and the index are always a pure
function of the log: after a crash the store rewinds `reput_offset` to the checkpoint and the
same code rebuilds them.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tidemq.common import record
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import COMPACTION_TOPIC, DELETED_TOPICS_TOPIC, RELOCATION_TOPIC

from .commitlog import CommitLog
from .compaction import decode_marker
from .config import CQ_UNIT_SIZE
from .consume_queue import UNIT, ConsumeQueue, ConsumeQueueTable
from .index import IndexService
from .loops import scan_chunk
from .relocation import decode_relocation
from .segment import MIN_RECORD_SIZE

log = get_logger(__name__)

ArrivalListener = Callable[[str, int, int], None]
_CHUNK = 8 * 1024 * 1024
_DELETED_TOPICS = DELETED_TOPICS_TOPIC.encode()
_COMPACTION = COMPACTION_TOPIC.encode()
_RELOCATION = RELOCATION_TOPIC.encode()


def deleted_topic_at(buf: bytes, pos: int) -> str:
    """The topic a deletion marker (a record of DELETED_TOPICS_TOPIC at `pos`) names."""
    header = record.checked_header(memoryview(buf), pos, verify_crc=False)
    return record.body_at(buf, pos, header).decode()


class Dispatcher:
    def __init__(self, commitlog: CommitLog, queues: ConsumeQueueTable, index: IndexService,
                 max_message_size: int) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.reput_offset = 0
        self._chunk = max(_CHUNK, 2 * max_message_size)
        self._listeners: list[ArrivalListener] = []
        self._topics: dict[bytes, str] = {}
        self._wakeup = threading.Event()
        self._progress = threading.Condition()
        self._dispatch_lock = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None
        # the end of the last relocation record applied (relocation.py): retention deletes
        # no segment before the read fence passed it
        self.relocated_end = 0

    def add_listener(self, listener: ArrivalListener) -> None:
        self._listeners = [*self._listeners, listener]

    # -- thread ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="store-dispatcher", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        if not self._wakeup.is_set():  # set() takes a lock and notifies; skip when pending
            self._wakeup.set()

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
        self.dispatch_available()

    def _run(self) -> None:
        while not self._stopping:
            self._wakeup.wait(1.0)  # the timeout is only a liveness backstop
            self._wakeup.clear()
            try:
                self.dispatch_available()
            except Exception:  # keep dispatching later records; the error is logged
                log.exception("dispatch failed", reput_offset=self.reput_offset)

    def wait_dispatched(self, timeout_s: float) -> bool:
        """Wait until everything in the CommitLog now is dispatched."""
        return self.wait_past(self.commitlog.max_offset - 1, timeout_s)

    def wait_past(self, offset: int, timeout_s: float) -> bool:
        """Wait until the record at CommitLog `offset` is dispatched."""
        deadline = time.monotonic() + timeout_s
        with self._progress:
            while self.reput_offset <= offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wakeup.set()
                self._progress.wait(remaining)
        return True

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No dispatch while the log and the queues are cut under it (truncation)."""
        with self._dispatch_lock:
            yield

    # -- work ------------------------------------------------------------------------------
    def dispatch_available(self) -> int:
        """Dispatch everything appended so far; returns the number of records dispatched."""
        dispatched = 0
        with self._dispatch_lock:
            while True:
                advanced, records = self._dispatch_chunk()
                dispatched += records
                if not advanced:
                    return dispatched

    def dispatch_here(self) -> None:
        """Dispatch what is appended on the caller's thread (an event loop that has just
        written and waits for its fsync anyway), saving the dispatcher thread's wake-up and
        GIL hand-off; if that thread is dispatching, make sure it looks again instead."""
        if not self._dispatch_lock.acquire(blocking=False):
            self.wake()
            return
        try:
            while self._dispatch_chunk()[0]:
                pass
        except Exception:  # as in the thread: logged, and later records still dispatched
            log.exception("dispatch failed", reput_offset=self.reput_offset)
            self.wake()
        finally:
            self._dispatch_lock.release()

    def _dispatch_chunk(self) -> tuple[bool, int]:
        start, end = self.reput_offset, self.commitlog.max_offset
        if start >= end:
            return False, 0
        if start < self.commitlog.min_offset:  # retention removed what we had not read
            self._advance(self.commitlog.min_offset, {})
            return True, 0
        segment = self.commitlog.segment_for(start)
        if segment is None:
            return False, 0
        chunk = self.commitlog.read(start, min(end, segment.end_offset, start + self._chunk) - start,
                                    copy=True)
        if chunk is None:
            return False, 0
        units = bytearray(CQ_UNIT_SIZE * (len(chunk) // MIN_RECORD_SIZE + 1))
        pos, filler, bad, runs, entries = scan_chunk(chunk, units)
        if bad:
            raise RuntimeError(f"no record at commitlog offset {start + pos}")
        touched: dict[ConsumeQueue, None] = {}
        topics, queues = self._topics, self.queues
        with memoryview(units) as units_view:
            for topic_raw, queue_id, first, unit_start, unit_end in runs:
                topic = topics.get(topic_raw)
                if topic is None:
                    topic = topics[topic_raw] = topic_raw.decode()
                queue = queues.get_or_create(topic, queue_id)
                touched[queue] = None
                queue.put_units(first, units_view[unit_start:unit_end])  # one copy per run
                if topic_raw == _DELETED_TOPICS:
                    self._drop_deleted(chunk, start, units_view[unit_start:unit_end])
                elif topic_raw == _COMPACTION:
                    self._apply_compaction(chunk, start, units_view[unit_start:unit_end])
                elif topic_raw == _RELOCATION:
                    self._apply_relocation(chunk, start, units_view[unit_start:unit_end])
        if entries:
            self.index.put_hashed(entries)
        self._advance(segment.end_offset if filler else start + pos, touched)
        return filler or pos > 0, sum(run[4] - run[3] for run in runs) // CQ_UNIT_SIZE

    def _drop_deleted(self, chunk: bytes, start: int, units: memoryview) -> None:
        """Deletion markers: the named topics' queues drop what they hold here, in log order,
        so the queues stay a pure function of the log (what came before a marker is gone, what
        comes after goes on from its offset) on every replica and after every recovery."""
        for physical, _, _ in UNIT.iter_unpack(units):
            topic = deleted_topic_at(chunk, physical - start)
            dropped = self.queues.drop_topic(topic)
            log.info("deleted topic's messages dropped from its consume queues", topic=topic,
                     queues=len(dropped), commitlog_offset=physical)

    def _apply_compaction(self, chunk: bytes, start: int, units: memoryview) -> None:
        """Compaction markers (compaction.py): the named queue's units become gaps, in log
        order, so every replica and every recovery reaches the same compacted state."""
        for physical, _, _ in UNIT.iter_unpack(units):
            try:
                header = record.checked_header(memoryview(chunk), physical - start,
                                               verify_crc=False)
                topic, queue_id, ranges = decode_marker(
                    record.body_at(chunk, physical - start, header))
            except (ValueError, struct.error, UnicodeDecodeError):
                log.error("unreadable compaction marker skipped", commitlog_offset=physical)
                continue
            marked = self.queues.get_or_create(topic, queue_id).mark_gaps(ranges)
            log.debug("compaction applied", topic=topic, queue_id=queue_id, gaps=marked,
                      commitlog_offset=physical)

    def _apply_relocation(self, chunk: bytes, start: int, units: memoryview) -> None:
        """Relocation records (relocation.py): each copied record's unit is repointed at the
        copy, in log order, once the copy is durable; its keys are indexed at the copy. A
        unit that no longer points where the copy came from (applied already, relocated
        again later, or the queue dropped) is left alone: replaying is harmless."""
        for physical, size, _ in UNIT.iter_unpack(units):
            if self.commitlog.flushed_offset < physical + size:
                self.commitlog.flush()    # the copy is durable before anything points at it
            at = physical - start
            try:
                header = record.checked_header(memoryview(chunk), at, verify_crc=False)
                body_at = at + record.HEADER_SIZE
                moved = decode_relocation(chunk[body_at:body_at + header[record.H_BODY_LEN]])
            except (ValueError, struct.error, UnicodeDecodeError):
                log.error("unreadable relocation record skipped", commitlog_offset=physical)
                continue
            copy = physical + record.HEADER_SIZE + moved.copy_at
            queue = self.queues.get_or_create(moved.topic, moved.queue_id)
            if not (queue.repoint(moved.queue_offset, moved.from_physical, copy, moved.size)
                    or queue.put_relocated(moved.queue_offset, copy, moved.size, moved.tag)):
                log.debug("relocation already applied or superseded", topic=moved.topic,
                          queue_id=moved.queue_id, queue_offset=moved.queue_offset)
            else:
                self._index_copy(chunk, body_at + moved.copy_at, moved.size, copy)
            self.relocated_end = max(self.relocated_end, physical + size)

    def _index_copy(self, chunk: bytes, at: int, size: int, copy: int) -> None:
        """Index a relocated record's keys at its copy (the dispatcher's own scan of it)."""
        scratch = bytearray(CQ_UNIT_SIZE * 2)
        _, _, bad, _, entries = scan_chunk(bytes(chunk[at:at + size]), scratch)
        if entries and not bad:
            self.index.put_hashed([(hashed, copy, stored) for hashed, _, stored in entries])

    def _advance(self, offset: int, touched: dict[ConsumeQueue, None]) -> None:
        with self._progress:
            self.reput_offset = offset
            self._progress.notify_all()
        for queue in touched:
            for listener in self._listeners:
                try:
                    listener(queue.topic, queue.queue_id, queue.max_offset)
                except Exception:
                    log.exception("arrival listener failed", topic=queue.topic)
