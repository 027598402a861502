"""TopicManager: keep the local TopicTable in step with config-center's `/tidemq/topics/`.

A `Follower` (tidemq.configclient): Range the prefix (full resync), then Watch from the next
revision, each change applied once and in order; a compacted watch or a lost config center
falls back to a full Range. While config-center is unreachable the broker keeps serving the
persisted table. Every effective change calls `on_change` (the broker re-registers at once
so routes follow within one round-trip, not one 30 s period); a topic deleted by a watch event
also calls `on_deleted(name)` (the broker puts its messages out of reach). A topic missing from
a full resync is dropped from the table only: a config center that lost its data must not
delete every topic's messages.

A definition with per-group queue counts is served with this broker group's count; one that
gives this group none is not served here (as if absent: nothing is dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.common.kv import Event, EventType
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.follow import Follower
from tidemq.configclient.topics import (
    TOPIC_PREFIX,
    TopicDefinitionError,
    parse_topic_definition,
    topic_name,
)

log = get_logger(__name__)


class TopicManager:
    def __init__(self, table: TopicTable, config_center: str,
                 on_change: Callable[[], None] = lambda: None, *,
                 on_deleted: Callable[[str], None] = lambda name: None,
                 broker_name: str = "", call_timeout_s: float = 3.0) -> None:
        self.table = table
        self.broker_name = broker_name
        self.on_change = on_change
        self.on_deleted = on_deleted
        self._client = ConfigClient(config_center, timeout=call_timeout_s)
        self._synced = threading.Event()
        self._follower = Follower(self._client, TOPIC_PREFIX, read=self.resync,
                                  on_event=self._apply_event, name="topic-watch")

    def start(self, initial_sync_timeout_s: float = 5.0) -> bool:
        """Start syncing; wait up to the timeout for the first full sync (False = serve stale)."""
        self._follower.start()
        synced = self._synced.wait(initial_sync_timeout_s)
        if not synced:
            log.warning("config-center not reachable yet; serving the persisted topic table",
                        topics=len(self.table.snapshot()[1]))
        return synced

    def stop(self) -> None:
        self._follower.close()
        self._client.close()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def resync(self) -> int:
        """Replace the table with everything under the prefix; the revision it was read at."""
        listing = self._client.range(TOPIC_PREFIX)
        upserts = [t for kv in listing.kvs if (t := self._parse(kv.key, kv.value)) is not None]
        self._apply(upserts, [], listing.revision, replace_all=True)
        self._synced.set()
        return listing.revision

    def _apply_event(self, event: Event) -> None:
        name = topic_name(event.kv.key)
        if event.type == EventType.DELETE:
            served = self.table.get(name) is not None
            self._apply([], [name], event.revision)
            if served:
                try:
                    self.on_deleted(name)
                except Exception:
                    log.exception("topic deletion callback failed", topic=name)
        else:
            topic = self._parse(event.kv.key, event.kv.value)
            if topic is None and self._served_elsewhere(event.kv.key, event.kv.value):
                self._apply([], [name], event.revision)   # not ours (any more): not served
                return
            self._apply([topic] if topic is not None else [], [], event.revision)

    def _served_elsewhere(self, key: str, value: bytes) -> bool:
        try:
            return parse_topic_definition(topic_name(key), value).for_group(
                self.broker_name) is None
        except TopicDefinitionError:
            return False

    def _apply(self, upserts: list[TopicConfig], deletes: list[str], revision: int, *,
               replace_all: bool = False) -> None:
        if self.table.apply(upserts, deletes, revision, replace_all=replace_all):
            version, topics = self.table.snapshot()
            log.info("topic table changed", topics=[t.name for t in topics],
                     data_version=version.counter, revision=revision)
            try:
                self.on_change()
            except Exception:
                log.exception("topic change callback failed")

    def _parse(self, key: str, value: bytes) -> TopicConfig | None:
        """What this broker serves of the definition (None: nothing, or it does not parse)."""
        name = topic_name(key)
        if not name or "/" in name:
            return None
        try:
            return parse_topic_definition(name, value).for_group(self.broker_name)
        except TopicDefinitionError as exc:
            log.warning("ignoring invalid topic definition", key=key, error=str(exc))
            return None
