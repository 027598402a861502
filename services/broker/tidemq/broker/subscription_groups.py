"""SubscriptionGroupTable: the consumer groups' definitions this broker enforces.

Definitions come from the config center (`/tidemq/groups/<name>`, see
tidemq.configclient.groups); this is the local copy, persisted so a broker restarted while
the config center is away still refuses a disabled group. Every consumer-facing check asks
here (pull, offset commit, JoinGroup), and the retry / dead-letter path (retry.py) reads
`retry_max_times` and `retry_queue_nums` from `effective(group)`, never from anywhere else.

Auto-create (RocketMQ's autoCreateSubscriptionGroup, default on): a group without a definition
consumes with the defaults. With it off, such a group is refused (SUBSCRIPTION_GROUP_NOT_EXIST).
"""

from __future__ import annotations

import json
import threading

from tidemq.broker.store.metadata import MetadataFile
from tidemq.common.errors import NotFound, PreconditionFailed
from tidemq.configclient.groups import GROUP_PREFIX, SubscriptionGroupConfig

NOT_CONSUMABLE = "SUBSCRIPTION_GROUP_NOT_CONSUMABLE"
BROADCAST_DISABLED = "SUBSCRIPTION_GROUP_BROADCAST_DISABLED"
NOT_EXIST = "SUBSCRIPTION_GROUP_NOT_EXIST"


class SubscriptionGroupTable:
    """Defined groups + the auto-create rule; thread-safe, every change persisted first."""

    def __init__(self, file: MetadataFile | None = None, *, auto_create: bool = True) -> None:
        self._file = file
        self.auto_create = auto_create
        self._lock = threading.Lock()
        self._groups: dict[str, SubscriptionGroupConfig] = {}
        self._load()

    def _load(self) -> None:
        raw = self._file.read() if self._file is not None else b""
        if raw:
            self._groups = {g["name"]: SubscriptionGroupConfig(**g)
                            for g in json.loads(raw).get("groups", [])}

    def _commit(self, groups: dict[str, SubscriptionGroupConfig]) -> None:
        """Persist `groups`, then make them the table in force: a reader never sees a change
        that a restart would lose. Readers take `self._groups` without the lock, so it is
        replaced whole, never mutated."""
        if self._file is not None:
            doc = {"groups": [g.to_json() for g in sorted(groups.values(), key=lambda g: g.name)]}
            self._file.write(json.dumps(doc, indent=1).encode())
        self._groups = groups

    # -- reads --------------------------------------------------------------------------------

    def get(self, name: str) -> SubscriptionGroupConfig | None:
        """The definition in force, or None when the group has none."""
        return self._groups.get(name)

    def effective(self, name: str) -> SubscriptionGroupConfig:
        """What applies to `name`: its definition, or the defaults when auto-create is on."""
        group = self._groups.get(name)
        if group is not None:
            return group
        if not self.auto_create:
            raise NotFound(
                f"subscription group {name!r} is not defined and this broker does not create "
                f"groups automatically; define it under {GROUP_PREFIX}{name}", code=NOT_EXIST)
        return SubscriptionGroupConfig(name)

    def snapshot(self) -> list[SubscriptionGroupConfig]:
        with self._lock:
            return sorted(self._groups.values(), key=lambda g: g.name)

    def check_consume(self, name: str, *, broadcasting: bool = False) -> None:
        """Raise unless `name` may consume now (pull, commit offsets, join the coordinator).
        An empty name (a tool reading a queue without a group) is not checked here."""
        if not name:
            return
        group = self.effective(name)
        if not group.consume_enable:
            raise PreconditionFailed(
                f"subscription group {name!r} may not consume: consume_enable is false in "
                f"{GROUP_PREFIX}{name}", code=NOT_CONSUMABLE)
        if broadcasting and not group.consume_broadcast_enable:
            raise PreconditionFailed(
                f"subscription group {name!r} may not consume in BROADCASTING mode: "
                f"consume_broadcast_enable is false in {GROUP_PREFIX}{name}",
                code=BROADCAST_DISABLED)

    # -- writes -------------------------------------------------------------------------------

    def put(self, group: SubscriptionGroupConfig) -> tuple[bool, SubscriptionGroupConfig | None]:
        """Install a definition; (changed, the definition it replaced or None)."""
        with self._lock:
            old = self._groups.get(group.name)
            if old == group:
                return False, old
            self._commit({**self._groups, group.name: group})
            return True, old

    def remove(self, name: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            old = self._groups.get(name)
            if old is not None:
                self._commit({n: g for n, g in self._groups.items() if n != name})
            return old

    def retain(self, names: set[str]) -> list[str]:
        """Drop every definition not in `names` (after a full listing); returns the dropped."""
        with self._lock:
            dropped = sorted(set(self._groups) - names)
            if dropped:
                self._commit({n: g for n, g in self._groups.items() if n in names})
            return dropped
