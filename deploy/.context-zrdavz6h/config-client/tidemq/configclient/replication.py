"""A replica group's replication state, as the controller records it in the config center at
`/tidemq/replication/groups/<broker_name>` (docs/replication.md): written only by the active
controller (with a compare-and-set on its revision), watched by every replica of the group.
One definition for both sides, so they cannot read the value differently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NO_MASTER = -1
REPLICATION_ROOT = "/tidemq/replication/"
LIVE_PREFIX = REPLICATION_ROOT + "live/"       # <broker_name>/<replica_id>: a replica's lease
GROUPS_PREFIX = REPLICATION_ROOT + "groups/"   # <broker_name>: its GroupState


def live_key(broker_name: str, replica_id: int) -> str:
    return f"{LIVE_PREFIX}{broker_name}/{replica_id}"


def group_key(broker_name: str) -> str:
    return GROUPS_PREFIX + broker_name


@dataclass(frozen=True)
class GroupState:
    """Who is master at which epoch, the in-sync set, and the master's addresses."""

    master: int
    epoch: int
    in_sync: frozenset[int]
    master_addr: str = ""
    master_ha_addr: str = ""

    def to_json(self) -> dict:
        return {"master": self.master, "epoch": self.epoch, "in_sync": sorted(self.in_sync),
                "master_addr": self.master_addr, "master_ha_addr": self.master_ha_addr}

    @classmethod
    def from_json(cls, value: Mapping) -> GroupState:
        """Raises KeyError, ValueError or TypeError for a value the controller never writes."""
        return cls(int(value["master"]), int(value["epoch"]),
                   frozenset(int(i) for i in value.get("in_sync", ())),
                   str(value.get("master_addr", "")), str(value.get("master_ha_addr", "")))

    def with_addrs(self, addr: str, ha_addr: str) -> GroupState:
        return GroupState(self.master, self.epoch, self.in_sync, addr, ha_addr)
