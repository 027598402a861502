"""TopicManager: keep the local TopicTable in step with config-center's `/tidemq/topics/`.

Start: Range the prefix (full resync), then Watch from the next revision. A broken stream is
reopened from the last revision seen, so no change is lost or applied twice; a compacted
watch falls back to a full Range. While config-center is unreachable the broker keeps serving
the persisted table. Every effective change calls `on_change` (the broker re-registers at
once so routes follow within one round-trip, not one 30 s period).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
from tidemq.broker.topic_table import (
    TopicConfig,
    TopicDefinitionError,
    TopicTable,
    parse_topic_definition,
)
from tidemq.common.errors import TideMQError, from_rpc_error
from tidemq.common.logs import get_logger
from tidemq.common.rpc import GRPC_OPTIONS
from tidemq.v1 import config_pb2, config_pb2_grpc

log = get_logger(__name__)

TOPIC_PREFIX = "/tidemq/topics/"
RETRY_MIN_S = 0.2
RETRY_MAX_S = 2.0


class TopicManager:
    def __init__(self, table: TopicTable, config_center: str,
                 on_change: Callable[[], None] = lambda: None, *,
                 call_timeout_s: float = 3.0) -> None:
        self.table = table
        self.on_change = on_change
        self.call_timeout_s = call_timeout_s
        # A private channel, no shared breaker: this loop has its own backoff, and closing the
        # channel is the one reliable way to end a blocked watch stream from another thread
        # (instrumented stubs return generators, which cannot be cancelled).
        self._channel = grpc.insecure_channel(config_center, options=GRPC_OPTIONS)
        self._stub = config_pb2_grpc.ConfigServiceStub(self._channel)
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topic-watch", daemon=True)

    def start(self, initial_sync_timeout_s: float = 5.0) -> bool:
        """Start syncing; wait up to the timeout for the first full sync (False = serve stale)."""
        self._thread.start()
        synced = self._synced.wait(initial_sync_timeout_s)
        if not synced:
            log.warning("config-center not reachable yet; serving the persisted topic table",
                        topics=len(self.table.snapshot()[1]))
        return synced

    def stop(self) -> None:
        self._stop.set()
        self._channel.close()
        self._thread.join(timeout=5)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    # -- the sync loop ------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = RETRY_MIN_S
        need_resync = True
        while not self._stop.is_set():
            try:
                if need_resync:
                    self.resync()
                    need_resync = False
                    self._synced.set()
                need_resync = self._watch()
                backoff = RETRY_MIN_S
            except (TideMQError, grpc.RpcError, ValueError) as exc:
                if self._stop.is_set():
                    return
                detail = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)
                log.warning("topic sync with config-center failed; retrying",
                            error=detail, retry_in_s=backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)

    def resync(self) -> None:
        """Replace the table with everything under the prefix."""
        try:
            reply = self._stub.Range(config_pb2.RangeRequest(prefix=TOPIC_PREFIX),
                                     timeout=self.call_timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        upserts = [t for kv in reply.kvs if (t := self._parse(kv.key, kv.value)) is not None]
        self._apply(upserts, [], reply.revision, replace_all=True)

    def _watch(self) -> bool:
        """Follow the watch stream until it ends; True if a full resync is needed."""
        request = config_pb2.WatchRequest(prefix=TOPIC_PREFIX,
                                          start_revision=self.table.revision + 1)
        try:
            for reply in self._stub.Watch(request):
                if reply.compacted:
                    log.warning("topic watch compacted; resyncing", revision=self.table.revision)
                    return True
                if reply.events:
                    self._apply_events(reply.events, reply.revision)
        except (grpc.RpcError, ValueError):
            if self._stop.is_set():  # the channel was closed under us: normal shutdown
                return False
            raise
        if not self._stop.is_set():
            raise TideMQError("config-center ended the topic watch stream", code="UNAVAILABLE")
        return False

    def _apply_events(self, events, revision: int) -> None:
        upserts: dict[str, TopicConfig] = {}
        deletes: list[str] = []
        for event in events:  # in revision order; later events for a key win
            name = event.kv.key[len(TOPIC_PREFIX):]
            if event.type == config_pb2.Event.DELETE:
                upserts.pop(name, None)
                deletes.append(name)
            elif (topic := self._parse(event.kv.key, event.kv.value)) is not None:
                if name in deletes:
                    deletes.remove(name)
                upserts[name] = topic
        self._apply(list(upserts.values()), deletes, revision)

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

    @staticmethod
    def _parse(key: str, value: bytes) -> TopicConfig | None:
        name = key[len(TOPIC_PREFIX):]
        if not name or "/" in name:
            return None
        try:
            return parse_topic_definition(name, value)
        except TopicDefinitionError as exc:
            log.warning("ignoring invalid topic definition", key=key, error=str(exc))
            return None
