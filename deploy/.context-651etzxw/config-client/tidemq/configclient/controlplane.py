"""The control plane as an operator sees it: each config-center instance, and the Redis tier
behind them (nodes with role and lag, Sentinels with their view of the master).

>>> with ConfigClient("a:7070,b:7071") as config:     # doctest: +SKIP
...     plane = config.control_plane()
...     [(i.address, i.reachable) for i in plane.instances]
[('a:7070', True), ('b:7071', False)]
>>> [(n.address, n.role, n.lag_bytes) for n in plane.store.nodes]     # doctest: +SKIP
[('10.0.0.5:6379', 'master', None), ('10.0.0.6:6379', 'replica', 0)]

Every configured instance is asked on its own, at once, so a dead one shows as unreachable
instead of being skipped the way failover skips it; the tier is described by the first
instance (in the configured order) that answered. `to_json()` is the shape of
`tidemq cluster control-plane -o json` and of the gateway's `GET /v1/cluster/control-plane`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tidemq.common import errors
from tidemq.v1 import config_pb2 as pb


@dataclass(frozen=True)
class RedisNode:
    address: str
    role: str                     # "master", "replica", or "" when it did not answer
    reachable: bool
    error: str
    replication_offset: int
    lag_bytes: int | None         # replicas: bytes behind their master (None = unknown)
    link_status: str              # replicas: master_link_status ("up" / "down")
    master_address: str           # replicas: the master they follow
    connected_replicas: int       # masters


@dataclass(frozen=True)
class SentinelView:
    address: str
    reachable: bool
    error: str
    master_address: str           # where this Sentinel says the master is
    master_down: bool             # it flags the master s_down or o_down
    master_flags: str
    other_sentinels: int
    quorum: int


@dataclass(frozen=True)
class StoreDescription:
    """What one config-center instance stores its state in, as it sees it now."""

    advertised_addr: str
    version: str
    target: str                   # the Redis URL described without its password
    replicated: bool
    master_name: str
    nodes: list[RedisNode]
    sentinels: list[SentinelView]

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
                          "replicated": store.replicated, "master_name": store.master_name,
                          "nodes": [asdict(n) for n in store.nodes],
                          "sentinels": [asdict(s) for s in store.sentinels]}}


def store_from_pb(reply: pb.DescribeStoreResponse) -> StoreDescription:
    return StoreDescription(
        reply.advertised_addr, reply.version, reply.target, reply.replicated, reply.master_name,
        [RedisNode(n.address, n.role, n.reachable, n.error, n.replication_offset,
                   n.lag_bytes if n.HasField("lag_bytes") else None, n.link_status,
                   n.master_address, n.connected_replicas) for n in reply.nodes],
        [SentinelView(s.address, s.reachable, s.error, s.master_address, s.master_down,
                      s.master_flags, s.other_sentinels, s.quorum) for s in reply.sentinels])


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
