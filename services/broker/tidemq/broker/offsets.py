"""ConsumerOffsetManager: committed offsets per (group, topic, queue), persisted periodically.

Commits only touch memory; a flusher writes the whole table atomically every 5 s (ref) and on
shutdown, so a crash loses at most one interval of commits — consumers then re-read a few
messages (at-least-once), never skip any.

A commit may carry a metadata string per queue (Kafka's OffsetCommit metadata, at most
MAX_METADATA_LENGTH characters as Kafka counts them, its offset.metadata.max.bytes default):
stored, persisted and copied to slaves with its offset; every commit of a queue replaces it
("" = none).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping

from tidemq.broker.store.metadata import MetadataFile
from tidemq.common.errors import InvalidArgument
from tidemq.common.logs import get_logger

log = get_logger(__name__)

OffsetKey = tuple[str, int]  # (topic, queue_id)
MAX_METADATA_LENGTH = 4096   # Kafka's offset.metadata.max.bytes default (UTF-16 units, as Kafka)


def check_metadata(topic: str, queue_id: int, text: str) -> None:
    """Refuse a commit's metadata string longer than MAX_METADATA_LENGTH
    (OFFSET_METADATA_TOO_LARGE). The length is counted as Kafka's broker counts it (Java's
    String.length(): UTF-16 code units), so a string Kafka takes is taken here."""
    length = len(text.encode("utf-16-le", "surrogatepass")) // 2
    if length > MAX_METADATA_LENGTH:
        raise InvalidArgument(
            f"the metadata committed for {topic}:{queue_id} is {length} characters long; at "
            f"most {MAX_METADATA_LENGTH} are kept with an offset (Kafka's "
            f"offset.metadata.max.bytes)", code="OFFSET_METADATA_TOO_LARGE")


class ConsumerOffsetManager:
    def __init__(self, file: MetadataFile) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[OffsetKey, int]] = {}
        self._metadata: dict[str, dict[OffsetKey, str]] = {}   # only non-empty strings
        self._dirty = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._load()

    def _load(self) -> None:
        raw = self._file.read()
        if not raw:
            return
        doc = json.loads(raw)
        for group, entries in doc.get("offsets", {}).items():
            self._offsets[group] = {
                (topic, int(queue_id)): int(offset) for topic, queue_id, offset in entries
            }
        for group, entries in doc.get("metadata", {}).items():
            self._metadata[group] = {(topic, int(queue_id)): str(text)
                                     for topic, queue_id, text in entries if text}

    def commit(self, group: str, offsets: Iterable[tuple[str, int, int]],
               metadata: Mapping[OffsetKey, str] | None = None) -> None:
        """Commit offsets; `metadata` gives a queue's metadata string (a queue committed
        without one keeps none)."""
        entries = list(offsets)
        metadata = metadata or {}
        if not group:
            raise InvalidArgument("consumer_group must not be empty")
        for topic, queue_id, offset in entries:
            if queue_id < 0 or offset < 0:
                raise InvalidArgument(
                    f"offset for {topic}:{queue_id} must be >= 0 with queue_id >= 0, got {offset}"
                )
            check_metadata(topic, queue_id, metadata.get((topic, queue_id), ""))
        with self._lock:
            table = self._offsets.setdefault(group, {})
            texts = self._metadata.setdefault(group, {})
            for topic, queue_id, offset in entries:
                table[(topic, queue_id)] = offset
                text = metadata.get((topic, queue_id), "")
                if text:
                    texts[(topic, queue_id)] = text
                else:
                    texts.pop((topic, queue_id), None)
            if not texts:
                del self._metadata[group]
            self._dirty = True

    def metadata(self, group: str, topic: str = "") -> dict[OffsetKey, str]:
        """The metadata strings `group` committed with its offsets (for `topic` only if
        given); a queue committed without one is absent."""
        with self._lock:
            texts = self._metadata.get(group, {})
            return {key: text for key, text in texts.items() if not topic or key[0] == topic}

    def query(self, group: str, topic: str = "") -> list[tuple[str, int, int]]:
        """Committed offsets of `group` (for `topic` only if given), sorted."""
        with self._lock:
            table = self._offsets.get(group, {})
            return sorted((t, q, o) for (t, q), o in table.items() if not topic or t == topic)

    def delete_topic(self, topic: str, group: str = "") -> list[str]:
        """Forget the committed offsets of `topic` (of `group` only, if given): a deleted
        topic's offsets would otherwise stay in every describe as orphans. Returns the groups
        that had some."""
        with self._lock:
            touched = []
            for name, table in list(self._offsets.items()):
                if group and name != group:
                    continue
                keys = [key for key in table if key[0] == topic]
                if not keys:
                    continue
                texts = self._metadata.get(name, {})
                for key in keys:
                    del table[key]
                    texts.pop(key, None)
                if not table:
                    del self._offsets[name]
                if not texts:
                    self._metadata.pop(name, None)
                touched.append(name)
            self._dirty = self._dirty or bool(touched)
            return sorted(touched)

    def snapshot(self) -> dict[str, list[tuple[str, int, int]]]:
        """Every group's committed offsets (a master hands this to its slaves)."""
        with self._lock:
            return {group: sorted((t, q, o) for (t, q), o in table.items())
                    for group, table in self._offsets.items()}

    def metadata_snapshot(self) -> dict[str, dict[OffsetKey, str]]:
        """Every group's non-empty metadata strings, beside snapshot()."""
        with self._lock:
            return {group: dict(texts) for group, texts in self._metadata.items()}

    def replace_all(self, snapshot: dict[str, list[tuple[str, int, int]]],
                    metadata: dict[str, dict[OffsetKey, str]] | None = None) -> bool:
        """Become a copy of the master's table (a slave, every ~1 s); True if it changed.
        Replaced, not merged: the master's table is the truth, resets included."""
        table = {group: {(t, q): o for t, q, o in entries} for group, entries in snapshot.items()}
        texts = {group: {key: text for key, text in entries.items() if text}
                 for group, entries in (metadata or {}).items()}
        texts = {group: entries for group, entries in texts.items() if entries}
        with self._lock:
            if table == self._offsets and texts == self._metadata:
                return False
            self._offsets, self._metadata = table, texts
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
                               for g, table in self._offsets.items()},
                   "metadata": {g: sorted([t, q, m] for (t, q), m in texts.items())
                                for g, texts in self._metadata.items()}}
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
