"""Kafka consumer groups on TideMQ's group coordinator (docs/consumer-groups.md).

The brokers run Kafka's classic group protocol already (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup); this module forwards a Kafka member's calls to the broker that coordinates its
group (the members' placement rule over the broker groups) and keeps the protocol bytes as
they are. Kafka protocol names are carried as `kafka/<protocol type>/<name>`, so a Kafka
member and a native TideMQ member (whose protocols are "averagely", "sticky", ...) never
agree on a protocol: joining the other's group answers INCONSISTENT_GROUP_PROTOCOL.

The calls are plain gRPC on the shared channel pool, with no circuit breaker: a JoinGroup
parked through a rebalance legitimately runs to its deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidemq.client import NameServerClient
from tidemq.common import errors
from tidemq.common.channel import BrokerChannels
from tidemq.common.placement import coordinator_for
from tidemq.v1 import broker_pb2

PROTOCOL_PREFIX = "kafka/"
NATIVE_PROTOCOL_TYPE = "tidemq"   # what DescribeGroups/ListGroups name a native group's type
MASTER_ID = 0
JOIN_MARGIN_S = 8.0      # the initial rebalance delay (3 s ref) plus Kafka's 5 s call margin
LOST_COORDINATOR = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                              "SERVICE_UNAVAILABLE", "CIRCUIT_OPEN", "DEADLINE_EXCEEDED"})


def wire_protocol(protocol_type: str, name: str) -> str:
    return f"{PROTOCOL_PREFIX}{protocol_type}/{name}"


def kafka_protocol(wire_name: str) -> str:
    """The Kafka protocol name of a coordinator protocol name ("" if it is no Kafka one)."""
    if not wire_name.startswith(PROTOCOL_PREFIX):
        return ""
    return wire_name[len(PROTOCOL_PREFIX):].partition("/")[2]


def split_protocol(wire_name: str) -> tuple[str, str]:
    """(Kafka protocol type, protocol name) of a coordinator protocol name: ("consumer",
    "range") for "kafka/consumer/range"; a native TideMQ protocol is (NATIVE_PROTOCOL_TYPE,
    its name); ("", "") when the group has none (no generation yet, or Empty)."""
    if not wire_name:
        return "", ""
    if not wire_name.startswith(PROTOCOL_PREFIX):
        return NATIVE_PROTOCOL_TYPE, wire_name
    protocol_type, _, name = wire_name[len(PROTOCOL_PREFIX):].partition("/")
    return protocol_type, name


# The coordinator calls are not idempotent: the channel repeats one only when it was never written.
_channels = BrokerChannels()


@dataclass(frozen=True, slots=True)
class Joined:
    generation_id: int
    protocol_name: str
    leader_id: str
    member_id: str
    members: list[tuple[str, bytes]]   # (member id, metadata), the leader only


@dataclass(frozen=True, slots=True)
class Described:
    state: str             # Kafka's state names: Empty, PreparingRebalance, ..., Dead
    protocol_type: str
    protocol: str
    members: list[tuple[str, str, str, bytes, bytes]]   # id, client id, host, metadata, assignment


class GroupCoordination:
    def __init__(self, namesrv: NameServerClient, rpc_timeout_s: float = 3.0) -> None:
        self.namesrv = namesrv
        self.rpc_timeout_s = rpc_timeout_s
        self._lock = threading.Lock()
        self._coordinators: dict[str, str] = {}   # group -> coordinator address

    def join(self, group: str, member_id: str, *, session_timeout_ms: int,
             rebalance_timeout_ms: int, client_id: str, client_host: str, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], client_software: str = "") -> Joined:
        request = broker_pb2.JoinGroupRequest(
            group_id=group, member_id=member_id, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, client_id=client_id,
            client_host=client_host, client_software=client_software,
            protocols=[broker_pb2.GroupProtocol(name=wire_protocol(protocol_type, name),
                                                metadata=metadata)
                       for name, metadata in protocols])
        reply = self._call(group, "JoinGroup", request,
                           timeout=rebalance_timeout_ms / 1000 + JOIN_MARGIN_S)
        return Joined(reply.generation_id, kafka_protocol(reply.protocol_name), reply.leader_id,
                      reply.member_id, [(m.member_id, m.metadata) for m in reply.members])

    def sync(self, group: str, generation_id: int, member_id: str,
             assignments: Sequence[tuple[str, bytes]], timeout_s: float) -> bytes:
        reply = self._call(group, "SyncGroup", broker_pb2.SyncGroupRequest(
            group_id=group, generation_id=generation_id, member_id=member_id,
            assignments=[broker_pb2.MemberAssignment(member_id=m, assignment=a)
                         for m, a in assignments]), timeout=timeout_s)
        return reply.assignment

    def heartbeat(self, group: str, generation_id: int, member_id: str) -> None:
        self._call(group, "Heartbeat", broker_pb2.HeartbeatRequest(
            group_id=group, generation_id=generation_id, member_id=member_id))

    def leave(self, group: str, member_id: str) -> None:
        self._call(group, "LeaveGroup", broker_pb2.LeaveGroupRequest(
            group_id=group, member_id=member_id))

    def describe(self, group: str) -> Described:
        """The coordinator's view of `group` (a group it never saw is Dead, no members)."""
        reply = self._call(group, "DescribeGroup",
                           broker_pb2.DescribeGroupRequest(group_id=group))
        protocol_type, protocol = split_protocol(reply.protocol_name)
        return Described(reply.state or "Dead", protocol_type, protocol,
                         [(m.member_id, m.client_id, m.client_host, m.metadata, m.assignment)
                          for m in reply.members])

    # -- plumbing ------------------------------------------------------------------------------

    def coordinator(self, group: str) -> str:
        with self._lock:
            addr = self._coordinators.get(group)
        if addr:
            return addr
        info = self.namesrv.cluster_info()
        groups = {name: dict(data.broker_addrs)
                  for name, data in info.broker_addr_table.items() if data.broker_addrs}
        chosen = coordinator_for(group, groups)
        addr = groups[chosen].get(MASTER_ID, "")
        if not addr:
            raise errors.ServiceUnavailable(
                f"broker group {chosen!r}, which coordinates {group!r}, has no master right now",
                code="COORDINATOR_NOT_AVAILABLE")
        with self._lock:
            self._coordinators[group] = addr
        return addr

    def _call(self, group: str, method: str, request: Any, *,
              timeout: float | None = None) -> Any:
        addr = self.coordinator(group)
        try:
            return _channels.get(addr).call(method, request,
                                            timeout=timeout or self.rpc_timeout_s)
        except errors.TideMQError as error:
            if error.code in LOST_COORDINATOR or isinstance(error, errors.ServiceUnavailable):
                with self._lock:
                    self._coordinators.pop(group, None)
            raise
