"""The control plane as an operator sees it: each config-center instance, and the etcd
cluster behind them (members with the raft leader, term, committed/applied index and lag).

>>> with ConfigClient("a:7070,b:7071") as config:     # doctest: +SKIP
...     plane = config.control_plane()
...     [(i.address, i.reachable) for i in plane.instances]
[('a:7070', True), ('b:7071', False)]
>>> [(m.name, m.leader, m.lag_entries) for m in plane.store.members]     # doctest: +SKIP
[('etcd-2', True, 0), ('etcd-1', False, 0), ('etcd-3', False, None)]

Every configured instance is asked on its own, at once, so a dead one shows as unreachable
instead of being skipped the way failover skips it; the cluster is described by the first
instance (in the configured order) that answered. `to_json()` is the shape of
`tidemq cluster control-plane -o json` and of the gateway's `GET /v1/cluster/control-plane`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tidemq.common import errors
from tidemq.v1 import config_pb2 as pb


@dataclass(frozen=True)
class EtcdMember:
    name: str
    id: str                       # etcd's member id, hex
    endpoint: str                 # its client URL as the cluster lists it
    reachable: bool
    error: str
    leader: bool
    raft_term: int
    raft_index: int               # committed
    raft_applied_index: int
    lag_entries: int | None       # the leader's committed index minus its applied (None: unknown)
    db_size_bytes: int
    version: str
    learner: bool
    alarms: list[str]


@dataclass(frozen=True)
class StoreDescription:
    """What one config-center instance stores its state in, as it sees it now."""

    advertised_addr: str
    version: str
    target: str                   # the etcd endpoints it was given (and TLS / auth)
    cluster_id: str
    revision: int
    leader: str                   # the leader's name; "" = none (no quorum)
    members: list[EtcdMember]     # the leader first

    @property
    def quorum(self) -> int:
        return len([m for m in self.members if not m.learner]) // 2 + 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InstanceStatus:
    """One configured config-center address: did it answer, and what it said."""

    address: str
    reachable: bool
    error: str = ""               # why it did not answer, or why it could not describe
    store: StoreDescription | None = None
    failure: errors.TideMQError | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        store = self.store
        return {"address": self.address, "reachable": self.reachable, "error": self.error,
                "version": store.version if store else "",
                "advertised_addr": store.advertised_addr if store else "",
                "target": store.target if store else ""}


@dataclass(frozen=True)
class ControlPlane:
    instances: list[InstanceStatus]
    store: StoreDescription       # as the first instance that answered describes it

    @property
    def reported_by(self) -> str:
        return next(i.address for i in self.instances if i.store is self.store)

    def to_json(self) -> dict[str, Any]:
        store = self.store
        return {"config_centers": [i.to_json() for i in self.instances],
                "store": {"reported_by": self.reported_by, "target": store.target,
                          "cluster_id": store.cluster_id, "revision": store.revision,
                          "leader": store.leader, "quorum": store.quorum,
                          "members": [asdict(m) for m in store.members]}}


def store_from_pb(reply: pb.DescribeStoreResponse) -> StoreDescription:
    return StoreDescription(
        reply.advertised_addr, reply.version, reply.target, reply.cluster_id, reply.revision,
        reply.leader,
        [EtcdMember(m.name, m.id, m.endpoint, m.reachable, m.error, m.leader, m.raft_term,
                    m.raft_index, m.raft_applied_index,
                    m.lag_entries if m.HasField("lag_entries") else None, m.db_size_bytes,
                    m.version, m.learner, list(m.alarms)) for m in reply.members])


def instance_status(address: str, call: Any) -> InstanceStatus:
    """Ask one instance (`call()` returns its DescribeStoreResponse): a transport failure
    means unreachable; any other error means it answered but could not describe (an older
    version without DescribeStore answers UNIMPLEMENTED, a user without rights is denied)."""
    try:
        return InstanceStatus(address, True, store=store_from_pb(call()))
    except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
        return InstanceStatus(address, False, exc.message, failure=exc)
    except errors.TideMQError as exc:
        return InstanceStatus(address, True, f"{exc.code}: {exc.message}", failure=exc)


def control_plane(instances: list[InstanceStatus]) -> ControlPlane:
    """The report, or the error that says why no instance could describe the store."""
    described = next((i.store for i in instances if i.store is not None), None)
    if described is not None:
        return ControlPlane(instances, described)
    refused = next((i.failure for i in instances if i.reachable and i.failure), None)
    if refused is not None:
        raise refused  # e.g. PERMISSION_DENIED: the same answer from every instance
    tried = ", ".join(i.address for i in instances)
    raise errors.ServiceUnavailable(f"no config center answered (tried {tried})")
