"""ConfigStore: the config center's versioned key-value store, kept on an etcd cluster.

The config center's API was modelled on etcd's, so each call maps onto one etcd call:
revisions are etcd's (global, monotonic, never reused), a compare-and-set is a Txn on the
key's mod revision, a range over several prefixes is one Txn (one snapshot), watches are etcd
watches from a revision, leases are etcd leases, history and rollback read the key at past
revisions. etcd's Raft log decides what is acknowledged: a write is answered once a quorum of
members holds it, and reads are linearizable. The config center keeps no state of its own, so
any number of instances serve the same cluster.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from tidemq.common.errors import InvalidArgument, NotFound, ServiceUnavailable
from tidemq.configcenter.encryption import ValueCipher
from tidemq.configcenter.etcd import EtcdConnection, EtcdTarget, Member, translate
from tidemq.configcenter.model import (
    DeleteResult,
    Event,
    EventType,
    KeyValue,
    PutResult,
    RangeResult,
    RevisionCompacted,
    validate_key,
    validate_prefix,
    validate_revision,
    validate_ttl,
    validate_value,
)
from tidemq.etcd import rpc_pb2 as etcd

_COMPACTED = "required revision has been compacted"


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key above every key that starts with `prefix` (etcd's range_end)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


@dataclass(frozen=True)
class TxnCompare:
    """The key's `target` ("mod" or "create") revision must equal `revision` (0 = absent)."""

    key: str
    target: str
    revision: int


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    compared: list[KeyValue]  # a compare failed: the compared keys that exist, as they are


@dataclass(frozen=True)
class WatchBatch:
    """What a watch learned: events (possibly none) and the revision it now covers."""

    events: list[Event]
    revision: int


class ConfigStore:
    """Versioned KV with CAS, prefix ranges, watches, leases and history, on etcd.

    >>> store = ConfigStore(EtcdTarget.parse("127.0.0.1:2379"))     # doctest: +SKIP
    >>> store.put("/tidemq/topics/orders", b'{"queues": 8}').succeeded     # doctest: +SKIP
    True
    """

    def __init__(self, target: EtcdTarget, *, namespace: str = "", timeout: float = 2.0,
                 progress_interval_s: float = 1.0, cipher: ValueCipher | None = None) -> None:
        self.target = target
        self.namespace = namespace.encode()
        self.progress_interval_s = progress_interval_s
        self.etcd = EtcdConnection(target, timeout=timeout)
        # secrets at rest (encryption.py): sealed on every write, opened on every read
        self.cipher = cipher or ValueCipher()

    def close(self) -> None:
        self.etcd.close()

    # -- keys ----------------------------------------------------------------------------

    def _key(self, key: str) -> bytes:
        return self.namespace + key.encode("utf-8", "surrogatepass")

    def _kv(self, kv: etcd.KeyValue) -> KeyValue:
        """etcd's record as the config center's, its value decrypted if it is a secret."""
        key = kv.key[len(self.namespace):].decode("utf-8", "surrogatepass")
        value = self.cipher.decrypt(key, kv.value) if kv.value else kv.value
        return KeyValue(key, value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)

    def _event(self, event: etcd.Event) -> Event:
        kind = EventType.DELETE if event.type == etcd.Event.DELETE else EventType.PUT
        return Event(kind, self._kv(event.kv))

    def _range_request(self, prefix: str, *, revision: int = 0, limit: int = 0,
                       count_only: bool = False) -> etcd.RangeRequest:
        start = self._key(prefix) or b"\0"  # etcd: key and range_end both "\0" = every key
        return etcd.RangeRequest(key=start, range_end=prefix_end(self._key(prefix)),
                                 revision=revision, limit=limit, count_only=count_only)

    def _kv_call(self, method: str, request, *, mutation: bool, at: int = 0):
        try:
            return self.etcd.call("kv", method, request, mutation=mutation)
        except RevisionCompacted:
            raise RevisionCompacted(at, self.compact_revision()) from None
        except InvalidArgument as exc:
            if at and "future" in exc.message:
                raise InvalidArgument(f"revision {at} is in the future; the store is at "
                                      f"{self.revision()}") from None
            raise

    # -- reads (linearizable: etcd's default) -------------------------------------------

    def revision(self) -> int:
        reply = self._kv_call("Range", etcd.RangeRequest(key=b"\0", count_only=True),
                              mutation=False)
        return reply.header.revision

    def compact_revision(self) -> int:
        """The oldest revision still readable: etcd names it to a watch that starts below it
        (a watch from revision 1 that etcd accepts means nothing was compacted). Every
        revision above 1 holds an event, so the watch answers at once either way."""
        if self.revision() <= 1:
            return 1
        member = self.etcd.order()[0]
        requests: queue.Queue = queue.Queue()
        requests.put(etcd.WatchRequest(create_request=etcd.WatchCreateRequest(
            key=b"\0", range_end=b"\0", start_revision=1)))
        try:
            stream = self.etcd.stream(member, "watch", "Watch", iter(requests.get, None),
                                      timeout=self.etcd.timeout)
            for reply in stream:
                if reply.canceled:
                    return reply.compact_revision or 1
                if reply.events:  # events from revision 1 on: nothing compacted
                    return 1
        except grpc.RpcError as exc:
            raise translate(exc, member.endpoint) from None
        finally:
            requests.put(None)
        return 1

    def get(self, key: str) -> tuple[KeyValue | None, int]:
        """The key's current record (None if absent) and the store revision of the read."""
        validate_key(key)
        reply = self._kv_call("Range", etcd.RangeRequest(key=self._key(key)), mutation=False)
        return (self._kv(reply.kvs[0]) if reply.kvs else None), reply.header.revision

    def range(self, prefix: str, *, revision: int = 0, limit: int = 0) -> RangeResult:
        """Keys starting with `prefix` in key order, now or as of a retained `revision`."""
        validate_prefix(prefix)
        validate_revision(revision)
        if limit < 0:
            raise InvalidArgument(f"limit must be >= 0, got {limit}")
        reply = self._kv_call("Range", self._range_request(prefix, revision=revision,
                                                           limit=limit),
                              mutation=False, at=revision)
        return RangeResult([self._kv(kv) for kv in reply.kvs], revision or reply.header.revision)

    def range_many(self, prefixes: list[str], *, limit: int = 0) -> list[RangeResult]:
        """Several prefix ranges read atomically: one Txn, one snapshot, one revision."""
        for prefix in prefixes:
            validate_prefix(prefix)
        reply = self._kv_call("Txn", etcd.TxnRequest(success=[
            etcd.RequestOp(request_range=self._range_request(prefix, limit=limit))
            for prefix in prefixes]), mutation=False)
        revision = reply.header.revision
        return [RangeResult([self._kv(kv) for kv in op.response_range.kvs], revision)
                for op in reply.responses]

    def history(self, key: str, limit: int = 0) -> list[Event]:
        """The key's retained changes, oldest first: a watch of the key from the oldest
        revision etcd keeps up to now."""
        validate_key(key)
        now = self.revision()
        events: list[Event] = []
        start = self.compact_revision()
        for batch in self.watch(key, start, exact_key=True, until=now):
            events.extend(batch.events)
        return events[-limit:] if limit > 0 else events

    # -- writes --------------------------------------------------------------------------

    def put(self, key: str, value: bytes, *, expected_mod_revision: int | None = None,
            lease: int = 0) -> PutResult:
        """Write `value`; with `expected_mod_revision` only if the key is at that revision
        (0 = the key must not exist). A failed compare returns succeeded=False."""
        validate_key(key)
        validate_value(value)
        validate_revision(lease, "lease")
        raw = self._key(key)
        put = etcd.PutRequest(key=raw, value=self.cipher.encrypt(key, value), lease=lease,
                              prev_kv=True)
        if expected_mod_revision is None:
            reply = self._kv_call("Put", put, mutation=True)
            prev = self._kv(reply.prev_kv) if reply.HasField("prev_kv") else None
            return PutResult(True, reply.header.revision, prev.mod_revision if prev else 0, prev)
        validate_revision(expected_mod_revision, "expected revision")
        reply = self._kv_call("Txn", etcd.TxnRequest(
            compare=[_compare_mod(raw, expected_mod_revision)],
            success=[etcd.RequestOp(request_put=put)],
            failure=[etcd.RequestOp(request_range=etcd.RangeRequest(key=raw))]), mutation=True)
        if not reply.succeeded:
            kvs = reply.responses[0].response_range.kvs
            return PutResult(False, reply.header.revision, kvs[0].mod_revision if kvs else 0,
                             None)
        put_reply = reply.responses[0].response_put
        prev = self._kv(put_reply.prev_kv) if put_reply.HasField("prev_kv") else None
        return PutResult(True, reply.header.revision, prev.mod_revision if prev else 0, prev)

    def delete(self, key: str, *, expected_mod_revision: int | None = None) -> DeleteResult:
        validate_key(key)
        raw = self._key(key)
        delete = etcd.DeleteRangeRequest(key=raw, prev_kv=True)
        if expected_mod_revision is None:
            reply = self._kv_call("DeleteRange", delete, mutation=True)
            return DeleteResult(True, reply.deleted > 0, reply.header.revision,
                                reply.prev_kvs[0].mod_revision if reply.prev_kvs else 0)
        validate_revision(expected_mod_revision, "expected revision")
        reply = self._kv_call("Txn", etcd.TxnRequest(
            compare=[_compare_mod(raw, expected_mod_revision)],
            success=[etcd.RequestOp(request_delete_range=delete)],
            failure=[etcd.RequestOp(request_range=etcd.RangeRequest(key=raw))]), mutation=True)
        if not reply.succeeded:
            kvs = reply.responses[0].response_range.kvs
            return DeleteResult(False, False, reply.header.revision,
                                kvs[0].mod_revision if kvs else 0)
        deleted = reply.responses[0].response_delete_range
        return DeleteResult(True, deleted.deleted > 0, reply.header.revision,
                            deleted.prev_kvs[0].mod_revision if deleted.prev_kvs else 0)

    def txn(self, compares: list[TxnCompare], puts: list[tuple[str, bytes, int]],
            deletes: list[str]) -> TxnResult:
        """Apply every put (key, value, lease) and delete at one revision, only if every
        compare holds; otherwise write nothing and answer the compared keys as they are."""
        if not compares:
            raise InvalidArgument("a transaction needs at least one compare (else use put)")
        if not puts and not deletes:
            raise InvalidArgument("a transaction needs at least one put or delete")
        written = [key for key, _, _ in puts] + list(deletes)
        if len(set(written)) != len(written):
            raise InvalidArgument("a transaction may write each key once")
        for compare in compares:
            validate_key(compare.key)
            validate_revision(compare.revision, "compared revision")
        for key, value, lease in puts:
            validate_key(key)
            validate_value(value)
            validate_revision(lease, "lease")
        for key in deletes:
            validate_key(key)
        reply = self._kv_call("Txn", etcd.TxnRequest(
            compare=[_compare(self._key(c.key), c.target, c.revision) for c in compares],
            success=[etcd.RequestOp(request_put=etcd.PutRequest(
                key=self._key(key), value=self.cipher.encrypt(key, value), lease=lease))
                for key, value, lease in puts]
            + [etcd.RequestOp(request_delete_range=etcd.DeleteRangeRequest(key=self._key(key)))
               for key in deletes],
            failure=[etcd.RequestOp(request_range=etcd.RangeRequest(key=self._key(c.key)))
                     for c in compares]), mutation=True)
        if reply.succeeded:
            return TxnResult(True, reply.header.revision, [])
        current = [self._kv(kv) for op in reply.responses for kv in op.response_range.kvs]
        return TxnResult(False, reply.header.revision, current)

    def rollback(self, key: str, to_revision: int, *, attempts: int = 16) -> PutResult:
        """Write again the value `key` had at `to_revision` (a new revision, like any put)."""
        validate_key(key)
        if validate_revision(to_revision, "revision") == 0:
            raise InvalidArgument("rollback needs a revision >= 1")
        raw = self._key(key)
        for _ in range(attempts):
            then = self._kv_call("Range", etcd.RangeRequest(key=raw, revision=to_revision),
                                 mutation=False, at=to_revision)
            if not then.kvs:
                raise NotFound(f"key {key!r} had no value at revision {to_revision}")
            now, _ = self.get(key)
            # the value as it reads (a secret decrypted), sealed again by put under the
            # current key
            result = self.put(key, self._kv(then.kvs[0]).value,
                              expected_mod_revision=now.mod_revision if now else 0)
            if result.succeeded:
                return result
        raise InvalidArgument(f"key {key!r} kept changing; rollback gave up after {attempts} tries")

    # -- leases --------------------------------------------------------------------------

    def lease_grant(self, ttl_seconds: int) -> tuple[int, int]:
        """A new lease: its id and the TTL etcd granted (etcd raises a TTL below its floor,
        about 1.5 x its election timeout, to the floor)."""
        validate_ttl(ttl_seconds)
        reply = self.etcd.call("lease", "LeaseGrant", etcd.LeaseGrantRequest(TTL=ttl_seconds),
                               mutation=True)
        if reply.error:
            raise ServiceUnavailable(f"etcd did not grant the lease: {reply.error}")
        return reply.ID, reply.TTL

    def lease_keepalive(self, lease: int) -> int:
        """Extend the lease by its TTL; 0 means it had already expired (keys are gone)."""
        validate_revision(lease, "lease")
        # Within the call's deadline, shared as `call` shares it: a frozen member (SIGSTOP, a
        # hung host) accepts the stream and never answers, and without a deadline the
        # keep-alive waited on it for a minute while the lease ran out (found by the chaos
        # suite's stop_etcd_leader).
        deadline = time.monotonic() + self.etcd.timeout
        for member, attempt in self.etcd.attempts(self.etcd.order(), deadline):
            try:
                stream = self.etcd.stream(member, "lease", "LeaseKeepAlive",
                                          iter([etcd.LeaseKeepAliveRequest(ID=lease)]),
                                          timeout=attempt)
                reply = next(iter(stream))
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN,
                                  grpc.StatusCode.DEADLINE_EXCEEDED) \
                        or self.etcd.token_refused(exc):
                    continue   # UNKNOWN: etcd's own "context deadline exceeded" (no leader)
                raise translate(exc, member.endpoint) from None
            except StopIteration:
                continue
            self.etcd.answered(member)
            return max(0, reply.TTL)
        raise ServiceUnavailable(f"no etcd member renewed lease {lease} "
                                 f"({', '.join(self.target.endpoints)})")

    def lease_revoke(self, lease: int) -> int:
        """Delete the lease and its keys now; returns how many keys were deleted."""
        validate_revision(lease, "lease")
        alive = self.etcd.call("lease", "LeaseTimeToLive",
                               etcd.LeaseTimeToLiveRequest(ID=lease, keys=True), mutation=False)
        if alive.TTL < 0:
            raise NotFound(f"lease {lease} does not exist or has expired", code="LEASE_NOT_FOUND")
        self.etcd.call("lease", "LeaseRevoke", etcd.LeaseRevokeRequest(ID=lease), mutation=True)
        return len(alive.keys)

    # -- watches -------------------------------------------------------------------------

    def watch(self, prefix: str, start_revision: int, *, exact_key: bool = False,
              until: int = 0, active=lambda: True) -> Iterator[WatchBatch]:
        """Changes under `prefix` from `start_revision` on, in order, as batches that say which
        revision they cover (a quiet watch reports its progress every progress_interval_s).
        Moves to another member when one fails, from the revision it had covered, so nothing
        is skipped or repeated. Raises RevisionCompacted when `start_revision` is gone.
        With `until`, ends once that revision is covered."""
        raw = self._key(prefix)
        covered = start_revision - 1
        attempt = 0
        while active():
            if until and covered >= until:
                return
            members = self.etcd.order()
            member = members[attempt % len(members)]
            try:
                for batch in self._watch_on(member, raw, covered + 1, exact_key, active):
                    attempt = 0
                    if batch.events or batch.revision > covered:
                        covered = max(covered, batch.revision)
                        yield batch
                    if until and covered >= until:
                        return
            except grpc.RpcError as exc:
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE,
                                      grpc.StatusCode.DEADLINE_EXCEEDED,
                                      grpc.StatusCode.CANCELLED) \
                        and not self.etcd.token_refused(exc):
                    raise translate(exc, member.endpoint) from None
                attempt += 1
                if attempt > 3 * len(self.etcd.members):
                    raise ServiceUnavailable(
                        f"no etcd member kept a watch open ({', '.join(self.target.endpoints)})"
                        f": {exc.details() or exc.code().name}") from None
                threading.Event().wait(min(0.05 * attempt, 1.0))
            except _TokenRefused as exc:  # authenticate again, resume from what was covered
                attempt += 1
                if attempt > 3 * len(self.etcd.members):
                    raise ServiceUnavailable(f"etcd keeps refusing the config center's "
                                             f"token: {exc}") from None

    def _watch_on(self, member: Member, raw: bytes, start: int, exact_key: bool,
                  active) -> Iterator[WatchBatch]:
        requests: queue.Queue = queue.Queue()
        requests.put(etcd.WatchRequest(create_request=etcd.WatchCreateRequest(
            key=raw or b"\0", range_end=b"" if exact_key else prefix_end(raw),
            start_revision=start)))
        stop = threading.Event()

        def ask_progress() -> None:
            while not stop.wait(self.progress_interval_s):
                requests.put(etcd.WatchRequest(progress_request=etcd.WatchProgressRequest()))

        stream = self.etcd.stream(member, "watch", "Watch", iter(requests.get, None))
        ticker = threading.Thread(target=ask_progress, daemon=True, name="etcd-watch-progress")
        ticker.start()
        try:
            for reply in stream:
                if reply.canceled:
                    if reply.compact_revision:
                        raise RevisionCompacted(start, reply.compact_revision)
                    if self.etcd.token_refused(reply.cancel_reason):
                        raise _TokenRefused(reply.cancel_reason)
                    raise ServiceUnavailable(f"etcd ({member.endpoint}) ended the watch: "
                                             f"{reply.cancel_reason or 'no reason given'}")
                if reply.created:
                    yield WatchBatch([], start - 1)
                    continue
                if reply.events:
                    events = [self._event(e) for e in reply.events]
                    yield WatchBatch(events, events[-1].revision)
                else:  # a progress notification: every later event is above this revision
                    yield WatchBatch([], reply.header.revision)
                if not active():
                    return
        finally:
            stop.set()
            requests.put(None)
            stream.cancel()


def _compare(raw: bytes, target: str, revision: int) -> etcd.Compare:
    if target == "create":
        return etcd.Compare(result=etcd.Compare.EQUAL, target=etcd.Compare.CREATE, key=raw,
                            create_revision=revision)
    if target != "mod":
        raise InvalidArgument(f"a compare's target is mod or create, not {target!r}")
    return _compare_mod(raw, revision)


class _TokenRefused(Exception):
    """etcd ended a watch for its token (the connection has dropped it): watch again."""


def _compare_mod(raw: bytes, expected: int) -> etcd.Compare:
    if expected == 0:  # the key must not exist: it has no create revision
        return etcd.Compare(result=etcd.Compare.EQUAL, target=etcd.Compare.CREATE, key=raw,
                            create_revision=0)
    return etcd.Compare(result=etcd.Compare.EQUAL, target=etcd.Compare.MOD, key=raw,
                        mod_revision=expected)
