"""The etcd cluster as an operator needs to see it: every member, who leads, how far each is
behind. Each member is asked on its own, so a dead or partitioned member shows as such
instead of being skipped the way calls skip it.

A member started with another `--initial-cluster-token` (or on another cluster's data
directory) belongs to another cluster: the members refuse its peer traffic ("request cluster
ID mismatch" in their logs) and it never joins. It is reported as such, naming the two cluster
ids: from its Status when it answers one, else from its peer URL's `/members`, which etcd
serves (with the cluster id in `X-Etcd-Cluster-ID`) even while the member waits to join."""

from __future__ import annotations

import ssl
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

import grpc
from tidemq.configcenter.etcd import EtcdConnection, Member
from tidemq.etcd import rpc_pb2 as etcd

STATUS_TIMEOUT_S = 1.0
PEER_TIMEOUT_S = 0.5


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


def other_cluster(name: str, theirs: str, ours: str) -> str:
    """Why `name` is no member of this cluster, in an operator's words."""
    return (f"{name} belongs to another etcd cluster (cluster id {theirs}, this cluster's is "
            f"{ours}): it was started with another --initial-cluster-token or on another "
            "cluster's data directory, and the members refuse its peer traffic (\"request "
            "cluster ID mismatch\" in their logs); stop it, empty its data directory and add "
            "it with this cluster's token (etcdctl member add, --initial-cluster-state existing)")


class TopologyReader:
    def __init__(self, connection: EtcdConnection) -> None:
        self.connection = connection
        target = connection.target
        self._ssl: ssl.SSLContext | None = None
        if target.tls:
            self._ssl = ssl.create_default_context(cafile=target.ca_file)
            if target.cert_file:
                self._ssl.load_cert_chain(target.cert_file, target.key_file)

    def peer_cluster_id(self, member: etcd.Member) -> str:
        """The cluster id a listed member's peer URL answers with ("" when it answers none):
        etcd serves it before the member has joined, so a member that waits forever to join
        a cluster it does not belong to still says which one it is in."""
        for url in member.peerURLs:
            try:
                with urllib.request.urlopen(
                        f"{url.rstrip('/')}/members", timeout=PEER_TIMEOUT_S,
                        context=self._ssl if url.startswith("https") else None) as reply:
                    cluster_id = reply.headers.get("X-Etcd-Cluster-ID", "")
            except (OSError, ValueError):
                continue
            if cluster_id:
                return cluster_id
        return ""

    def describe(self) -> ClusterState:
        statuses = {m.endpoint: s for m, s in self.connection.each_member(_status)}
        listed: list[etcd.Member] = []
        listed_by = 0
        try:
            members = self.connection.call("cluster", "MemberList", etcd.MemberListRequest(),
                                           mutation=False, timeout=2 * STATUS_TIMEOUT_S,
                                           require_leader=False)   # names without a quorum too
            listed, listed_by = list(members.members), members.header.cluster_id
        except Exception:  # noqa: BLE001 - no quorum: describe what the endpoints say
            listed = []
        # The cluster is the one most endpoints answer for (a tie: the one that listed the
        # members); an endpoint answering for another is a stray member of another cluster.
        votes = Counter(s.header.cluster_id for s in statuses.values()
                        if isinstance(s, etcd.StatusResponse))
        ours = max(votes, key=lambda c: (votes[c], c == listed_by)) if votes else listed_by
        cluster_id = f"{ours:x}" if ours else ""
        if listed_by and listed_by != ours:
            listed = []  # listed by the stray cluster: not this cluster's members
        by_endpoint = {url.split("://", 1)[-1]: m for m in listed for url in m.clientURLs}
        answers = [s for s in statuses.values()
                   if isinstance(s, etcd.StatusResponse) and s.header.cluster_id == ours]
        leader_id = next((s.leader for s in answers if s.leader), 0)
        leader_index = next((s.raftIndex for s in answers
                             if s.header.member_id == leader_id), None)
        revision = max((s.header.revision for s in answers), default=0)
        states: list[MemberState] = []
        seen: set[int] = set()
        for endpoint, reply in statuses.items():
            listed_member = by_endpoint.get(endpoint)
            if isinstance(reply, etcd.StatusResponse) and reply.header.cluster_id != ours:
                name = listed_member.name if listed_member else ""
                if listed_member:
                    seen.add(listed_member.ID)
                states.append(MemberState(
                    name, f"{reply.header.member_id:x}", endpoint, False,
                    error=other_cluster(f"the member at {endpoint}",
                                        f"{reply.header.cluster_id:x}", cluster_id)))
            elif isinstance(reply, etcd.StatusResponse):
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
                    theirs = self.peer_cluster_id(listed_member)
                    if theirs and cluster_id and theirs != cluster_id:
                        error = other_cluster(f"the member at {endpoint} (peer "
                                              f"{','.join(listed_member.peerURLs)})",
                                              theirs, cluster_id)
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
