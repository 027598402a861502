"""Retention: delete the oldest CommitLog segments by age and by disk-use ratio (docs/storage.md).

A segment's age is taken from the store timestamp of the first record after it (the moment it
was finished), so it does not depend on file mtimes that mmap writes do not reliably update.
The active segment is never deleted. Consume queue and index files below the new CommitLog
start go with it, and queue minimum offsets move up.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path

from tidemq.common import record
from tidemq.common.logs import get_logger

from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueueTable
from .disk import DiskGuard, disk_usage
from .index import IndexService

log = get_logger(__name__)
_STORE_TS = struct.Struct(">q")


def disk_used_ratio(path: Path) -> float:
    """df's Use% of the file system holding `path` (disk.DiskUsage.used_ratio)."""
    return disk_usage(path).used_ratio


class Retention:
    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: ConsumeQueueTable,
                 index: IndexService,
                 used_ratio: Callable[[Path], float] = disk_used_ratio,
                 guard: DiskGuard | None = None) -> None:
        self.config = config
        self.guard = guard   # FULL for want of a segment's room: delete until one fits
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.used_ratio = used_ratio
        self._recorrect = False   # the queue minimums are corrected once more at the next run

    def finished_at_ms(self, position: int) -> int | None:
        """When segment `position` was finished: store time of the next segment's first record."""
        segments = self.commitlog.segments
        if position + 1 >= len(segments):
            return None
        follower = segments[position + 1]
        header = self.commitlog.read(follower.base_offset, record.HEADER_SIZE)
        if header is None or record.BLANK_HEADER.unpack_from(header)[1] != record.MESSAGE_MAGIC:
            return int(segments[position].path.stat().st_mtime * 1000)
        return _STORE_TS.unpack_from(header, record.OFF_STORE_TIMESTAMP)[0]

    def over_disk(self) -> bool:
        """Forced clean-up (RocketMQ's cleanImmediately): the disk is fuller than
        `disk_max_used_ratio` or than the guard's `disk_full_ratio` (whichever is lower), or
        an append found no room for the next segment and there still is none."""
        config = self.config
        limit = min(config.disk_max_used_ratio, config.disk_full_ratio)
        if self.used_ratio(config.data_dir) > limit:
            return True
        return self.guard is not None and self.guard.short_of_segment()

    def run_once(self, now_ms: int | None = None) -> int:
        """Delete what is due now; returns the number of segments removed."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        hour = time.localtime(now_ms / 1000).tm_hour
        age_allowed = self.config.delete_when_hour is None or hour == self.config.delete_when_hour
        max_age_ms = self.config.retention_hours * 3600 * 1000
        removed = 0
        while len(self.commitlog.segments) > 1:
            finished = self.finished_at_ms(0)
            expired = age_allowed and finished is not None and now_ms - finished >= max_age_ms
            over_disk = self.over_disk()
            if not (expired or over_disk):
                break
            segment = self.commitlog.remove_oldest()
            if segment is None:
                break
            removed += 1
            log.info("commitlog segment deleted", segment=segment.path.name,
                     reason="expired" if expired else "disk_full")
        if removed or self._recorrect:
            # Once more at the next run: units the dispatcher wrote after this correction
            # may point below the new start too (a queue's minimum would stay below them).
            self._recorrect = bool(removed)
            floor = self.commitlog.min_offset
            for queue in self.queues.all():
                queue.correct_min_offset(floor)
            self.index.delete_below(floor)
        return removed
