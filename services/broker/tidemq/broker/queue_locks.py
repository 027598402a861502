"""Queue locks for orderly consumption (RocketMQ's lockBatchMQ / unlockBatchMQ).

A consumer in orderly mode locks each queue it owns before consuming it and renews the lock
every 20 s; the lock is a lease of `lease_s` (ref 60 s), so a consumer that dies or is cut off
loses its queues within a minute and never two consumers of a group process one queue at once.

The locks are config-center keys `/tidemq/locks/<broker>/<group>/<topic>/<queue>` = {"client"}
attached to one config-center lease per (group, client) that this broker keeps alive on each
lock request: written with compare-and-set, so a broker restart (or a new master) keeps every
lock in force until its lease runs out — nothing is held only in this process.
"""

from __future__ import annotations

import json
import threading

from tidemq.common import errors
from tidemq.configclient.client import ConfigClient

LOCK_PREFIX = "/tidemq/locks/"
QueueRef = tuple[str, int]  # (topic, queue_id)


class QueueLocks:
    def __init__(self, config: ConfigClient, broker_name: str, *, lease_s: int = 60) -> None:
        self.config, self.broker_name, self.lease_s = config, broker_name, lease_s
        self._leases: dict[tuple[str, str], int] = {}  # (group, client) -> lease id (a cache)
        self._lock = threading.Lock()

    def key(self, group: str, topic: str, queue_id: int) -> str:
        return f"{LOCK_PREFIX}{self.broker_name}/{group}/{topic}/{queue_id}"

    def _lease(self, group: str, client: str) -> int:
        with self._lock:
            lease = self._leases.get((group, client))
        if lease and self.config.lease_keepalive(lease) > 0:
            return lease
        lease = self.config.lease_grant(self.lease_s)
        with self._lock:
            self._leases[(group, client)] = lease
        return lease

    def lock(self, group: str, client: str, queues: list[QueueRef]) -> list[QueueRef]:
        """Lock (or renew) `queues` for `client`; the ones it holds now."""
        if not group or not client:
            raise errors.InvalidArgument("group and client_id must not be empty")
        lease, held = self._lease(group, client), []
        value = json.dumps({"client": client})
        for topic, queue_id in queues:
            key = self.key(group, topic, queue_id)
            current = self.config.get(key)
            if current is not None and json.loads(current.value).get("client") != client:
                continue  # another member holds it until its lease runs out
            revision = current.mod_revision if current is not None else 0
            if self.config.put(key, value, expected_revision=revision, lease=lease).succeeded:
                held.append((topic, queue_id))
        return held

    def unlock(self, group: str, client: str, queues: list[QueueRef]) -> None:
        for topic, queue_id in queues:
            key = self.key(group, topic, queue_id)
            current = self.config.get(key)
            if current is not None and json.loads(current.value).get("client") == client:
                self.config.delete(key, expected_revision=current.mod_revision)
