"""Dispatcher ("reput"): turns CommitLog records into ConsumeQueue units and index entries.

It reads the log from `reput_offset` in chunks, so the queues and the index are always a pure
function of the log: after a crash the store rewinds `reput_offset` to the checkpoint and the
same code rebuilds them.
"""

from __future__ import annotations

import re
import struct
import threading
import time
import zlib
from collections.abc import Callable

from tidemq.common import record
from tidemq.common.logs import get_logger

from .commitlog import CommitLog
from .config import CQ_UNIT_SIZE
from .consume_queue import UNIT, ConsumeQueue, ConsumeQueueTable
from .index import IndexService
from .segment import MIN_RECORD_SIZE

log = get_logger(__name__)

ArrivalListener = Callable[[str, int, int], None]
_SIZE_MAGIC = struct.Struct(">iI")
# total, magic, queue_id, queue_offset, physical_offset, store_timestamp, body_len
_DISPATCH_FIELDS = struct.Struct(">iI4xi4xqq20xq20xi")
assert _DISPATCH_FIELDS.size == record.HEADER_SIZE
_CHUNK = 8 * 1024 * 1024
# The properties exactly as producers encode them (tags, optional keys, unique id, each ending
# in the separator) matched in one C call; anything else takes the general search below. A
# value cannot hold the separator, so a full match is the one and only parse.
_COMMON_PROPERTIES = re.compile(
    rb"TAGS\x01([^\x02]*)\x02(?:KEYS\x01([^\x02]*)\x02)?UNIQ_KEY\x01([^\x02]*)\x02"
)
_TAGS = b"TAGS\x01"
_KEYS = b"KEYS\x01"
_UNIQ = b"UNIQ_KEY\x01"


def property_value(properties: bytes, needle: bytes) -> bytes | None:
    """Value of the property whose `name\\x01` is `needle`, without decoding the others."""
    at = properties.find(needle)
    while at > 0 and properties[at - 1] != 2:
        at = properties.find(needle, at + 1)
    if at < 0:
        return None
    start = at + len(needle)
    end = properties.find(b"\x02", start)
    return properties[start:end if end >= 0 else len(properties)]


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
        target = self.commitlog.max_offset
        deadline = time.monotonic() + timeout_s
        with self._progress:
            while self.reput_offset < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wakeup.set()
                self._progress.wait(remaining)
        return True

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
        touched: dict[ConsumeQueue, None] = {}
        index_entries: list[tuple[int, int, int]] = []   # (key hash, physical offset, store ms)
        pos, size, filler = 0, len(chunk), False
        fields, pack_unit, crc32 = _DISPATCH_FIELDS.unpack_from, UNIT.pack_into, zlib.crc32
        find, startswith, common = chunk.find, chunk.startswith, _COMMON_PROPERTIES.fullmatch
        header_size, message_magic = record.HEADER_SIZE, record.MESSAGE_MAGIC
        topics, queues = self._topics, self.queues
        # Units are packed into one buffer for the chunk; a run (consecutive units of one
        # queue) goes to its file in one copy.
        units = bytearray(CQ_UNIT_SIZE * (size // MIN_RECORD_SIZE + 1))
        units_view = memoryview(units)
        unit_at, run_queue, run_first, run_next, run_start = 0, None, 0, -1, 0
        # The last record's queue: its queue id and its topic field (length byte + name), so
        # a record of the same queue is recognised without slicing its topic out.
        queue, last_queue_id, last_topic_field, props_skip, key_crc = None, -1, b"\xff", 0, 0
        while pos + header_size <= size:
            total, magic, queue_id, queue_offset, physical, store_ts, body_len = fields(chunk, pos)
            if magic != message_magic or total <= 0:
                if magic == record.BLANK_MAGIC:
                    filler = True
                    break
                raise RuntimeError(f"no record at commitlog offset {start + pos}")
            end = pos + total
            if end > size:
                break
            topic_at = pos + header_size + body_len
            if queue_id != last_queue_id or not startswith(last_topic_field, topic_at):
                topic_end = topic_at + 1 + chunk[topic_at]
                topic_raw = chunk[topic_at + 1:topic_end]
                topic = topics.get(topic_raw)
                if topic is None:
                    topic = topics[topic_raw] = topic_raw.decode()
                queue = queues.get_or_create(topic, queue_id)
                touched[queue] = None
                last_queue_id, last_topic_field = queue_id, chunk[topic_at:topic_end]
                props_skip = topic_end + 2 - topic_at
                key_crc = crc32(topic_raw + b"#")   # index keys are topic#key
                run_next = -1   # another queue: start a run
            if queue_offset != run_next:
                if unit_at > run_start:
                    run_queue.put_units(run_first, units_view[run_start:unit_at])
                run_queue, run_first, run_start = queue, queue_offset, unit_at
            run_next = queue_offset + 1
            props_at = topic_at + props_skip
            parsed = common(chunk, props_at, end)
            if parsed is not None:
                tags, raw_keys, uniq = parsed.groups()
                pack_unit(units, unit_at, physical, total, crc32(tags))
                unit_at += CQ_UNIT_SIZE
                if uniq:
                    index_entries.append((crc32(uniq, key_crc) & 0x7FFFFFFF, physical, store_ts))
                if raw_keys:
                    index_entries.extend((crc32(key, key_crc) & 0x7FFFFFFF, physical, store_ts)
                                         for key in raw_keys.split(b" ") if key)
                pos = end
                continue
            # Inline fast path of property_value for the two properties every record has,
            # searching the chunk in place (a value without a trailing separator runs to the
            # record end; a name preceded by anything but a separator takes the slow path).
            at = find(_TAGS, props_at, end)
            if at < 0:
                tags_hash = 0
            elif at == props_at or chunk[at - 1] == 2:
                stop = find(b"\x02", at + 5, end)
                tags_hash = crc32(chunk[at + 5:stop if stop >= 0 else end])
            else:
                tags = property_value(chunk[props_at:end], _TAGS)
                tags_hash = crc32(tags) if tags else 0
            pack_unit(units, unit_at, physical, total, tags_hash)
            unit_at += CQ_UNIT_SIZE
            at = find(_UNIQ, props_at, end)
            if at < 0:
                pass
            elif at == props_at or chunk[at - 1] == 2:
                stop = find(b"\x02", at + 9, end)
                if stop < 0:
                    stop = end
                if stop > at + 9:
                    index_entries.append((crc32(chunk[at + 9:stop], key_crc) & 0x7FFFFFFF,
                                          physical, store_ts))
            else:
                uniq = property_value(chunk[props_at:end], _UNIQ)
                if uniq:
                    index_entries.append((crc32(uniq, key_crc) & 0x7FFFFFFF, physical, store_ts))
            if find(_KEYS, props_at, end) >= 0:
                raw_keys = property_value(chunk[props_at:end], _KEYS)
                if raw_keys:
                    index_entries.extend((crc32(key, key_crc) & 0x7FFFFFFF, physical, store_ts)
                                         for key in raw_keys.split(b" ") if key)
            pos = end
        else:  # fewer than a header's bytes left: a filler (8 bytes) or a record cut by the chunk
            if pos + 8 <= size and _SIZE_MAGIC.unpack_from(chunk, pos)[1] == record.BLANK_MAGIC:
                filler = True
        count = unit_at // CQ_UNIT_SIZE
        if unit_at > run_start:
            run_queue.put_units(run_first, units_view[run_start:unit_at])
        units_view.release()
        if index_entries:
            self.index.put_hashed(index_entries)
        self._advance(segment.end_offset if filler else start + pos, touched)
        return filler or pos > 0, count

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
