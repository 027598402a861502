"""EpochFile: the leader-epoch history of one replica — (epoch, start offset) entries, where
each epoch's records begin in this replica's CommitLog (Kafka's leader-epoch checkpoint).

How the broker's role layer (`tidemq.broker.replication.host`) uses it: through the store, `store.epochs` (`store.become_master(epoch)` appends an
entry; the HA stream truncates a slave with it). `last()` gives a replica's current epoch for
its live key and registration.

A returning replica asks the master where its last epoch ended there (`end_of`); everything
it holds past that point was never replicated under that epoch and is cut before it catches
up, so replicas never diverge. The file is rewritten whole on every change (a handful of
lines), atomically: temp file, fsync, rename, fsync of the directory (MetadataFile).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import NamedTuple

from ..config import StoreError
from ..metadata import MetadataFile


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochFile:
    def __init__(self, path: Path | str) -> None:
        self._file = MetadataFile(path)
        self._lock = threading.Lock()
        self.entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        raw = self._file.read()
        if not raw:
            return []
        entries = []
        for line in raw.decode().splitlines():
            if line.strip():
                epoch, start = line.split()
                entries.append(EpochEntry(int(epoch), int(start)))
        return entries

    def _persist(self, entries: list[EpochEntry]) -> None:
        self._file.write("".join(f"{e.epoch} {e.start_offset}\n" for e in entries).encode())
        self.entries = entries

    def last(self) -> EpochEntry | None:
        entries = self.entries
        return entries[-1] if entries else None

    @property
    def last_epoch(self) -> int:
        """The current epoch, 0 for a replica that never had one."""
        entries = self.entries
        return entries[-1].epoch if entries else 0

    def append(self, epoch: int, start_offset: int) -> None:
        """Epochs strictly increase and start offsets never go back."""
        with self._lock:
            last = self.last()
            if last is not None and (epoch <= last.epoch or start_offset < last.start_offset):
                raise StoreError(f"epoch {epoch} at {start_offset} does not follow the last "
                                 f"entry, epoch {last.epoch} at {last.start_offset}")
            self._persist([*self.entries, EpochEntry(epoch, start_offset)])

    def replace(self, entries: list[EpochEntry]) -> None:
        """Take another replica's history (a slave that is now a prefix of its master's log)."""
        entries = [EpochEntry(int(e), int(s)) for e, s in entries]
        for before, after in zip(entries, entries[1:], strict=False):
            if after.epoch <= before.epoch or after.start_offset < before.start_offset:
                raise StoreError(f"epoch history {entries} does not increase")
        with self._lock:
            if entries != self.entries:
                self._persist(entries)

    def end_of(self, epoch: int, log_end: int) -> int:
        """Where `epoch` ended in this log: the start of the first later epoch, else `log_end`
        (an epoch this replica never had ends where the next one it had starts)."""
        return end_of(self.entries, epoch, log_end)

    def truncate_after(self, offset: int) -> None:
        """The log was cut at `offset`: drop the entries that start past it."""
        with self._lock:
            kept = [e for e in self.entries if e.start_offset <= offset]
            if kept != self.entries:
                self._persist(kept)

    def entries_after(self, epoch: int) -> list[EpochEntry]:
        return [e for e in self.entries if e.epoch > epoch]


def end_of(entries: list[EpochEntry], epoch: int, log_end: int) -> int:
    """EpochFile.end_of over a list of entries."""
    for entry in entries:
        if entry.epoch > epoch:
            return min(entry.start_offset, log_end)
    return log_end


def divergence_point(master: list[EpochEntry], master_end: int, slave: list[EpochEntry],
                     slave_end: int) -> int:
    """Where a slave's log stops being a prefix of the master's: the end of the latest epoch
    both histories hold (an epoch has one leader, so both hold a prefix of that leader's log
    up to it), on whichever side it ended first; 0 when they share no epoch. Comparing whole
    histories in one step avoids the one-round Kafka bug (KIP-279) where a slave that lacks
    the master's matching epoch is cut too little."""
    shared = {e.epoch for e in master} & {e.epoch for e in slave}
    if not shared:
        return 0
    latest = max(shared)
    return min(end_of(master, latest, master_end), end_of(slave, latest, slave_end), slave_end)
