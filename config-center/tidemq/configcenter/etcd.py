"""EtcdConnection: gRPC channels to an etcd cluster's members, and etcd's errors as TideMQ's.

One channel per member. A call goes to the member that answered last; when that member is
unreachable, stalled or has lost the leader it moves to the next one, as etcd's own client
does. Reads move freely (a read applies nothing); a write moves only when etcd cannot have
applied it (the member refused it before proposing, or it was never sent), because a write
that timed out may still commit and must not be applied twice. Whatever fails in the end
surfaces as SERVICE_UNAVAILABLE naming every member tried, within the call's deadline.

Every endpoint must be a member of one cluster. A member started with another
`--initial-cluster-token` that formed a cluster of its own would answer calls — and take
writes — from another data set, so the connection learns the cluster id that more than half
of its endpoints answer for (a background Status sweep, repeated while it runs) and never uses
an endpoint answering for another: such a reply is refused and the call moves on (it changed
nothing in this cluster), and streams (watches, keep-alives) are not opened on it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from tidemq.common.errors import InvalidArgument, NotFound, ServiceUnavailable, TideMQError
from tidemq.common.kv import RevisionCompacted
from tidemq.etcd import rpc_pb2 as etcd
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc

# Members are dialled with keepalive pings so a stalled member (SIGSTOP, a hung host) is
# noticed on an idle connection too; etcd refuses pings more often than every 5 s.
CHANNEL_OPTIONS = [("grpc.keepalive_time_ms", 5000), ("grpc.keepalive_timeout_ms", 2000),
                   ("grpc.keepalive_permit_without_calls", 1),
                   ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
# etcd's answers that say the member did not propose the request: safe to send elsewhere.
_NOT_APPLIED = ("no leader", "failed to connect", "connection refused", "not capable",
                "too many requests", "unhealthy cluster", "leader changed")
_MOVE_ON = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.UNKNOWN}
CLUSTER_SWEEP_S = 5.0   # how often every endpoint is asked which cluster it answers for
# Every call and stream asks the member to require a leader (etcd's "hasleader" metadata, as
# etcd's own client does for watches): a member that has lost its leader — the partitioned
# old leader once it steps down, a partitioned follower — answers "no leader" at once (and ends
# such a watch) instead of holding the call until its deadline, so the call moves on.
REQUIRE_LEADER = ("hasleader", "true")
# Answers that say the cluster is electing: the call goes round the members again after
# ELECTION_PAUSE_S while its deadline lasts, as it used to wait on one member for the election.
_ELECTING = ("no leader", "leader changed")
ELECTION_PAUSE_S = 0.1


@dataclass(frozen=True)
class EtcdTarget:
    """Where the etcd cluster is and how to speak to it."""

    endpoints: tuple[str, ...]
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    user: str = ""
    password: str = ""

    @classmethod
    def parse(cls, endpoints: str, *, ca_file: str = "", cert_file: str = "",
              key_file: str = "", user: str = "", password_file: str = "") -> EtcdTarget:
        names = tuple(e.strip().removeprefix("http://").removeprefix("https://")
                      for e in endpoints.replace(";", ",").split(",") if e.strip())
        if not names:
            raise InvalidArgument("no etcd endpoint given (--etcd-endpoints host:port,...)")
        for name in names:
            host, _, port = name.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise InvalidArgument(f"etcd endpoint {name!r} is not host:port")
        if bool(cert_file) != bool(key_file):
            raise InvalidArgument("--etcd-cert-file and --etcd-key-file go together")
        if cert_file and not ca_file:
            raise InvalidArgument("a client certificate for etcd needs --etcd-ca-file too")
        if bool(user) != bool(password_file):
            raise InvalidArgument("--etcd-user and --etcd-password-file go together")
        password = Path(password_file).read_text().strip() if password_file else ""
        return cls(names, ca_file, cert_file, key_file, user, password)

    @property
    def tls(self) -> bool:
        return bool(self.ca_file)

    def describe(self) -> str:
        extras = [x for x in ("mutual TLS" if self.cert_file else "TLS" if self.tls else "",
                              f"user {self.user}" if self.user else "") if x]
        return f"etcd {','.join(self.endpoints)}" + (f" ({', '.join(extras)})" if extras else "")


def _credentials(target: EtcdTarget) -> grpc.ChannelCredentials | None:
    if not target.tls:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=Path(target.ca_file).read_bytes(),
        private_key=Path(target.key_file).read_bytes() if target.key_file else None,
        certificate_chain=Path(target.cert_file).read_bytes() if target.cert_file else None)


class Member:
    """One endpoint: its channel and stubs."""

    def __init__(self, endpoint: str, credentials: grpc.ChannelCredentials | None) -> None:
        self.endpoint = endpoint
        self.channel = (grpc.secure_channel(endpoint, credentials, CHANNEL_OPTIONS)
                        if credentials else grpc.insecure_channel(endpoint, CHANNEL_OPTIONS))
        self.kv = etcd_grpc.KVStub(self.channel)
        self.watch = etcd_grpc.WatchStub(self.channel)
        self.lease = etcd_grpc.LeaseStub(self.channel)
        self.cluster = etcd_grpc.ClusterStub(self.channel)
        self.maintenance = etcd_grpc.MaintenanceStub(self.channel)
        self.auth = etcd_grpc.AuthStub(self.channel)


def translate(exc: grpc.RpcError, where: str) -> TideMQError:
    """etcd's answer as the TideMQ error a caller can act on."""
    detail = exc.details() or exc.code().name
    code = exc.code()
    if "required revision has been compacted" in detail:
        return RevisionCompacted(0, 0)  # the caller knows the revisions and raises its own
    if "required revision is a future revision" in detail:
        return InvalidArgument(f"that revision is in the future ({detail})")
    if "requested lease not found" in detail:
        return NotFound("lease does not exist or has expired", code="LEASE_NOT_FOUND")
    if "database space exceeded" in detail:
        return ServiceUnavailable(
            f"the etcd cluster is out of space ({where}: {detail}): compact and defragment it "
            "(docs/config-center.md) before writes are taken again")
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return ServiceUnavailable(f"etcd refused the config center's credentials ({where}: "
                                  f"{detail}): check --etcd-user and its role")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(f"etcd refused the request: {detail}")
    return ServiceUnavailable(f"etcd ({where}) did not serve the call: {detail}")


class EtcdConnection:
    """Calls on an etcd cluster that move between its members (see the module docstring)."""

    def __init__(self, target: EtcdTarget, *, timeout: float = 3.0) -> None:
        self.target = target
        self.timeout = timeout
        credentials = _credentials(target)
        self.members = [Member(endpoint, credentials) for endpoint in target.endpoints]
        self._preferred = 0
        self._token = ""
        self._token_lock = threading.Lock()
        self._clusters: dict[str, int] = {}   # endpoint -> the cluster id it last answered for
        self._clusters_lock = threading.Lock()
        # the one more than half of the endpoints answer for (0: not known yet); it follows
        # a majority that changes (a cluster restored from a snapshot has a new id)
        self.cluster_id = 0
        self._closed = threading.Event()
        if len(self.members) > 1:
            threading.Thread(target=self._sweep, daemon=True, name="etcd-cluster-id").start()

    def close(self) -> None:
        self._closed.set()
        for member in self.members:
            member.channel.close()

    # -- one cluster ---------------------------------------------------------------------

    def _sweep(self) -> None:
        """Ask every endpoint which cluster it answers for, now and every CLUSTER_SWEEP_S
        (every second until more than half of them agree)."""
        while not self._closed.is_set():
            for member in self.members:
                try:
                    reply = member.maintenance.Status(etcd.StatusRequest(), timeout=1.0)
                except (grpc.RpcError, ValueError):  # ValueError: the channel was closed
                    continue
                self._heard(member, reply.header.cluster_id)
            self._closed.wait(CLUSTER_SWEEP_S if self.cluster_id else 1.0)

    def _heard(self, member: Member, cluster_id: int) -> bool:
        """Record the cluster `member` answered for; False when it is not this one."""
        if not cluster_id:
            return True
        with self._clusters_lock:
            self._clusters[member.endpoint] = cluster_id
            leading, count = Counter(self._clusters.values()).most_common(1)[0]
            if 2 * count > len(self.members):
                self.cluster_id = leading
            return not self.cluster_id or cluster_id == self.cluster_id

    def foreign(self, member: Member) -> bool:
        """Whether `member` last answered for another cluster than this connection's."""
        seen = self._clusters.get(member.endpoint, 0)
        return bool(self.cluster_id and seen and seen != self.cluster_id)

    def other_cluster(self, member: Member) -> str:
        return (f"{member.endpoint} answers for another etcd cluster (cluster id "
                f"{self._clusters.get(member.endpoint, 0):x}, not {self.cluster_id:x}): it was "
                "started with another --initial-cluster-token or on another cluster's data "
                "directory")

    # -- authentication ------------------------------------------------------------------

    def metadata(self, member: Member, deadline: float, *,
                 require_leader: bool = True) -> tuple[tuple[str, str], ...] | None:
        """The call's metadata: the member must have a leader (unless `require_leader` is
        False: what a member reports of itself), and the auth token when etcd has users."""
        leader = (REQUIRE_LEADER,) if require_leader else ()
        if not self.target.user:
            return leader or None
        with self._token_lock:
            if not self._token:
                reply = member.auth.Authenticate(
                    etcd.AuthenticateRequest(name=self.target.user, password=self.target.password),
                    timeout=max(0.05, deadline - time.monotonic()))
                self._token = reply.token
            return (("token", self._token), *leader)

    def _forget_token(self, metadata: tuple | None) -> None:
        token = dict(metadata or ()).get("token")
        with self._token_lock:
            if token and self._token == token:
                self._token = ""

    def token_refused(self, exc: grpc.RpcError | str) -> bool:
        """Whether etcd refused a stream's token (expired after --auth-token-ttl idle, or
        made by a member since restarted), from its error or a watch's cancel reason: it is
        dropped, so the next call authenticates again, and the caller retries."""
        detail = exc if isinstance(exc, str) else (exc.details() or "")
        if not self.target.user or "invalid auth token" not in detail:
            return False
        with self._token_lock:
            self._token = ""
        return True

    # -- calls ---------------------------------------------------------------------------

    def order(self) -> list[Member]:
        """Members in the order to try: the one that answered last first; none that answers
        for another cluster (unless every one does: then the calls say so)."""
        first = self._preferred
        members = [self.members[(first + i) % len(self.members)]
                   for i in range(len(self.members))]
        return [m for m in members if not self.foreign(m)] or members

    def answered(self, member: Member) -> None:
        """`member` served a call made outside `call` (a stream): try it first next time."""
        self._preferred = self.members.index(member)

    def call(self, service: str, method: str, request: Any, *, mutation: bool,
             timeout: float | None = None, require_leader: bool = True) -> Any:
        """`service`.`method`(request) on the first member that serves it."""
        deadline = time.monotonic() + (timeout or self.timeout)
        tried: list[str] = []
        last: grpc.RpcError | None = None
        refused = ""
        electing = True
        while electing:
            electing = waiting = False   # waiting: a member answered that they elect
            members = self.order()
            for member, attempt in self.attempts(members, deadline):
                token = None
                try:
                    token = self.metadata(member, time.monotonic() + attempt,
                                          require_leader=require_leader)
                    reply = getattr(getattr(member, service), method)(
                        request, timeout=attempt, metadata=token)
                except grpc.RpcError as exc:
                    tried.append(member.endpoint)
                    detail = (exc.details() or "").lower()
                    if "invalid auth" in detail:
                        self._forget_token(token)
                    if exc.code() not in _MOVE_ON and "invalid auth" not in detail:
                        raise translate(exc, member.endpoint) from None
                    last = exc
                    waiting = waiting or any(text in detail for text in _ELECTING)
                    if mutation and not any(text in detail for text in _NOT_APPLIED):
                        break  # it may have been applied: the caller decides whether to repeat
                    continue
                header = getattr(reply, "header", None)
                if header is not None and not self._heard(member, header.cluster_id):
                    tried.append(member.endpoint)   # it changed nothing in this cluster
                    refused = self.other_cluster(member)
                    continue
                self._preferred = self.members.index(member)
                return reply
            else:   # every member refused the call: round again while they elect
                if waiting and deadline - time.monotonic() > 2 * ELECTION_PAUSE_S:
                    time.sleep(ELECTION_PAUSE_S)
                    electing = True
        self._preferred = (self.members.index(members[0]) + 1) % len(self.members)
        reason = ((last.details() or last.code().name) if last is not None
                  else refused or "deadline spent")
        raise ServiceUnavailable(
            f"no etcd member served the call (tried {', '.join(dict.fromkeys(tried)) or 'none'} of "
            f"{', '.join(self.target.endpoints)}): {reason}; the cluster may have lost its "
            "quorum or be electing a leader")

    @staticmethod
    def attempts(members: list[Member], deadline: float) -> Iterator[tuple[Member, float]]:
        """Each member in turn with the time it may take of what is left before `deadline`:
        all of it for the last, else its share (at least 1 s when there is that much). A
        stalled member (SIGSTOP, a hung host) accepts a call and answers nothing: the members
        after it keep some of the deadline. Ends once the deadline is spent."""
        for index, member in enumerate(members):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            others = len(members) - index - 1
            yield member, left if not others else max(min(left, 1.0), left / (others + 1))

    def stream(self, member: Member, service: str, method: str,
               requests: Iterator[Any], timeout: float | None = None) -> Any:
        """A streaming call on one member (watches, keep-alives, snapshots)."""
        token = self.metadata(member, time.monotonic() + self.timeout)
        return getattr(getattr(member, service), method)(requests, metadata=token,
                                                         timeout=timeout)

    def each_member(self, call: Callable[[Member], Any]) -> list[tuple[Member, Any]]:
        """`call` on every member on its own (the cluster as each member sees it)."""
        results = []
        for member in self.members:
            try:
                results.append((member, call(member)))
            except grpc.RpcError as exc:
                results.append((member, exc))
        return results
