"""SubscriptionGroupManager: keep the SubscriptionGroupTable equal to `/tidemq/groups/`.

A PrefixMirror lists the prefix and follows its watch (each change once, in order, resumed
after faults, re-listed after compaction); every put is validated here. An invalid definition
is refused and logged with its key and the reason, and the last good definition of that group
stays in force — a typo in the config center never re-opens a disabled group nor stops the
watcher. Connecting happens in the background: until the config center answers, the broker
enforces the persisted table.
"""

from __future__ import annotations

import threading

from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.groups import (
    GROUP_PREFIX,
    GroupDefinitionError,
    parse_group_definition,
)
from tidemq.configclient.mirror import PrefixMirror
from tidemq.configclient.watch import KeyValue

log = get_logger(__name__)


class SubscriptionGroupManager:
    def __init__(self, table: SubscriptionGroupTable, config_center: str, *,
                 retry_interval_s: float = 1.0) -> None:
        self.table = table
        self._config_center = config_center
        self._retry_interval_s = retry_interval_s
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._lock = threading.Lock()
        self._client: ConfigClient | None = None
        self._mirror: PrefixMirror | None = None
        self._thread = threading.Thread(target=self._connect, daemon=True, name="group-watch")

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    @property
    def revision(self) -> int:
        """Every change up to this config-center revision has been applied (0 = not synced)."""
        mirror = self._mirror
        return mirror.revision if mirror is not None else 0

    def start(self) -> SubscriptionGroupManager:
        """Follow the config center in the background (never blocks)."""
        self._thread.start()
        return self

    def wait_synced(self, timeout_s: float) -> bool:
        """Wait up to the timeout for the first listing (False = enforcing the stale table)."""
        synced = self._synced.wait(timeout_s)
        if not synced:
            log.warning("config-center not reachable yet; enforcing the persisted "
                        "subscription groups", groups=len(self.table.snapshot()))
        return synced

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        with self._lock:
            mirror, client = self._mirror, self._client
        if mirror is not None:
            mirror.close()
        if client is not None:
            client.close()

    def _connect(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._lock:
                    self._client = self._client or ConfigClient(self._config_center)
                    mirror = PrefixMirror(self._client, GROUP_PREFIX, on_put=self._on_put,
                                          on_delete=self._on_delete)
                mirror.sync()  # reports every key; then drop what vanished while we were away
            except TideMQError as exc:
                log.warning("subscription groups unavailable; retrying", error=str(exc))
                self._stopping.wait(self._retry_interval_s)
                continue
            for name in self.table.retain({key[len(GROUP_PREFIX):] for key in mirror.snapshot()}):
                log.info("subscription group definition removed", group=name)
            with self._lock:
                if self._stopping.is_set():
                    return
                self._mirror = mirror.start()
            self._synced.set()
            log.info("subscription groups synced", groups=len(self.table.snapshot()),
                     revision=mirror.revision)
            return

    def _on_put(self, kv: KeyValue, previous: KeyValue | None) -> None:
        name = kv.key[len(GROUP_PREFIX):]
        try:
            group = parse_group_definition(name, kv.value)
        except GroupDefinitionError as exc:
            kept = self.table.get(name)
            log.error("refused subscription group definition", key=kv.key,
                      revision=kv.mod_revision, error=str(exc),
                      in_force="the last good definition" if kept else "the defaults")
            return
        changed, old = self.table.put(group)
        if changed:
            log.info("subscription group definition applied", key=kv.key,
                     revision=kv.mod_revision, old=old.to_json() if old else None,
                     new=group.to_json())

    def _on_delete(self, key: str, previous: KeyValue) -> None:
        name = key[len(GROUP_PREFIX):]
        if self.table.remove(name) is not None:
            log.info("subscription group definition removed", key=key, group=name)
