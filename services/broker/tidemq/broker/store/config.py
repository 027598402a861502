"""Store configuration, result types and errors: the vocabulary the broker service speaks.

Every configuration key lives here with its default and unit (documented in docs/storage.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tidemq.common import record

MIN_SEGMENT_SIZE = 64 * 1024
CQ_UNIT_SIZE = 20  # commitlog_offset 8 | size 4 | tag_hash 8 (docs/storage.md)


class FlushMode(enum.Enum):
    ASYNC = "ASYNC_FLUSH"
    SYNC = "SYNC_FLUSH"


@dataclass
class StoreConfig:
    data_dir: Path
    segment_size: int = 1 << 30               # bytes per CommitLog segment file
    flush_mode: FlushMode = FlushMode.ASYNC
    flush_interval_ms: int = 500              # ASYNC: flush at least this often
    flush_least_pages: int = 4                # ASYNC: ...or as soon as this many 4 KiB pages are dirty
    full_flush_interval_ms: int = 10_000      # ASYNC: flush whatever is dirty at least this often
    sync_flush_timeout_ms: int = 5000         # SYNC: an append waits this long for its fsync
    checkpoint_interval_ms: int = 1000        # CQ/index flush + checkpoint write period
    consume_queue_units_per_file: int = 300_000
    index_slots: int = 5_000_000
    index_entries: int = 20_000_000
    retention_hours: float = 72.0             # delete CommitLog segments finished before this age
    delete_when_hour: int | None = 4          # local hour for age-based deletion; None = any time
    disk_max_used_ratio: float = 0.75         # above this disk use, delete oldest segments now
    retention_check_interval_ms: int = 10_000
    # Compaction of cleanup.policy=compact queues (compaction.py): a pass this often on the
    # master, reading at most compaction_io_bytes_s bytes of records a second (0 = no limit).
    compaction_interval_ms: int = 10_000
    compaction_io_bytes_s: int = 32 << 20
    # Copy-forward (relocation.py): a segment held only by compacted queues' live records is
    # freed by copying them to the log's head, unless they are more than this share of it.
    compaction_relocate_max_live_ratio: float = 0.5
    # The disk guard (disk.py): statvfs every disk_check_interval_ms, not per append. At
    # disk_warn_ratio the store warns (log, metrics, console); at disk_full_ratio it refuses
    # producers' sends with STORAGE_FULL (reads, acks and replication go on) until use falls
    # below it again (RocketMQ's diskSpaceWarningLevelRatio / diskSpaceCleanForciblyRatio).
    disk_warn_ratio: float = 0.75
    disk_full_ratio: float = 0.85
    disk_check_interval_ms: int = 1000
    max_message_size: int = record.DEFAULT_MAX_MESSAGE_SIZE
    normal_recovery_segments: int = 3         # clean start: CRC-check this many last segments
    # Zero-fill the next segment in the background so fsync converts no unwritten extents
    # (what it saves: docs/storage.md, "Measured figures"); it doubles disk writes, so by
    # default SYNC_FLUSH only.
    warm_segments: bool | None = None
    # Pin the process's threads to these CPUs while the store runs (see affinity.py): faster
    # SYNC_FLUSH with many one-message appenders on a VM with slow cross-CPU wake-ups.
    cpu_affinity: frozenset[int] | None = None

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        self.flush_mode = FlushMode(self.flush_mode)
        if self.warm_segments is None:
            self.warm_segments = self.flush_mode is FlushMode.SYNC
        if self.segment_size < MIN_SEGMENT_SIZE:
            raise ValueError(f"segment_size must be at least {MIN_SEGMENT_SIZE} bytes")
        if self.max_message_size > self.segment_size - 8:
            self.max_message_size = self.segment_size - 8
        if self.cpu_affinity is not None:
            self.cpu_affinity = frozenset(self.cpu_affinity)
            if not self.cpu_affinity:
                raise ValueError("cpu_affinity must name at least one CPU (or be None)")
        if not 0 < self.disk_warn_ratio <= self.disk_full_ratio <= 1:
            raise ValueError(f"disk ratios must satisfy 0 < disk_warn_ratio <= disk_full_ratio "
                             f"<= 1, got {self.disk_warn_ratio} and {self.disk_full_ratio}")
        if self.disk_check_interval_ms < 1:
            raise ValueError("disk_check_interval_ms must be >= 1")
        if not 0 <= self.compaction_relocate_max_live_ratio <= 1:
            raise ValueError(f"compaction_relocate_max_live_ratio must be within 0..1 (the "
                             f"share of a segment compacted records may fill for it to be "
                             f"copied forward), got {self.compaction_relocate_max_live_ratio}")
        if self.consume_queue_units_per_file < 1 or self.index_slots < 1 or self.index_entries < 2:
            raise ValueError("consume queue units, index slots and index entries must be positive")

    @property
    def commitlog_dir(self) -> Path:
        return self.data_dir / "commitlog"

    @property
    def consumequeue_dir(self) -> Path:
        return self.data_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"


class AppendStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # In the log (and on disk if PUT_OK locally), but the in-sync replicas did not confirm it
    # within sync_replication_timeout: not acknowledged as replicated (store/ha/gate.py).
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"


class AppendResult(NamedTuple):
    """Immutable; a NamedTuple, not a frozen dataclass: built once per append on the
    SYNC_FLUSH hot path, where it is the cheaper of the two to build."""

    status: AppendStatus
    first_queue_offset: int
    physical_offsets: list[int]
    end_offset: int   # physical end (exclusive) of the batch's last record: what replication waits for


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"


@dataclass(frozen=True, slots=True)
class GetResult:
    status: GetStatus
    records: bytes
    record_count: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


class StoreError(Exception):
    """Base of store errors; `code` is the error code the transport maps to a status."""

    code = "INTERNAL_ERROR"


class InvalidBatch(StoreError):
    code = "INVALID_ARGUMENT"


class MessageTooLarge(StoreError):
    code = "MESSAGE_TOO_LARGE"


class MessageNotFound(StoreError):
    code = "NOT_FOUND"


class StoreClosed(StoreError):
    code = "SERVICE_UNAVAILABLE"


class FlushFailed(StoreError):
    """A SYNC_FLUSH round's write or fsync failed: its batches are not acknowledged."""

    code = "SERVICE_UNAVAILABLE"


class NotMaster(StoreError):
    """This replica is a slave (or a deposed master): it takes no local appends."""

    code = "NOT_MASTER"


class NotEnoughReplicas(StoreError):
    """Fewer in-sync replicas than min_in_sync_replicas: nothing was appended."""

    code = "NOT_ENOUGH_REPLICAS"


class StorageFull(StoreError):
    """The file system holding the store is at or above `disk_full_ratio`, or a write found
    no space left (ENOSPC): nothing was appended. `path`, `free_bytes` and `used_ratio` say
    where and how full (disk.py); the message is a sentence for an operator."""

    code = "STORAGE_FULL"

    def __init__(self, message: str, *, path: str = "", free_bytes: int = 0,
                 used_ratio: float = 0.0) -> None:
        super().__init__(message)
        self.path, self.free_bytes, self.used_ratio = path, free_bytes, used_ratio


class ReplicationGap(StoreError):
    """Replicated bytes that do not start at this replica's log end (or are not log records)."""

    code = "REPLICATION_GAP"
