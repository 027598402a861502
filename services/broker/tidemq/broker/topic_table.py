"""The broker's table of topics it serves, persisted so a restart can serve without config-center.

Definitions come from config-center (the source of truth) as JSON documents, parsed by
tidemq.configclient.topics; this table is the local copy plus a data version that
changes on every change, which tells the name servers to rebuild this broker's routes.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from tidemq.broker.store.metadata import MetadataFile
from tidemq.configclient.topics import TopicConfig

__all__ = ["DataVersion", "TopicConfig", "TopicTable"]


@dataclass(frozen=True, slots=True)
class DataVersion:
    timestamp: int
    counter: int


class TopicTable:
    """Topics served here + the data version; every change is persisted before it is visible."""

    def __init__(self, file: MetadataFile) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self.revision = 0  # last config-center revision applied
        # A new timestamp per process start: name servers rebuild routes after a restart.
        self._version = DataVersion(int(time.time() * 1000), 0)
        self._load()

    def _load(self) -> None:
        raw = self._file.read()
        if not raw:
            return
        doc = json.loads(raw)
        self._topics = {t["name"]: TopicConfig.from_json(t) for t in doc.get("topics", [])}
        self.revision = int(doc.get("revision", 0))

    def _persist(self) -> None:
        doc = {"revision": self.revision,
               "topics": [t.to_json() for t in sorted(self._topics.values(), key=lambda t: t.name)]}
        self._file.write(json.dumps(doc, indent=1).encode())

    def get(self, name: str) -> TopicConfig | None:
        return self._topics.get(name)

    def snapshot(self) -> tuple[DataVersion, list[TopicConfig]]:
        with self._lock:
            return self._version, sorted(self._topics.values(), key=lambda t: t.name)

    @property
    def data_version(self) -> DataVersion:
        return self._version

    def touch(self) -> DataVersion:
        """A new data version without a topic change: what this broker registers changed
        otherwise (its writability, docs/storage.md "A full disk"), so the name servers must
        rebuild its routes."""
        with self._lock:
            self._version = DataVersion(self._version.timestamp, self._version.counter + 1)
            return self._version

    def apply(self, upserts: list[TopicConfig], deletes: list[str], revision: int, *,
              replace_all: bool = False) -> bool:
        """Apply a batch of changes seen at `revision`; True if any topic changed.

        `replace_all` (after a full Range) drops every topic not in `upserts`.
        """
        with self._lock:
            before = dict(self._topics)
            if replace_all:
                self._topics = {}
            for topic in upserts:
                self._topics[topic.name] = topic
            for name in deletes:
                self._topics.pop(name, None)
            changed = before != self._topics
            if changed:
                self._version = DataVersion(self._version.timestamp, self._version.counter + 1)
            if changed or revision != self.revision:
                self.revision = max(self.revision, revision) if not replace_all else revision
                self._persist()
            return changed
