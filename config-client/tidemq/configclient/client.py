"""ConfigClient: the Python face of the config center (versioned KV, watches, leases).

Other services read topic definitions and dynamic settings through it and watch them:

>>> with ConfigClient("127.0.0.1:7070") as config:
...     written = config.put("/tidemq/topics/orders", b'{"name": "orders", "queues": 8}')
...     config.get("/tidemq/topics/orders").json()["queues"]
8
>>> with config.watch("/tidemq/topics/", start_revision=written.revision) as watch:
...     for event in watch:          # resumes from the last seen revision after any disconnect
...         apply(event)

Several addresses may be given ("a:7070,b:7070"): calls that are safe to repeat move to the
next instance when one is unreachable; watches always resume on the next one.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tidemq.common import errors
from tidemq.common.kv import DeleteResult, Event, KeyValue, PutResult, RangeResult
from tidemq.common.logs import get_logger
from tidemq.common.rpc import BreakerSettings, RpcClient
from tidemq.configclient import controlplane
from tidemq.configclient.controlplane import ControlPlane, InstanceStatus, StoreDescription
from tidemq.configclient.watch import Watch, WatchCompacted, event_from_pb, kv_from_pb
from tidemq.v1 import config_pb2 as pb
from tidemq.v1.config_pb2_grpc import ConfigServiceStub

__all__ = ["ConfigClient", "ControlPlane", "DeleteResult", "EffectiveConfig", "Event",
           "InstanceStatus", "KeyValue", "Lease", "PutResult", "RangeResult",
           "StoreDescription", "TxnResult", "Watch", "WatchCompacted", "ConfigSetting"]

log = get_logger(__name__)
DEFAULT_ADDR = "127.0.0.1:7070"


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    compared: dict[str, KeyValue]  # a compare failed: the compared keys that exist, as they are


@dataclass(frozen=True)
class ConfigSetting:
    name: str
    value: str
    scope: str  # "cluster", "broker_group" or "broker"
    source_key: str


@dataclass(frozen=True)
class EffectiveConfig:
    settings: dict[str, ConfigSetting]
    revision: int

    def get(self, name: str, default: str | None = None) -> str | None:
        setting = self.settings.get(name)
        return setting.value if setting else default


def _put_result(reply: pb.PutResponse) -> PutResult:
    prev = kv_from_pb(reply.prev_kv) if reply.HasField("prev_kv") else None
    return PutResult(reply.succeeded, reply.revision, reply.current_mod_revision, prev)


def _never_sent(exc: errors.TideMQError) -> bool:
    """True when the call failed to connect at all, so repeating it elsewhere cannot apply it
    twice (gRPC reports "failed to connect"; a store outage carries the server's own code)."""
    return "failed to connect" in exc.message.lower()


def _as_bytes(value: bytes | str | dict | list) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


class ConfigClient:
    """A client for one config center (one or several instances of it)."""

    def __init__(self, addrs: str | list[str] = DEFAULT_ADDR, *, timeout: float = 3.0) -> None:
        if isinstance(addrs, str):
            addrs = [a.strip() for a in addrs.replace(";", ",").split(",") if a.strip()]
        if not addrs:
            raise errors.InvalidArgument("config center address list is empty")
        self.addrs = list(addrs)
        self.timeout = timeout
        # Short breaker reset: a Redis restart behind the config center must not lock callers
        # out for long.
        breaker = BreakerSettings(fail_max=5, reset_timeout_s=1.0)
        # No retries inside RpcClient: a store outage must surface as UNAVAILABLE within the
        # deadline, not be retried into DEADLINE_EXCEEDED; failover is `_call`'s job.
        self._rpcs = [RpcClient(a, ConfigServiceStub, timeout=timeout, breaker=breaker,
                                retries=0) for a in self.addrs]
        self._preferred = 0
        self._leases: list[Lease] = []

    def __enter__(self) -> ConfigClient:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        for lease in list(self._leases):
            lease.stop_keepalive()

    def _call(self, method: str, request: Any, *, idempotent: bool,
              timeout: float | None = None) -> Any:
        first = self._preferred
        deadline = time.monotonic() + (timeout or self.timeout)
        last_error: errors.TideMQError | None = None
        tried: list[str] = []
        for step in range(len(self._rpcs)):
            index = (first + step) % len(self._rpcs)
            remaining = deadline - time.monotonic()
            if remaining <= 0.01:
                break
            tried.append(self.addrs[index])
            try:
                reply = self._rpcs[index].call(method, request, timeout=remaining)
            except errors.BreakerOpen as exc:
                last_error = exc  # nothing was sent: always safe to try the next instance
            except errors.ServiceUnavailable as exc:
                last_error = exc
                if not idempotent and not _never_sent(exc):
                    raise
            else:
                self._preferred = index
                return reply
        if last_error is None:
            raise errors.DeadlineExceeded(f"{method}: no time left to call the config center")
        if len(tried) > 1:
            raise errors.ServiceUnavailable(
                f"no config center answered {method} (tried {', '.join(tried)}); last error: "
                f"{last_error.message}")
        raise last_error

    def stub_for(self, attempt: int) -> tuple[str, ConfigServiceStub]:
        """The address and raw stub to use for a long-lived stream on its `attempt`-th try."""
        rpc = self._rpcs[(self._preferred + attempt) % len(self._rpcs)]
        return rpc.addr, rpc._stub

    # -- key-value -----------------------------------------------------------------------

    def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        """The key now, or as of a retained `revision` (None = absent then)."""
        if revision:
            # The exact key sorts first among the keys it prefixes: a one-key range at R.
            kvs = self.range(key, revision=revision, limit=1).kvs
            return kvs[0] if kvs and kvs[0].key == key else None
        reply = self._call("Get", pb.GetRequest(key=key), idempotent=True)
        return kv_from_pb(reply.kv) if reply.found else None

    def range(self, prefix: str, *, revision: int = 0, limit: int = 0) -> RangeResult:
        reply = self._call("Range", pb.RangeRequest(prefix=prefix, revision=revision,
                                                    limit=limit), idempotent=True)
        return RangeResult([kv_from_pb(kv) for kv in reply.kvs], reply.revision)

    def put(self, key: str, value: bytes | str | dict | list, *,
            expected_revision: int | None = None, lease: int = 0) -> PutResult:
        """Write; with `expected_revision` only if the key's mod revision equals it (0 = the
        key must not exist). A failed compare returns succeeded=False, never raises."""
        request = pb.PutRequest(key=key, value=_as_bytes(value), lease=lease)
        if expected_revision is not None:
            request.expected_mod_revision = expected_revision
        reply = self._call("Put", request, idempotent=expected_revision is not None)
        return _put_result(reply)

    def txn(self, compares: list[tuple[str, str, int]],
            puts: dict[str, bytes | str | dict | list], deletes: list[str] = ()) -> TxnResult:
        """Write every put and delete at one revision, only if every compare (key, "mod" or
        "create", revision; 0 = absent) holds; else nothing, and the compared keys as they
        are. Safe to repeat: once applied, its compares no longer hold."""
        targets = {"mod": pb.Compare.MOD, "create": pb.Compare.CREATE}
        request = pb.TxnRequest(
            compare=[pb.Compare(key=key, target=targets[target], revision=revision)
                     for key, target, revision in compares],
            puts=[pb.PutRequest(key=key, value=_as_bytes(value)) for key, value in puts.items()],
            deletes=list(deletes))
        reply = self._call("Txn", request, idempotent=True)
        return TxnResult(reply.succeeded, reply.revision,
                         {kv.key: kv_from_pb(kv) for kv in reply.compared})

    def delete(self, key: str, *, expected_revision: int | None = None) -> DeleteResult:
        request = pb.DeleteRequest(key=key)
        if expected_revision is not None:
            request.expected_mod_revision = expected_revision
        reply = self._call("Delete", request, idempotent=True)
        return DeleteResult(reply.succeeded, reply.deleted, reply.revision,
                            reply.current_mod_revision)

    def update(self, key: str, change: Callable[[KeyValue | None], bytes | str | dict | list],
               *, attempts: int = 50) -> PutResult:
        """Read-modify-write with compare-and-set, retried on conflict."""
        for _ in range(attempts):
            current = self.get(key)
            result = self.put(key, change(current),
                              expected_revision=current.mod_revision if current else 0)
            if result.succeeded:
                return result
        raise errors.Conflict(f"key {key!r} kept changing; gave up after {attempts} attempts")

    def history(self, key: str, limit: int = 0) -> list[Event]:
        reply = self._call("History", pb.HistoryRequest(key=key, limit=limit), idempotent=True)
        return [event_from_pb(event) for event in reply.events]

    def rollback(self, key: str, to_revision: int) -> PutResult:
        reply = self._call("Rollback", pb.RollbackRequest(key=key, to_revision=to_revision),
                           idempotent=False)
        return _put_result(reply)

    def effective_config(self, *, cluster: str = "", broker_group: str = "",
                         broker: str = "") -> EffectiveConfig:
        """Each setting's most specific value (cluster < broker group < broker) and source."""
        reply = self._call("EffectiveConfig", pb.EffectiveConfigRequest(
            cluster=cluster, broker_group=broker_group, broker=broker), idempotent=True)
        settings = {s.name: ConfigSetting(s.name, s.value, s.scope, s.source_key)
                    for s in reply.settings}
        return EffectiveConfig(settings, reply.revision)

    # -- the store behind the service (controlplane.py) ------------------------------------

    def describe_store(self) -> StoreDescription:
        """The etcd cluster behind the config center, as one instance (any) sees it now."""
        reply = self._call("DescribeStore", pb.DescribeStoreRequest(), idempotent=True)
        return controlplane.store_from_pb(reply)

    def describe_each(self) -> list[InstanceStatus]:
        """Every configured address asked on its own (all at once), in the configured order:
        one that does not answer is reported unreachable, not skipped."""
        def ask(rpc: RpcClient) -> InstanceStatus:
            return controlplane.instance_status(rpc.addr, lambda: rpc.call(
                "DescribeStore", pb.DescribeStoreRequest(), timeout=self.timeout))

        with ThreadPoolExecutor(len(self._rpcs), thread_name_prefix="describe") as pool:
            return list(pool.map(ask, self._rpcs))

    def control_plane(self) -> ControlPlane:
        """Each instance reachable or not, and the store as the first that answered sees it;
        SERVICE_UNAVAILABLE naming every address tried when none answered."""
        return controlplane.control_plane(self.describe_each())

    def watch(self, prefix: str, *, start_revision: int = 0) -> Watch:
        """Every change under `prefix` with revision >= `start_revision` (0 = from now on)."""
        return Watch(self.stub_for, prefix, start_revision)

    # -- leases --------------------------------------------------------------------------

    def lease_grant(self, ttl_seconds: int) -> int:
        return self._grant(ttl_seconds).lease

    def _grant(self, ttl_seconds: int) -> pb.LeaseGrantResponse:
        """The lease and the TTL the store granted (etcd raises one below its floor)."""
        return self._call("LeaseGrant", pb.LeaseGrantRequest(ttl_seconds=ttl_seconds),
                          idempotent=False)

    def lease_keepalive(self, lease: int) -> int:
        """Extend the lease; returns its TTL, 0 if it had already expired."""
        reply = self._call("LeaseKeepAlive", pb.LeaseKeepAliveRequest(lease=lease),
                           idempotent=True)
        return reply.ttl_seconds

    def lease_revoke(self, lease: int) -> None:
        self._call("LeaseRevoke", pb.LeaseRevokeRequest(lease=lease), idempotent=True)

    def lease(self, ttl_seconds: int, *, keepalive: bool = True,
              on_expired: Callable[[int], None] | None = None) -> Lease:
        """Grant a lease and (by default) keep it alive from a background thread."""
        granted = self._grant(ttl_seconds)
        lease = Lease(self, granted.lease, granted.ttl_seconds or ttl_seconds, on_expired)
        if keepalive:
            lease.start_keepalive()
        return lease


@dataclass
class Lease:
    """A granted lease; a context manager that revokes it on exit.

    The keep-alive thread renews every TTL/3 and keeps retrying through config-center
    restarts; if the store says the lease expired, `expired` is set and `on_expired` runs.
    """

    client: ConfigClient
    id: int
    ttl_seconds: int
    on_expired: Callable[[int], None] | None = None
    renewals: int = 0  # successful keep-alives so far
    expired: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_: Any) -> None:
        self.revoke()

    def start_keepalive(self) -> None:
        self._thread = threading.Thread(target=self._keepalive, daemon=True,
                                        name=f"lease-{self.id}")
        self.client._leases.append(self)
        self._thread.start()

    def stop_keepalive(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.client.timeout + 1)
        if self in self.client._leases:
            self.client._leases.remove(self)

    def revoke(self) -> None:
        self.stop_keepalive()
        if not self.expired.is_set():
            with contextlib.suppress(errors.NotFound):  # already expired
                self.client.lease_revoke(self.id)
            self.expired.set()

    def _keepalive(self) -> None:
        interval = max(self.ttl_seconds / 3, 0.1)
        while not self._stop.wait(interval):
            try:
                ttl = self.client.lease_keepalive(self.id)
            except errors.TideMQError as exc:
                log.warning("lease keep-alive failed; retrying", lease=self.id, error=str(exc))
                interval = max(self.ttl_seconds / 10, 0.1)
                continue
            interval = max(self.ttl_seconds / 3, 0.1)
            if ttl:
                self.renewals += 1
            else:
                log.warning("lease expired", lease=self.id)
                self.expired.set()
                if self.on_expired is not None:
                    self.on_expired(self.id)
                return
