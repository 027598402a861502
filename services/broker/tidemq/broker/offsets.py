"""ConsumerOffsetManager: committed offsets per (group, topic, queue), persisted periodically.

Commits only touch memory; a flusher writes the whole table atomically every 5 s (ref) and on
shutdown, so a crash loses at most one interval of commits — consumers then re-read a few
messages (at-least-once), never skip any.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

from tidemq.broker.store.metadata import MetadataFile
from tidemq.common.errors import InvalidArgument
from tidemq.common.logs import get_logger

log = get_logger(__name__)

OffsetKey = tuple[str, int]  # (topic, queue_id)


class ConsumerOffsetManager:
    def __init__(self, file: MetadataFile) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[OffsetKey, int]] = {}
        self._dirty = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._load()

    def _load(self) -> None:
        raw = self._file.read()
        if not raw:
            return
        for group, entries in json.loads(raw).get("offsets", {}).items():
            self._offsets[group] = {
                (topic, int(queue_id)): int(offset) for topic, queue_id, offset in entries
            }

    def commit(self, group: str, offsets: Iterable[tuple[str, int, int]]) -> None:
        entries = list(offsets)
        if not group:
            raise InvalidArgument("consumer_group must not be empty")
        for topic, queue_id, offset in entries:
            if queue_id < 0 or offset < 0:
                raise InvalidArgument(
                    f"offset for {topic}:{queue_id} must be >= 0 with queue_id >= 0, got {offset}"
                )
        with self._lock:
            table = self._offsets.setdefault(group, {})
            for topic, queue_id, offset in entries:
                table[(topic, queue_id)] = offset
            self._dirty = True

    def query(self, group: str, topic: str = "") -> list[tuple[str, int, int]]:
        """Committed offsets of `group` (for `topic` only if given), sorted."""
        with self._lock:
            table = self._offsets.get(group, {})
            return sorted((t, q, o) for (t, q), o in table.items() if not topic or t == topic)

    def snapshot(self) -> dict[str, list[tuple[str, int, int]]]:
        """Every group's committed offsets (a master hands this to its slaves)."""
        with self._lock:
            return {group: sorted((t, q, o) for (t, q), o in table.items())
                    for group, table in self._offsets.items()}

    def replace_all(self, snapshot: dict[str, list[tuple[str, int, int]]]) -> bool:
        """Become a copy of the master's table (a slave, every ~1 s); True if it changed.
        Replaced, not merged: the master's table is the truth, resets included."""
        table = {group: {(t, q): o for t, q, o in entries} for group, entries in snapshot.items()}
        with self._lock:
            if table == self._offsets:
                return False
            self._offsets = table
            self._dirty = True
            return True

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._offsets)

    # -- persistence --------------------------------------------------------------------------

    def persist(self) -> bool:
        """Write the table if it changed since the last write; True if written."""
        with self._lock:
            if not self._dirty:
                return False
            doc = {"offsets": {g: sorted([t, q, o] for (t, q), o in table.items())
                               for g, table in self._offsets.items()}}
            self._dirty = False
        try:
            self._file.write(json.dumps(doc).encode())
        except OSError:
            with self._lock:
                self._dirty = True
            raise
        return True

    def start(self, interval_s: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(interval_s,),
                                        name="offset-flush", daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.persist()
            except OSError:
                log.exception("persisting consumer offsets failed; will retry")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.persist()
