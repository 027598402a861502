"""The replication keys in the config center: layout, JSON shapes, and CAS writes of a group.

Layout (docs/replication.md, "Controller"; shared with the broker's ReplicaManager):

- `/tidemq/replication/live/<broker_name>/<replica_id>` — a replica's liveness, written by the
  replica itself under its own lease: `{"addr", "ha_addr", "epoch", "log_end", "fence_ms",
  "quorum_acks", "renewal", "contact"?, "incarnation", "confirmed"}` (`incarnation` =
  "<store id>:<start>"; `confirmed` = a master's confirmed offset, -1 on a slave); `epoch` is the highest the replica knows (its
  store's epoch history, which survives restarts), the floor the controller's next epoch must
  clear; the rest feeds failure detection (detection.py).
- `/tidemq/replication/groups/<broker_name>` — the group's state (GroupState.to_json), written
  only by the active controller and always with compare-and-set on its mod revision, so two
  controllers that briefly both believe they are active can never both win a write.
- `/tidemq/replication/settings/<broker_name>` — optional `{"unclean_election": bool}`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common import errors
from tidemq.common.kv import KeyValue
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import (
    GROUPS_PREFIX,
    LIVE_PREFIX,
    REPLICATION_ROOT,
    group_key,
)
from tidemq.nameserver.controller.detection import Contact
from tidemq.nameserver.controller.state import GroupState

log = get_logger(__name__)

SETTINGS_PREFIX = REPLICATION_ROOT + "settings/"
CAS_ATTEMPTS = 10  # a group key has one writer; conflicts only come from a controller handover


def settings_key(broker_name: str) -> str:
    return SETTINGS_PREFIX + broker_name


@dataclass(frozen=True)
class LiveReplica:
    """One replica's live key: where it serves and how far its log reaches."""

    broker_name: str
    replica_id: int
    addr: str = ""
    ha_addr: str = ""
    epoch: int = 0
    log_end: int = 0
    fence_ms: int = 0             # the master's fence (0 = a broker that does not renew)
    quorum_acks: bool = False
    contact: Contact | None = None   # a slave's report of its master
    incarnation: str = ""         # "<store id>:<start>" ("" = a replica that does not say)
    confirmed: int = -1           # a master's confirmed offset (-1 = none reported)
    # where and when this controller saw it (not part of the value)
    mod_revision: int = field(default=0, compare=False)
    seen_at: float = field(default=0.0, compare=False)   # monotonic
    # the revision from which the key has shown this incarnation: its creation (a replica
    # deletes its previous process's key before writing its own), or the write that changed
    # the incarnation of a key that was not deleted in between
    registered: int = field(default=0, compare=False)

    @property
    def identity(self) -> str:
        """This incarnation's registration: what the prober's results are kept under."""
        return f"{self.incarnation}@{self.registered}"

    def to_json(self) -> dict:
        return {"addr": self.addr, "ha_addr": self.ha_addr, "epoch": self.epoch,
                "log_end": self.log_end}


@dataclass(frozen=True)
class StoredGroup:
    state: GroupState
    mod_revision: int


@dataclass
class ReplicationView:
    """Everything under /tidemq/replication/ as of `revision`, kept current from a watch."""

    revision: int = 0
    groups: dict[str, StoredGroup] = field(default_factory=dict)
    live: dict[str, dict[int, LiveReplica]] = field(default_factory=dict)
    unclean: dict[str, bool] = field(default_factory=dict)  # per-group override
    # (group, replica) -> the revision its live key was last deleted at: a write older than
    # that is about a key that no longer exists
    removed: dict[tuple[str, int], int] = field(default_factory=dict)

    def apply(self, kv: KeyValue, deleted: bool) -> str | None:
        """Fold one key's new value (or deletion) in; the broker name it concerns, or None
        for a key that is not ours or cannot be read (logged, never fatal: brokers write
        live keys and one bad value must not stop the controller)."""
        self.revision = max(self.revision, kv.mod_revision)
        try:
            return self._apply(kv, deleted)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("unreadable replication key ignored", key=kv.key, error=str(exc))
            return None

    def _apply(self, kv: KeyValue, deleted: bool) -> str | None:
        if kv.key.startswith(LIVE_PREFIX):
            name, _, replica = kv.key[len(LIVE_PREFIX):].rpartition("/")
            if not name:
                return None
            replica_id = int(replica)
            held = self.live.get(name, {}).get(replica_id)
            latest = max(held.mod_revision if held is not None else 0,
                         self.removed.get((name, replica_id), 0))
            if kv.mod_revision <= latest:
                # about a key older than what the view holds (a previous incarnation's, or
                # a key deleted since): it must not replace, remove or revive anything
                log.info("stale live-key event ignored", key=kv.key, deleted=deleted,
                         revision=kv.mod_revision, latest=latest)
                return None
            if deleted:
                self.remove(name, replica_id, kv.mod_revision)
            else:
                value = json.loads(kv.value)
                contact = value.get("contact")
                incarnation = str(value.get("incarnation", ""))
                created = kv.create_revision or kv.mod_revision
                if held is None or created > held.mod_revision:
                    registered = created            # a new key: this incarnation's first
                elif held.incarnation == incarnation:
                    registered = held.registered    # a renewal
                else:
                    registered = kv.mod_revision    # another incarnation, key not deleted
                self.live.setdefault(name, {})[replica_id] = LiveReplica(
                    name, replica_id, str(value.get("addr", "")), str(value.get("ha_addr", "")),
                    int(value.get("epoch", 0)), int(value.get("log_end", 0)),
                    int(value.get("fence_ms", 0)), bool(value.get("quorum_acks", False)),
                    Contact(int(contact["epoch"]), int(contact["silent_ms"]) / 1000,
                            bool(contact["gone"])) if contact else None,
                    incarnation, int(value.get("confirmed", -1)),
                    kv.mod_revision, time.monotonic(), registered)
            return name
        if kv.key.startswith(GROUPS_PREFIX):
            name = kv.key[len(GROUPS_PREFIX):]
            if deleted:
                self.groups.pop(name, None)
            else:
                current = self.groups.get(name)
                if current is None or current.mod_revision <= kv.mod_revision:
                    self.groups[name] = StoredGroup(GroupState.from_json(json.loads(kv.value)),
                                                    kv.mod_revision)
            return name
        if kv.key.startswith(SETTINGS_PREFIX):
            name = kv.key[len(SETTINGS_PREFIX):]
            if deleted:
                self.unclean.pop(name, None)
            else:
                value = json.loads(kv.value)
                if "unclean_election" in value:
                    self.unclean[name] = bool(value["unclean_election"])
                else:
                    self.unclean.pop(name, None)
            return name
        return None

    def remove(self, broker_name: str, replica_id: int, revision: int) -> None:
        """A replica's live key deleted at `revision` (seen, or the controller's own delete)."""
        replicas = self.live.get(broker_name, {})
        replicas.pop(replica_id, None)
        if not replicas:
            self.live.pop(broker_name, None)
        key = (broker_name, replica_id)
        self.removed[key] = max(self.removed.get(key, 0), revision)

    def names(self) -> set[str]:
        return set(self.groups) | set(self.live)

    def log_ends(self, broker_name: str) -> dict[int, int]:
        return {r: live.log_end for r, live in self.live.get(broker_name, {}).items()}

    def incarnations(self, broker_name: str) -> dict[int, str]:
        """Live replicas' incarnations (those that publish one)."""
        return {r: live.incarnation for r, live in self.live.get(broker_name, {}).items()
                if live.incarnation}

    def max_epoch(self, broker_name: str) -> int:
        """The highest epoch any live replica of the group reports (0 = none)."""
        return max((live.epoch for live in self.live.get(broker_name, {}).values()), default=0)


class ReplicationStore:
    """Reads the replication keys and writes group keys with bounded CAS retries."""

    def __init__(self, client: ConfigClient, *, cas_attempts: int = CAS_ATTEMPTS) -> None:
        self.client = client
        self.cas_attempts = cas_attempts

    def snapshot(self) -> ReplicationView:
        """Every replication key at one revision (one range: a consistent cut)."""
        result = self.client.range(REPLICATION_ROOT)
        view = ReplicationView(revision=result.revision)
        for kv in result.kvs:
            view.apply(kv, deleted=False)
        view.revision = result.revision
        return view

    def read_group(self, broker_name: str) -> StoredGroup | None:
        kv = self.client.get(group_key(broker_name))
        if kv is None:
            return None
        return StoredGroup(GroupState.from_json(kv.json()), kv.mod_revision)

    def write_group(self, broker_name: str, known: StoredGroup | None,
                    decide: Callable[[StoredGroup | None], GroupState | None],
                    fence: Callable[[], tuple[str, str, int]] | None = None,
                    on_written: Callable[[str, StoredGroup], None] = lambda name, stored: None
                    ) -> StoredGroup | None:
        """Write `decide(current)` in one transaction comparing the group key's mod revision
        and, with `fence`, the controller's election key (`fence()` answers that compare, or
        raises when this controller must no longer write): a controller deposed after its
        decision writes nothing. On a conflict on the group key re-read and decide again (the
        decision depends on what is stored). `decide` returning None = nothing to write; it
        may raise a domain error, which ends the attempt. `on_written` runs after each write
        this call applied. Returns what is stored afterwards."""
        current = known
        key = group_key(broker_name)
        for _ in range(self.cas_attempts):
            new = decide(current)
            if new is None or (current is not None and new == current.state):
                return current
            expected = current.mod_revision if current else 0
            compares = [(key, "mod", expected)]
            if fence is not None:
                compares.append(fence())
            result = self.client.txn(compares, {key: new.to_json()})
            if result.succeeded:
                stored = StoredGroup(new, result.revision)
                on_written(broker_name, stored)
                return stored
            if fence is not None:
                fence_key, _, claim = compares[-1]
                held = result.compared.get(fence_key)
                if held is None or held.create_revision != claim:
                    raise errors.Conflict(
                        f"group {broker_name!r} not written: this controller's claim on "
                        f"{fence_key} (created at revision {claim}) is gone; another "
                        "controller decides now")
            found = result.compared.get(key)
            log.info("group write conflicted; re-reading", group=broker_name,
                     expected=expected, found=found.mod_revision if found else 0)
            current = self.read_group(broker_name)
        raise errors.Conflict(f"group {broker_name!r} kept changing under the controller; gave "
                              f"up after {self.cas_attempts} compare-and-set attempts")
