"""gRPC adapter: ConfigService requests → ConfigStore calls → replies. No logic of its own
beyond translating messages and turning an etcd watch into a Watch stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from importlib import metadata

from tidemq.common.errors import ResourceExhausted
from tidemq.common.quotas import check_quota_write
from tidemq.common.setting_rules import check_setting_write
from tidemq.configcenter.model import (
    Event,
    EventType,
    KeyValue,
    RevisionCompacted,
    validate_prefix,
    validate_revision,
)
from tidemq.configcenter.scopes import resolve, scope_prefixes
from tidemq.configcenter.store import ConfigStore, TxnCompare
from tidemq.configcenter.topology import ClusterState, MemberState, TopologyReader
from tidemq.v1 import config_pb2 as pb
from tidemq.v1 import config_pb2_grpc

PROGRESS_INTERVAL_S = 1.0  # how often a quiet watch reports the revision it has covered


def kv_to_pb(kv: KeyValue | None) -> pb.KeyValue | None:
    if kv is None:
        return None
    return pb.KeyValue(key=kv.key, value=kv.value, create_revision=kv.create_revision,
                       mod_revision=kv.mod_revision, version=kv.version, lease=kv.lease)


def event_to_pb(event: Event) -> pb.Event:
    kind = pb.Event.PUT if event.type is EventType.PUT else pb.Event.DELETE
    return pb.Event(type=kind, kv=kv_to_pb(event.kv))


def member_to_pb(member: MemberState) -> pb.EtcdMember:
    reply = pb.EtcdMember(name=member.name, id=member.id, endpoint=member.endpoint,
                          reachable=member.reachable, error=member.error, leader=member.leader,
                          raft_term=member.raft_term, raft_index=member.raft_index,
                          raft_applied_index=member.raft_applied_index,
                          db_size_bytes=member.db_size_bytes, version=member.version,
                          learner=member.learner, alarms=member.alarms)
    if member.lag_entries is not None:
        reply.lag_entries = member.lag_entries
    return reply


def cluster_to_pb(cluster: ClusterState | None, advertised_addr: str,
                  version: str) -> pb.DescribeStoreResponse:
    reply = pb.DescribeStoreResponse(advertised_addr=advertised_addr, version=version)
    if cluster is not None:
        reply.target, reply.cluster_id = cluster.target, cluster.cluster_id
        reply.revision, reply.leader = cluster.revision, cluster.leader
        reply.members.extend(member_to_pb(m) for m in cluster.members)
    return reply


def _version() -> str:
    try:
        return metadata.version("tidemq-config-center")
    except metadata.PackageNotFoundError:
        return ""


def _expected(request, field: str = "expected_mod_revision") -> int | None:
    return getattr(request, field) if request.HasField(field) else None


class ConfigServicer(config_pb2_grpc.ConfigServiceServicer):
    def __init__(self, store: ConfigStore, *, max_watches: int = 0,
                 topology: TopologyReader | None = None,
                 advertised_addr: Callable[[], str] = lambda: "") -> None:
        self.store = store
        self.topology = topology
        self.advertised_addr = advertised_addr  # read per call: the port is known once bound
        self.max_watches = max_watches  # 0 = no limit
        self._watches = 0
        self._watches_lock = threading.Lock()

    def _watch_slot(self, context) -> Callable[[], None]:
        """Take one of max_watches slots or refuse: an open watch holds a server thread for its
        lifetime, so unbounded watches would leave no thread for any other call."""
        with self._watches_lock:
            if self.max_watches and self._watches >= self.max_watches:
                raise ResourceExhausted(
                    f"this config-center instance already serves {self._watches} watches, its "
                    f"limit (--max-watches); retry later or watch through another instance")
            self._watches += 1
        released = threading.Event()

        def release() -> None:
            with self._watches_lock:
                if not released.is_set():
                    released.set()
                    self._watches -= 1

        context.add_callback(release)  # runs when the stream ends, however it ends
        return release

    def Get(self, request, context):
        kv, revision = self.store.get(request.key)
        return pb.GetResponse(found=kv is not None, kv=kv_to_pb(kv), revision=revision)

    def Range(self, request, context):
        result = self.store.range(request.prefix, revision=request.revision, limit=request.limit)
        return pb.RangeResponse(kvs=[kv_to_pb(kv) for kv in result.kvs], revision=result.revision)

    def Put(self, request, context):
        check_setting_write(request.key, request.value)
        check_quota_write(request.key, request.value)
        result = self.store.put(request.key, request.value, lease=request.lease,
                                expected_mod_revision=_expected(request))
        return pb.PutResponse(succeeded=result.succeeded, revision=result.revision,
                              current_mod_revision=result.current_mod_revision,
                              prev_kv=kv_to_pb(result.prev_kv))

    def Delete(self, request, context):
        result = self.store.delete(request.key, expected_mod_revision=_expected(request))
        return pb.DeleteResponse(succeeded=result.succeeded, deleted=result.deleted,
                                 revision=result.revision,
                                 current_mod_revision=result.current_mod_revision)

    def Watch(self, request, context) -> Iterator[pb.WatchResponse]:
        prefix = validate_prefix(request.prefix)
        start = validate_revision(request.start_revision, "start revision")
        release = self._watch_slot(context)
        try:
            yield from self._watch(prefix, start, context)
        finally:
            release()

    def _watch(self, prefix: str, start: int, context) -> Iterator[pb.WatchResponse]:
        after = start - 1 if start else self.store.revision()
        # The header tells the watcher where it stands, so it can resume even before any event.
        yield pb.WatchResponse(revision=after)
        last_sent = time.monotonic()
        try:
            for batch in self.store.watch(prefix, after + 1, active=context.is_active):
                now = time.monotonic()
                if batch.events or now - last_sent >= PROGRESS_INTERVAL_S:
                    last_sent = now
                    yield pb.WatchResponse(events=[event_to_pb(e) for e in batch.events],
                                           revision=batch.revision)
        except RevisionCompacted as exc:
            yield pb.WatchResponse(compacted=True, compact_revision=exc.compact_revision,
                                   revision=after)

    def LeaseGrant(self, request, context):
        lease, ttl = self.store.lease_grant(request.ttl_seconds)
        return pb.LeaseGrantResponse(lease=lease, ttl_seconds=ttl)

    def LeaseKeepAlive(self, request, context):
        ttl = self.store.lease_keepalive(request.lease)
        return pb.LeaseKeepAliveResponse(lease=request.lease, ttl_seconds=ttl)

    def LeaseRevoke(self, request, context):
        self.store.lease_revoke(request.lease)
        return pb.LeaseRevokeResponse()

    def Txn(self, request, context):
        for put in request.puts:
            check_setting_write(put.key, put.value)
        targets = {pb.Compare.MOD: "mod", pb.Compare.CREATE: "create"}
        result = self.store.txn(
            [TxnCompare(c.key, targets.get(c.target, str(c.target)), c.revision)
             for c in request.compare],
            [(p.key, p.value, p.lease) for p in request.puts], list(request.deletes))
        return pb.TxnResponse(succeeded=result.succeeded, revision=result.revision,
                              compared=[kv_to_pb(kv) for kv in result.compared])

    def History(self, request, context):
        events = self.store.history(request.key, request.limit)
        return pb.HistoryResponse(events=[event_to_pb(e) for e in events])

    def Rollback(self, request, context):
        result = self.store.rollback(request.key, request.to_revision)
        return pb.PutResponse(succeeded=result.succeeded, revision=result.revision,
                              current_mod_revision=result.current_mod_revision,
                              prev_kv=kv_to_pb(result.prev_kv))

    def EffectiveConfig(self, request, context):
        layers = scope_prefixes(request.cluster, request.broker_group, request.broker)
        results = self.store.range_many([prefix for _, prefix in layers])
        settings = resolve([(scope, prefix, result.kvs)
                            for (scope, prefix), result in zip(layers, results, strict=True)])
        return pb.EffectiveConfigResponse(
            settings=[pb.ConfigSetting(name=s.name, value=s.value, scope=s.scope,
                                       source_key=s.source_key) for s in settings],
            revision=results[0].revision)

    def DescribeStore(self, request, context):
        cluster = self.topology.describe() if self.topology is not None else None
        return cluster_to_pb(cluster, self.advertised_addr(), _version())
