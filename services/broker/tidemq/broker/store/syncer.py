"""Syncer: a thread that fdatasyncs on request and reports through an eventfd.

The SYNC_FLUSH path of asyncio appends (loop_appender.py) writes on the event loop and leaves
only the fsync to this thread. The C Syncer of `tidemq_speedups` never takes the GIL, so it
starts an fsync the moment it is asked, while the loop goes on stamping the next group; this
Python one has the same contract (and the GIL hand-offs the C one avoids).

Contract: `request(fds, ticket)` dup()s the descriptors (a segment closed later is still the
file synced; one already closed is skipped) and merges them with the waiting requests; each pass fdatasyncs every file
once, then writes 1 to `notify_fd`; `poll()` returns the finished passes, oldest first, as
(highest ticket of the pass, errno or 0); `close()` serves what waits, then stops the thread.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable

try:
    from tidemq_speedups import Syncer as _CSyncer
except ImportError:  # not built here
    _CSyncer = None


class PySyncer:
    def __init__(self, notify_fd: int,
                 fdatasync: Callable[[int], None] = os.fdatasync) -> None:
        self._notify_fd = notify_fd
        self._fdatasync = fdatasync   # the disk, replaceable where a test needs it to fail
        self._cond = threading.Condition()
        self._fds: list[int] = []
        self._ticket = 0
        self._pending = False
        self._stopping = False
        self._done: list[tuple[int, int]] = []
        self._thread = threading.Thread(target=self._run, name="store-syncer", daemon=True)
        self._thread.start()

    def request(self, fds: tuple[int, ...] | list[int], ticket: int) -> None:
        copies = []
        for fd in fds:
            try:
                copies.append(os.dup(fd))
            except OSError as exc:
                if exc.errno != errno.EBADF:  # EBADF: closed (deleted) meanwhile, nothing to flush
                    raise
        with self._cond:
            if self._stopping:
                for fd in copies:
                    os.close(fd)
                raise RuntimeError("the syncer is closed")
            self._fds.extend(copies)
            self._ticket = ticket if not self._pending else max(self._ticket, ticket)
            self._pending = True
            self._cond.notify()

    def poll(self) -> list[tuple[int, int]]:
        with self._cond:
            done, self._done = self._done, []
        return done

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    return
                fds, ticket = self._fds, self._ticket
                self._fds, self._pending = [], False
            error, synced = 0, set()
            for fd in fds:
                try:
                    identity = os.fstat(fd)[1:3]   # (inode, device): one fsync per file
                    if identity not in synced:
                        synced.add(identity)
                        self._fdatasync(fd)
                except OSError as exc:
                    error = error or exc.errno or -1
                finally:
                    os.close(fd)
            with self._cond:
                self._done.append((ticket, error))
            os.eventfd_write(self._notify_fd, 1)


Syncer = _CSyncer if _CSyncer is not None else PySyncer
