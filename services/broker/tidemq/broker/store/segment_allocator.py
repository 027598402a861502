"""Prepares the next CommitLog segment in the background, zero-filled (RocketMQ's warm-up).

A segment reserved with posix_fallocate holds "unwritten" extents: every fsync after an append
must convert them, which doubled fdatasync latency on the development disk. Writing
zeros ahead of time moves that cost off the append path. The file is prepared under a hidden
temporary name and renamed into place only if the log has not already created that segment
itself (when the writer outran the allocator), so the two never touch the same file.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tidemq.common.logs import get_logger

from .metadata import fsync_dir
from .segment import segment_name

log = get_logger(__name__)
_ZEROS = bytes(1 << 20)


class SegmentAllocator:
    def __init__(self, directory: Path, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self._lock = threading.Lock()
        self._ready: set[int] = set()
        self._claimed: set[int] = set()
        self._workers: list[threading.Thread] = []
        self._closing = False

    def remove_leftovers(self) -> None:
        for path in self.directory.glob(".*.prepare"):
            path.unlink(missing_ok=True)

    def request(self, base_offset: int) -> None:
        """Start preparing segment `base_offset` unless it exists or is being prepared."""
        with self._lock:
            if self._closing or base_offset in self._claimed or base_offset in self._ready:
                return
            if (self.directory / segment_name(base_offset)).exists():
                return
            self._workers = [w for w in self._workers if w.is_alive()]
            if self._workers:  # one at a time; the log asks again at its next roll
                return
            worker = threading.Thread(target=self._prepare, args=(base_offset,),
                                      name="store-segment-allocator", daemon=True)
            self._workers.append(worker)
            worker.start()

    def claim(self, base_offset: int) -> bool:
        """The log is about to open segment `base_offset`: True if a prepared file is in place."""
        with self._lock:
            self._claimed.add(base_offset)
            return base_offset in self._ready

    def _prepare(self, base_offset: int) -> None:
        temp = self.directory / f".{segment_name(base_offset)}.prepare"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for position in range(0, self.segment_size, len(_ZEROS)):
                    if self._closing or base_offset in self._claimed:
                        break
                    os.pwrite(fd, _ZEROS[:self.segment_size - position], position)
                else:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
            with self._lock:
                if base_offset in self._claimed or self._closing:
                    temp.unlink(missing_ok=True)
                    return
                os.rename(temp, self.directory / segment_name(base_offset))
                self._ready.add(base_offset)
            fsync_dir(self.directory)
        except OSError:
            temp.unlink(missing_ok=True)
            log.exception("preparing a commitlog segment failed", segment=segment_name(base_offset))

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no segment is being prepared (benchmarks warm up like a broker does)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        return not any(worker.is_alive() for worker in workers)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            workers = list(self._workers)
        for worker in workers:
            worker.join()
