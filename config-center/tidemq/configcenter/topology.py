"""The etcd cluster as an operator needs to see it: every member, who leads, how far each is
behind. Each member is asked on its own, so a dead or partitioned member shows as such
instead of being skipped the way calls skip it."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from tidemq.configcenter.etcd import EtcdConnection, Member
from tidemq.etcd import rpc_pb2 as etcd

STATUS_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class MemberState:
    name: str
    id: str                   # hex, as etcdctl prints it
    endpoint: str
    reachable: bool
    error: str = ""
    leader: bool = False
    raft_term: int = 0
    raft_index: int = 0
    raft_applied_index: int = 0
    lag_entries: int | None = None
    db_size_bytes: int = 0
    version: str = ""
    learner: bool = False
    alarms: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterState:
    target: str
    cluster_id: str
    revision: int
    leader: str               # the leader's name, "" when no member knows one
    members: list[MemberState]


def _status(member: Member) -> etcd.StatusResponse:
    return member.maintenance.Status(etcd.StatusRequest(), timeout=STATUS_TIMEOUT_S)


class TopologyReader:
    def __init__(self, connection: EtcdConnection) -> None:
        self.connection = connection

    def describe(self) -> ClusterState:
        statuses = {m.endpoint: s for m, s in self.connection.each_member(_status)}
        listed: list[etcd.Member] = []
        cluster_id = ""
        for reply in statuses.values():
            if isinstance(reply, etcd.StatusResponse):
                cluster_id = f"{reply.header.cluster_id:x}"
                break
        try:
            members = self.connection.call("cluster", "MemberList", etcd.MemberListRequest(),
                                           mutation=False, timeout=2 * STATUS_TIMEOUT_S)
            listed = list(members.members)
        except Exception:  # noqa: BLE001 - no quorum: describe what the endpoints say
            listed = []
        by_endpoint = {url.split("://", 1)[-1]: m for m in listed for url in m.clientURLs}
        leader_id = next((s.leader for s in statuses.values()
                          if isinstance(s, etcd.StatusResponse) and s.leader), 0)
        leader_index = next((s.raftIndex for s in statuses.values()
                             if isinstance(s, etcd.StatusResponse)
                             and s.header.member_id == leader_id), None)
        revision = max((s.header.revision for s in statuses.values()
                        if isinstance(s, etcd.StatusResponse)), default=0)
        states: list[MemberState] = []
        seen: set[int] = set()
        for endpoint, reply in statuses.items():
            listed_member = by_endpoint.get(endpoint)
            if isinstance(reply, etcd.StatusResponse):
                member_id = reply.header.member_id
                seen.add(member_id)
                name = listed_member.name if listed_member else ""
                lag = (max(0, leader_index - reply.raftAppliedIndex)
                       if leader_index is not None else None)
                states.append(MemberState(
                    name, f"{member_id:x}", endpoint, True, leader=member_id == leader_id,
                    raft_term=reply.raftTerm, raft_index=reply.raftIndex,
                    raft_applied_index=reply.raftAppliedIndex, lag_entries=lag,
                    db_size_bytes=reply.dbSize, version=reply.version,
                    learner=reply.isLearner, alarms=list(reply.errors)))
            else:
                error = reply.details() if isinstance(reply, grpc.RpcError) else str(reply)
                if listed_member:
                    seen.add(listed_member.ID)
                states.append(MemberState(
                    listed_member.name if listed_member else "",
                    f"{listed_member.ID:x}" if listed_member else "", endpoint, False,
                    error=error or "no answer"))
        for extra in listed:  # members the cluster lists that the config center was not given
            if extra.ID not in seen:
                states.append(MemberState(extra.name, f"{extra.ID:x}",
                                          ",".join(extra.clientURLs), False,
                                          error="not among --etcd-endpoints"))
        states.sort(key=lambda s: (not s.leader, s.name, s.endpoint))
        leader = next((s.name or s.endpoint for s in states if s.leader), "")
        return ClusterState(self.connection.target.describe(), cluster_id, revision, leader,
                            states)
