"""A replica group's replication state, as the controller records it in the config center at
`/tidemq/replication/groups/<broker_name>` (docs/replication.md): written only by the active
controller (with a compare-and-set on its revision), watched by every replica of the group.
One definition for both sides, so they cannot read the value differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

NO_MASTER = -1
REPLICATION_ROOT = "/tidemq/replication/"
LIVE_PREFIX = REPLICATION_ROOT + "live/"       # <broker_name>/<replica_id>: a replica's lease
GROUPS_PREFIX = REPLICATION_ROOT + "groups/"   # <broker_name>: its GroupState


def live_key(broker_name: str, replica_id: int) -> str:
    return f"{LIVE_PREFIX}{broker_name}/{replica_id}"


def group_key(broker_name: str) -> str:
    return GROUPS_PREFIX + broker_name


def store_id_of(incarnation: str) -> str:
    """An incarnation is "<store id>:<start counter>": the copy of the data, and which start
    of the process serves it (a wiped disk gets a new store id, every start a new counter)."""
    return incarnation.partition(":")[0]


@dataclass(frozen=True)
class GroupState:
    """Who is master at which epoch, the in-sync set, and the master's addresses.

    `incarnations`: the incarnation under which each in-sync member was counted (a member
    without one was recorded by an older controller). `confirmed_offset`: the last confirmed
    offset the master reported — no election goes below it. `waiting_for`: set while the
    group has no electable replica, the replicas that could end the wait.
    `eligible_leaders` (Kafka KIP-966's ELR): members a change of the set removed while they
    still held every acknowledged byte, with the incarnation they held it under — kept only
    while the set has one member and its master acknowledges only with a quorum (nothing can
    be acknowledged then), so they may still be elected cleanly when they return."""

    master: int
    epoch: int
    in_sync: frozenset[int]
    master_addr: str = ""
    master_ha_addr: str = ""
    incarnations: Mapping[int, str] = field(default_factory=dict, hash=False)
    confirmed_offset: int = 0
    waiting_for: frozenset[int] = frozenset()
    eligible_leaders: Mapping[int, str] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict:
        return {"master": self.master, "epoch": self.epoch, "in_sync": sorted(self.in_sync),
                "master_addr": self.master_addr, "master_ha_addr": self.master_ha_addr,
                "incarnations": {str(r): inc for r, inc in sorted(self.incarnations.items())},
                "confirmed_offset": self.confirmed_offset,
                "waiting_for": sorted(self.waiting_for),
                "eligible_leaders": {str(r): inc for r, inc
                                     in sorted(self.eligible_leaders.items())}}

    @classmethod
    def from_json(cls, value: Mapping) -> GroupState:
        """Raises KeyError, ValueError or TypeError for a value the controller never writes."""
        return cls(int(value["master"]), int(value["epoch"]),
                   frozenset(int(i) for i in value.get("in_sync", ())),
                   str(value.get("master_addr", "")), str(value.get("master_ha_addr", "")),
                   {int(r): str(inc) for r, inc in dict(value.get("incarnations", {})).items()},
                   int(value.get("confirmed_offset", 0)),
                   frozenset(int(i) for i in value.get("waiting_for", ())),
                   {int(r): str(inc)
                    for r, inc in dict(value.get("eligible_leaders", {})).items()})

    def with_addrs(self, addr: str, ha_addr: str) -> GroupState:
        return self.replace(master_addr=addr, master_ha_addr=ha_addr)

    def replace(self, **changes) -> GroupState:
        return dataclasses.replace(self, **changes)
