"""gRPC adapter: ConfigService requests → ConfigStore calls → replies. No logic of its own
beyond translating messages and turning a Redis stream read loop into a Watch stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from importlib import metadata

from tidemq.common.errors import ResourceExhausted
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
from tidemq.configcenter.store import ConfigStore
from tidemq.configcenter.tail import EventTail
from tidemq.configcenter.topology import (
    RedisNode,
    SentinelView,
    StoreTopology,
    TopologyReader,
)
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


def node_to_pb(node: RedisNode) -> pb.RedisNode:
    return pb.RedisNode(address=node.address, role=node.role, reachable=node.reachable,
                        error=node.error, replication_offset=node.replication_offset,
                        lag_bytes=node.lag_bytes, link_status=node.link_status,
                        master_address=node.master_address,
                        connected_replicas=node.connected_replicas)


def sentinel_to_pb(view: SentinelView) -> pb.SentinelView:
    return pb.SentinelView(address=view.address, reachable=view.reachable, error=view.error,
                           master_address=view.master_address, master_down=view.master_down,
                           master_flags=view.master_flags,
                           other_sentinels=view.other_sentinels, quorum=view.quorum)


def topology_to_pb(topology: StoreTopology | None, advertised_addr: str,
                   version: str) -> pb.DescribeStoreResponse:
    reply = pb.DescribeStoreResponse(advertised_addr=advertised_addr, version=version)
    if topology is not None:
        reply.target, reply.replicated = topology.target, topology.replicated
        reply.master_name = topology.master_name
        reply.nodes.extend(node_to_pb(n) for n in topology.nodes)
        reply.sentinels.extend(sentinel_to_pb(s) for s in topology.sentinels)
    return reply


def _version() -> str:
    try:
        return metadata.version("tidemq-config-center")
    except metadata.PackageNotFoundError:
        return ""


def _expected(request, field: str = "expected_mod_revision") -> int | None:
    return getattr(request, field) if request.HasField(field) else None


class ConfigServicer(config_pb2_grpc.ConfigServiceServicer):
    def __init__(self, store: ConfigStore, tail: EventTail | None = None, *,
                 max_watches: int = 0, topology: TopologyReader | None = None,
                 advertised_addr: Callable[[], str] = lambda: "") -> None:
        self.store = store
        self.tail = tail
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

    def _read_events(self, after: int) -> list[Event]:
        if self.tail is None:
            return self.store.read_events(after)
        return self.tail.read(after, self.store.watch_block_ms / 1000)

    def Get(self, request, context):
        kv, revision = self.store.get(request.key)
        return pb.GetResponse(found=kv is not None, kv=kv_to_pb(kv), revision=revision)

    def Range(self, request, context):
        result = self.store.range(request.prefix, revision=request.revision, limit=request.limit)
        return pb.RangeResponse(kvs=[kv_to_pb(kv) for kv in result.kvs], revision=result.revision)

    def Put(self, request, context):
        check_setting_write(request.key, request.value)
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
        compact = self.store.compact_revision()
        after = start - 1 if start else self.store.revision()
        if start and start < compact:
            yield pb.WatchResponse(compacted=True, compact_revision=compact, revision=after)
            return
        # The header tells the watcher where it stands, so it can resume even before any event.
        yield pb.WatchResponse(revision=after, compact_revision=compact)
        last_sent = time.monotonic()
        while context.is_active():
            try:
                events = self._read_events(after)
            except RevisionCompacted as exc:
                yield pb.WatchResponse(compacted=True, compact_revision=exc.compact_revision,
                                       revision=after)
                return
            if not events:
                continue
            after = events[-1].revision
            matching = [event_to_pb(e) for e in events if e.kv.key.startswith(prefix)]
            now = time.monotonic()
            if matching or now - last_sent >= PROGRESS_INTERVAL_S:
                last_sent = now
                yield pb.WatchResponse(events=matching, revision=after)

    def LeaseGrant(self, request, context):
        lease = self.store.lease_grant(request.ttl_seconds)
        return pb.LeaseGrantResponse(lease=lease, ttl_seconds=request.ttl_seconds)

    def LeaseKeepAlive(self, request, context):
        ttl = self.store.lease_keepalive(request.lease)
        return pb.LeaseKeepAliveResponse(lease=request.lease, ttl_seconds=ttl)

    def LeaseRevoke(self, request, context):
        self.store.lease_revoke(request.lease)
        return pb.LeaseRevokeResponse()

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
        topology = self.topology.describe() if self.topology is not None else None
        return topology_to_pb(topology, self.advertised_addr(), _version())
