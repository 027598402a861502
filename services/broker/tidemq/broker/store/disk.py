"""DiskGuard: a full disk is a state of the store, not an error of each append (docs/storage.md,
"A full disk").

The file system holding the store is looked at with one statvfs every
`disk_check_interval_ms` (on the store's housekeeping thread, never per append), and the
store is in one of three states:

* OK — below `disk_warn_ratio`;
* WARN — at or above `disk_warn_ratio`: logged, shown in metrics and the console, retention
  is already deleting the oldest segments (it does from `disk_max_used_ratio`);
* FULL — at or above `disk_full_ratio`, or an append met ENOSPC (the next CommitLog segment
  could not be allocated) and a segment still does not fit: the broker refuses producers'
  sends with STORAGE_FULL before anything is appended, retention runs at once, and the
  registration marks the group unwritable. Reads, acks and replication go on. The next check
  that finds use below the mark (and room for a segment) puts the store back to OK or WARN,
  and writes resume by themselves.

Used ratio is used / (used + free to this process): df's "Use%" for a broker running as an
ordinary user (blocks reserved for root count as unavailable: ext4 keeps 5 % by default), and
used / size for one running as root, which may fill the reserved blocks too. Either way 100 %
is where this process gets ENOSPC.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidemq.common.logs import get_logger

from .config import StorageFull, StoreConfig

log = get_logger(__name__)

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskState(enum.IntEnum):
    """The value of the `tidemq_broker_disk_state` gauge."""

    OK = 0
    WARN = 1
    FULL = 2


@dataclass(frozen=True, slots=True)
class DiskUsage:
    path: str          # the directory looked at (the store's, or its nearest existing parent)
    total_bytes: int   # size of the file system
    free_bytes: int    # bytes a write may still take (f_bavail)
    used_bytes: int    # bytes in use (f_blocks - f_bfree)

    @property
    def used_ratio(self) -> float:
        usable = self.used_bytes + self.free_bytes
        return self.used_bytes / usable if usable else 1.0


def disk_usage(path: Path) -> DiskUsage:
    """statvfs of the file system holding `path` (or its nearest existing parent)."""
    where = Path(path)
    while not where.exists() and where != where.parent:   # not created yet
        where = where.parent
    st = os.statvfs(where)
    # f_bavail, also as root: blocks reserved for root are not always there to take (a thin or
    # quota-bound volume answered ENOSPC with f_bfree at 150 GiB and f_bavail at 135 MiB), and
    # refusing a little early is the safe side.
    return DiskUsage(str(path), st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize,
                     (st.f_blocks - st.f_bfree) * st.f_frsize)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"   # pragma: no cover


Listener = Callable[["DiskState", "DiskUsage"], None]


class DiskGuard:
    """The store's disk state; `check()` on a timer, `refusal()` for a send it refuses."""

    def __init__(self, config: StoreConfig,
                 usage: Callable[[Path], DiskUsage] = disk_usage) -> None:
        self.config = config
        self._usage_of = usage
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self.state = DiskState.OK
        self.usage: DiskUsage | None = None
        # An append met ENOSPC: FULL until a check finds room for a whole segment again.
        self._no_space = False

    @property
    def refuses_writes(self) -> bool:
        """Read per send: one attribute, no system call."""
        return self.state is DiskState.FULL

    def add_listener(self, listener: Listener) -> None:
        """`listener(state, usage)` after every change of state (on the checking thread)."""
        self._listeners.append(listener)

    def check(self) -> DiskState:
        """Look at the file system now and move to the state it is in."""
        try:
            usage = self._usage_of(self.config.data_dir)
        except OSError as exc:
            log.warning("disk usage could not be read", path=str(self.config.data_dir),
                        error=str(exc))
            return self.state
        ratio = usage.used_ratio
        with self._lock:
            self.usage = usage
            if self._no_space and usage.free_bytes >= self.config.segment_size:
                self._no_space = False
            if self._no_space or ratio >= self.config.disk_full_ratio:
                state = DiskState.FULL
            elif ratio >= self.config.disk_warn_ratio:
                state = DiskState.WARN
            else:
                state = DiskState.OK
        self._move(state, usage)
        return state

    def short_of_segment(self) -> bool:
        """An append found no room for a segment, and a fresh look finds there still is none."""
        if not self._no_space:
            return False
        try:
            return self._usage_of(self.config.data_dir).free_bytes < self.config.segment_size
        except OSError:
            return True

    def no_space(self, exc: OSError | None = None) -> StorageFull:
        """An append found no room (ENOSPC) for the next CommitLog segment: FULL at once (the
        next check keeps it FULL until a segment fits again); returns the error to raise."""
        with self._lock:
            self._no_space = True
            usage = self.usage
        with contextlib.suppress(OSError):
            usage = self._usage_of(self.config.data_dir)
        if usage is not None:
            self.usage = usage
        self._move(DiskState.FULL, usage)
        error = self.refusal()
        if exc is not None:
            error.args = (f"{error.args[0]} ({exc.strerror or exc})",)
        return error

    def refusal(self) -> StorageFull:
        """The STORAGE_FULL error of a refused write: where, how full, what happens next."""
        usage, config = self.usage, self.config
        path = str(config.data_dir)
        if usage is None:
            return StorageFull(f"the file system holding {path} is full", path=path)
        why = (f"the next CommitLog segment ({human_bytes(config.segment_size)}) does not fit"
               if self._no_space else
               f"writes are refused from {config.disk_full_ratio:.0%} used")
        return StorageFull(
            f"the file system holding {path} has {human_bytes(usage.free_bytes)} free "
            f"({usage.used_ratio:.1%} used of {human_bytes(usage.total_bytes)}); {why}",
            path=path, free_bytes=usage.free_bytes, used_ratio=usage.used_ratio)

    def _move(self, state: DiskState, usage: DiskUsage | None) -> None:
        with self._lock:
            previous, self.state = self.state, state
        if state is previous:
            return
        fields = {"path": str(self.config.data_dir), "previous": previous.name}
        if usage is not None:
            fields.update(used_ratio=round(usage.used_ratio, 4), free_bytes=usage.free_bytes)
        if state is DiskState.FULL:
            log.error("disk full: refusing sends until space returns",
                      full_ratio=self.config.disk_full_ratio, **fields)
        elif state is DiskState.WARN:
            log.warning("disk use above the warning level", warn_ratio=self.config.disk_warn_ratio,
                        full_ratio=self.config.disk_full_ratio, **fields)
        else:
            log.info("disk use back below the warning level", **fields)
        for listener in list(self._listeners):
            try:
                listener(state, usage)
            except Exception:
                log.exception("disk state listener failed")
