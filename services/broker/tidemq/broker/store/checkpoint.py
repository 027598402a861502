"""Checkpoint and abort marker: what recovery may trust, and whether the last stop was clean.

The checkpoint says "the CommitLog is durable up to `commitlog_flushed` and the consume queues
and index are durable for every record below `dispatched`". The abort marker exists while the
store runs; finding it at start means the previous run did not shut down cleanly.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .metadata import MetadataFile, fsync_dir


@dataclass(frozen=True, slots=True)
class CheckpointState:
    commitlog_flushed: int
    dispatched: int
    timestamp_ms: int
    # The group's confirmed offset this replica last knew (a SYNC_MASTER group's read fence),
    # None when its reads are not fenced: where a restarted replica's fence starts, so it
    # never serves, before its master tells it more, what a failover could take back.
    confirmed: int | None = None


class Checkpoint:
    def __init__(self, path: Path) -> None:
        self._file = MetadataFile(path)

    def read(self) -> CheckpointState | None:
        raw = self._file.read()
        if raw is None:
            return None
        try:
            return CheckpointState(**json.loads(raw))
        except (ValueError, TypeError):
            return None  # an unreadable checkpoint only costs a longer recovery scan

    def write(self, state: CheckpointState) -> None:
        self._file.write(json.dumps(asdict(state)).encode())


class AbortMarker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def create(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, str(os.getpid()).encode())
        os.fsync(fd)
        os.close(fd)
        fsync_dir(self.path.parent)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        fsync_dir(self.path.parent)
