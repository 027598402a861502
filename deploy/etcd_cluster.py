"""The control plane's etcd cluster: how its members run, and what `make status` says about
them.

Every member starts with the whole cluster on its command line (`--initial-cluster`, the same
`--initial-cluster-token`, `--initial-cluster-state new`). etcd reads those flags only to
create a new data directory: a member restarted by the supervisor (or compose) finds its WAL
and rejoins as the member it was, so the command line never changes between starts.

`observe` asks every member for Maintenance.Status over its client port (the etcd v3 stubs in
`tidemq.etcd`), with the names from Cluster.MemberList: who leads, in which raft term, each
member's committed and applied index and how far it trails the leader.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import grpc
from tidemq.etcd import rpc_pb2, rpc_pb2_grpc

from deploy.topology import Placement, Service, Topology


def _url(host: str, port: int, tls: bool = False) -> str:
    return f"{'https' if tls else 'http'}://{host}:{port}"


def initial_cluster(topology: Topology, placement: Placement, tls: bool = False) -> str:
    """name=peer-URL for every member, comma-separated (`--initial-cluster`)."""
    return ",".join(
        f"{m.name}={_url(placement.host(m), placement.port(m, 'peer'), tls)}"
        for m in topology.etcd_members())


def argv(service: Service, topology: Topology, placement: Placement, *, data_dir: str,
         executable: str = "etcd", tls: dict[str, str] | None = None) -> list[str]:
    """The command line of one member. `tls`: cert_file, key_file and trusted_ca_file for
    client and peer TLS with client certificates required on both (the secure profile)."""
    plane = topology.control_plane
    bind = "0.0.0.0" if placement.compose else "127.0.0.1"
    host = placement.host(service)
    client, peer = placement.port(service, "client"), placement.port(service, "peer")
    secure = tls is not None
    args = [
        executable,
        "--name", service.name,
        "--data-dir", data_dir,   # etcd keeps its WAL and snapshots under member/ there
        "--listen-client-urls", _url(bind, client, secure),
        "--advertise-client-urls", _url(host, client, secure),
        "--listen-peer-urls", _url(bind, peer, secure),
        "--initial-advertise-peer-urls", _url(host, peer, secure),
        "--initial-cluster", initial_cluster(topology, placement, secure),
        "--initial-cluster-token", plane.initial_cluster_token,
        "--initial-cluster-state", "new",
        "--heartbeat-interval", str(plane.heartbeat_interval_ms),
        "--election-timeout", str(plane.election_timeout_ms),
        "--auto-compaction-mode", "revision",
        "--auto-compaction-retention", str(plane.auto_compaction_retention),
        "--logger", "zap",
    ]  # fmt: skip
    if tls:
        args += [
            "--client-cert-auth", "--trusted-ca-file", tls["trusted_ca_file"],
            "--cert-file", tls["cert_file"], "--key-file", tls["key_file"],
            "--peer-client-cert-auth", "--peer-trusted-ca-file", tls["trusted_ca_file"],
            "--peer-cert-file", tls["cert_file"], "--peer-key-file", tls["key_file"],
        ]  # fmt: skip
    return args


# --- make status -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MemberState:
    """One member as it answers Maintenance.Status; reachable False when it does not."""

    name: str
    addr: str
    reachable: bool
    error: str = ""
    member_id: int = 0
    leader_id: int = 0           # the leader it knows (0: none)
    raft_term: int = 0
    raft_index: int = 0          # committed
    raft_applied_index: int = 0
    db_size: int = 0
    version: str = ""
    alarms: tuple[str, ...] = ()  # etcd's errors, e.g. "etcdserver: mvcc: database space exceeded"
    revision: int = 0
    cluster_id: int = 0

    @property
    def leader(self) -> bool:
        return self.reachable and self.member_id != 0 and self.member_id == self.leader_id


@dataclasses.dataclass(frozen=True)
class ClusterState:
    members: list[MemberState]
    leader: str | None            # the leader's name, as the reachable members agree; None: none

    def lag(self, member: MemberState) -> int | None:
        """Raft entries a member has yet to apply of what the leader committed (None: no
        leader, or the member did not answer)."""
        leader = next((m for m in self.members if m.name == self.leader), None)
        if leader is None or not member.reachable:
            return None
        return max(0, leader.raft_index - member.raft_applied_index)


def observe(topology: Topology, placement: Placement, timeout: float = 1.0,
            credentials: grpc.ChannelCredentials | None = None) -> ClusterState:
    """Every member's raft state through `placement`'s addresses (127.0.0.1 and the local or
    published ports)."""
    members = []
    for member in topology.etcd_members():
        addr = f"127.0.0.1:{placement.port(member, 'client')}"
        channel = (grpc.secure_channel(addr, credentials) if credentials
                   else grpc.insecure_channel(addr))
        try:
            with channel:
                status = rpc_pb2_grpc.MaintenanceStub(channel).Status(
                    rpc_pb2.StatusRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            members.append(MemberState(member.name, addr, False,
                                       error=exc.details() or exc.code().name))
            continue
        members.append(MemberState(
            member.name, addr, True, member_id=status.header.member_id,
            leader_id=status.leader, raft_term=status.raftTerm, raft_index=status.raftIndex,
            raft_applied_index=status.raftAppliedIndex, db_size=status.dbSize,
            version=status.version, alarms=tuple(status.errors),
            revision=status.header.revision, cluster_id=status.header.cluster_id))
    # A member answering for another cluster than most (another --initial-cluster-token, or
    # another cluster's data directory) is no member of this one: the others refuse its peers.
    votes = Counter(m.cluster_id for m in members if m.reachable)
    ours = max(votes, key=lambda c: votes[c]) if len(votes) > 1 else None
    members = [m if ours is None or not m.reachable or m.cluster_id == ours else MemberState(
        m.name, m.addr, False, error=(
            f"answers for another etcd cluster (cluster id {m.cluster_id:x}, the others' "
            f"{ours:x}): started with another --initial-cluster-token or on another "
            "cluster's data directory; it is no member of this cluster"))
        for m in members]
    leaders = {m.leader_id for m in members if m.reachable and m.leader_id}
    leader = next((m.name for m in members if m.leader and len(leaders) == 1), None)
    return ClusterState(members, leader)


def status_lines(topology: Topology, placement: Placement, timeout: float = 1.0,
                 credentials: grpc.ChannelCredentials | None = None) -> list[str]:
    """What `make status` prints about the etcd cluster; a member that does not answer is
    DOWN, and a cluster whose members name no common leader says so."""
    state = observe(topology, placement, timeout, credentials)
    if not state.members:
        return []
    up = [m for m in state.members if m.reachable]
    term = max((m.raft_term for m in up), default=0)
    header = (f"leader {state.leader}, raft term {term}" if state.leader
              else "NO LEADER (no quorum: writes and linearizable reads wait)")
    lines = [f"etcd members ({len(up)}/{len(state.members)} answering, {header}):"]
    for member in state.members:
        where = f"  {member.name:<16} {member.addr:<16}"
        if not member.reachable:
            lines.append(f"{where} DOWN      {member.error}")
            continue
        role = "leader  " if member.leader else "follower"
        lag = state.lag(member)
        lag_text = "lag unknown" if lag is None else f"lag {lag} entries"
        line = (f"{where} {role}  raft index {member.raft_index} (applied "
                f"{member.raft_applied_index}), {lag_text}, revision {member.revision}, "
                f"db {_size(member.db_size)}")
        if member.alarms:
            line += f"  ALARMS: {'; '.join(member.alarms)}"
        lines.append(line)
    return lines


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size} {unit}"
        size //= 1024
    return f"{size} GiB"
