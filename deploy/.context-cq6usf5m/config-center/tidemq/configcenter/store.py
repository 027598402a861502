"""ConfigStore: the versioned key-value store (etcd semantics) kept entirely in Redis.

Stateless by design: every fact (revision counter, keys, event log, histories, lease deadlines)
lives in Redis and every write is one Lua script, so any number of config-center instances can
serve the same store and a restarted instance loses nothing. Redis failures (down, hung, or
answering an error such as READONLY, NOREPLICAS or MISCONF) surface as ServiceUnavailable within
the socket timeout, never as a hang or an unexplained INTERNAL error.

Replicated Redis (docs/config-center.md, "High availability"): with `write_replicas` > 0 every
call runs on one connection as [script, PUBLISH barrier, WAIT n timeout]. The PUBLISH is a
replicated no-op, so WAIT returns only once n replicas hold everything the script read or wrote:
a write is answered only when it survives the master's loss, and a read (or a watch event) never
shows a write that a failover could take back — so a revision, once seen, is never handed out
again to something else, and an epoch the controller wrote is never granted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError
from tidemq.common import redisconn
from tidemq.common.errors import InvalidArgument, NotFound, ServiceUnavailable
from tidemq.configcenter import scripts
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

DEFAULT_NAMESPACE = "tidemq:cc"
DEFAULT_RETENTION = 100_000  # events kept in the log; older start revisions are "compacted"
DEFAULT_HISTORY = 100  # changes kept per key for History/Rollback
DEFAULT_WRITE_TIMEOUT_MS = 1000  # longest WAIT: a replica acks in < 1 ms, but a loaded 2-core
# machine once took over 500 ms (a config center refused a call before any fault)
SCRIPT_NAMES = ("GET", "PUT", "DELETE", "RANGE", "RANGE_AT", "LEASE_GRANT", "LEASE_KEEPALIVE",
                "LEASE_REVOKE", "LEASE_REAP", "HISTORY")


class NotReplicated(ServiceUnavailable):
    """Fewer replicas than required confirmed a call in time: a write may or may not survive
    a failover of the Redis master, a read may show what a failover takes back."""

    code = "NOT_REPLICATED"


def _int(raw: Any) -> int:
    return int(raw) if raw not in (None, b"", "") else 0


def _kv_from_flat(flat: list, index: int) -> KeyValue:
    key, value, create, mod, version, lease = flat[index:index + 6]
    return KeyValue(key.decode(), value or b"", _int(create), _int(mod), _int(version), _int(lease))


def parse_history_entry(key: str, raw: bytes) -> Event:
    etype, rev, create, version, lease, value = raw.split(b"|", 5)
    kv = KeyValue(key, value, int(create), int(rev), int(version), int(lease))
    return Event(EventType(etype.decode()), kv)


def state_at(history: list[Event], trimmed: bool, at: int) -> KeyValue | None:
    """The key's record as of revision `at` from its retained history (None = absent then).

    The history holds the key's newest changes without gaps, so the last change at or before
    `at` decides. When every retained change is newer, the key was absent at `at` only if the
    history is complete; once trimmed, the deciding change is gone (a key deleted and created
    again looks freshly created), so the answer is REVISION_COMPACTED.
    """
    before = [event for event in history if event.revision <= at]
    if before:
        return before[-1].kv if before[-1].type is EventType.PUT else None
    if history and trimmed:
        raise RevisionCompacted(at, history[0].revision)
    return None


def _event_from_stream(entry_id: bytes, fields: dict) -> Event:
    revision = int(entry_id.split(b"-", 1)[0])
    kv = KeyValue(fields[b"k"].decode(), fields[b"v"], _int(fields[b"c"]), revision,
                  _int(fields[b"n"]), _int(fields[b"l"]))
    return Event(EventType(fields[b"t"].decode()), kv)


class ConfigStore:
    """Versioned KV with CAS, prefix ranges, an event log for watches, leases and history.

    >>> store = ConfigStore("redis://127.0.0.1:6379/0")
    >>> store.put("/tidemq/topics/orders", b'{"queues": 8}').revision
    1
    """

    def __init__(self, redis_url: str, *, namespace: str = DEFAULT_NAMESPACE,
                 retention: int = DEFAULT_RETENTION, history_limit: int = DEFAULT_HISTORY,
                 redis_timeout: float = 1.0, watch_block_ms: int = 1000,
                 write_replicas: int | None = None,
                 write_timeout_ms: int = DEFAULT_WRITE_TIMEOUT_MS) -> None:
        """`write_replicas`: replicas that must hold a call's effects before it is answered
        (None = 1 under Sentinel, 0 for a single Redis)."""
        self.target = redisconn.parse(redis_url)
        self.namespace = namespace
        self.watch_block_ms = watch_block_ms
        self.write_replicas = (1 if self.target.replicated else 0) if write_replicas is None \
            else write_replicas
        if self.write_replicas < 0:
            raise InvalidArgument(f"write_replicas must be >= 0, got {self.write_replicas}")
        if write_timeout_ms < 1:
            raise InvalidArgument(f"write_timeout_ms must be >= 1, got {write_timeout_ms}")
        self.write_timeout_ms = write_timeout_ms
        self._common = (namespace, retention, history_limit)
        # One retry on a broken connection: under Sentinel it reconnects to the new master.
        retry = Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        wait_s = write_timeout_ms / 1000 if self.write_replicas else 0.0
        self._redis = redisconn.connect(
            self.target, socket_timeout=redis_timeout + wait_s,
            socket_connect_timeout=redis_timeout, retry=retry, retry_on_timeout=False)
        # Blocking XREADs get their own pool so they never starve short calls of connections.
        self._watch_redis = redisconn.connect(
            self.target, socket_timeout=redis_timeout + wait_s + watch_block_ms / 1000,
            socket_connect_timeout=redis_timeout, retry=retry, retry_on_timeout=False)
        self._scripts = {name: self._redis.register_script(getattr(scripts, name))
                         for name in SCRIPT_NAMES}
        self._log_key = f"{namespace}:log"
        self._barrier = f"{namespace}:barrier"

    def close(self) -> None:
        self._redis.close()
        self._watch_redis.close()

    @contextmanager
    def _redis_errors(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            # Whatever went wrong, the next call connects afresh (under Sentinel: to whichever
            # node is master now) instead of reusing a connection to a demoted or dead master.
            redisconn.drop_connections(self._redis)
            redisconn.drop_connections(self._watch_redis)
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: redis.RedisError) -> ServiceUnavailable:
        where = self.target.describe()
        if isinstance(exc, MasterNotFoundError):
            return ServiceUnavailable(
                f"no Sentinel names a master for {self.target.master_name!r} ({where}): the "
                f"Redis tier is failing over or down ({exc})")
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            return ServiceUnavailable(f"config store ({where}) unavailable: {exc}")
        if str(exc).startswith("NOREPLICAS"):
            return ServiceUnavailable(
                f"config store ({where}) refused the write: its master has no replica in "
                "sync (min-replicas-to-write), so the write could not survive its loss")
        # READONLY (a demoted primary), MISCONF (failed persistence), NOPERM, OOM...: the
        # store cannot serve until the operator fixes Redis; say what Redis said.
        return ServiceUnavailable(
            f"config store ({where}) refused the call ({type(exc).__name__}): {exc}")

    def _confirmed(self, client: redis.Redis, queue: Callable[[Any], None]) -> list:
        """Run the commands `queue` adds to a pipeline on one connection, and with
        `write_replicas` the PUBLISH + WAIT barrier after them; their replies."""
        with self._redis_errors():
            for attempt in (1, 2):
                pipe = client.pipeline(transaction=False)
                queue(pipe)
                if self.write_replicas:
                    pipe.publish(self._barrier, b"")
                    pipe.execute_command("WAIT", self.write_replicas, self.write_timeout_ms)
                replies = pipe.execute(raise_on_error=False)
                if attempt == 1 and any(isinstance(r, NoScriptError) for r in replies):
                    # A new master (failover, restart) has no scripts cached: load them and
                    # run again; a script that answered NOSCRIPT did not run.
                    for script in self._scripts.values():
                        client.script_load(script.script)
                    continue
                break
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        if not self.write_replicas:
            return replies
        acked = int(replies[-1])
        if acked < self.write_replicas:
            raise NotReplicated(
                f"config store ({self.target.describe()}): {acked} of the "
                f"{self.write_replicas} replica(s) required confirmed the call within "
                f"{self.write_timeout_ms} ms; a write was applied on the master but may not "
                "survive its loss (read it back before retrying a compare-and-set)")
        return replies[:-2]

    def _run(self, name: str, *args: Any) -> Any:
        script = self._scripts[name]
        return self._confirmed(self._redis, lambda pipe: pipe.evalsha(
            script.sha, 0, *self._common, *args))[0]

    def persistence(self) -> dict[str, str]:
        """Redis's append-only and min-replicas settings ({} if CONFIG is not allowed), to
        warn when they cannot keep what the store promises."""
        with self._redis_errors():
            try:
                config = {**self._redis.config_get("append*"),
                          **self._redis.config_get("min-replicas-*")}
            except redis.ResponseError:
                return {}
        return {str(k, "utf-8") if isinstance(k, bytes) else k:
                str(v, "utf-8") if isinstance(v, bytes) else v for k, v in config.items()}

    # -- reads ---------------------------------------------------------------------------

    def revision(self) -> int:
        return _int(self._confirmed(self._redis, lambda pipe: pipe.get(
            f"{self.namespace}:rev"))[0])

    def compact_revision(self) -> int:
        return _int(self._confirmed(self._redis, lambda pipe: pipe.get(
            f"{self.namespace}:compact"))[0]) or 1

    def get(self, key: str) -> tuple[KeyValue | None, int]:
        """The key's current record (None if absent) and the store revision of the read."""
        validate_key(key)
        reply = self._run("GET", key)
        if not reply[3]:
            return None, int(reply[0])
        return _kv_from_flat([key.encode(), *reply[1:]], 0), int(reply[0])

    def range(self, prefix: str, *, revision: int = 0, limit: int = 0) -> RangeResult:
        """Keys starting with `prefix` in key order, now or as of a retained `revision`."""
        validate_prefix(prefix)
        validate_revision(revision)
        if limit < 0:
            raise InvalidArgument(f"limit must be >= 0, got {limit}")
        if revision:
            return self._range_at(prefix, revision, limit)
        return self.range_many([prefix], limit=limit)[0]

    def range_many(self, prefixes: list[str], *, limit: int = 0) -> list[RangeResult]:
        """Several prefix ranges read atomically (one snapshot, one revision)."""
        flat = self._run("RANGE", limit, *prefixes)
        revision, index, results = int(flat[0]), 2, []
        for _ in prefixes:
            count = int(flat[index])
            index += 1
            kvs = [_kv_from_flat(flat, index + 6 * i) for i in range(count)]
            index += 6 * count
            results.append(RangeResult(kvs, revision))
        return results

    def _range_at(self, prefix: str, at: int, limit: int) -> RangeResult:
        current, compact, live, changed = self._run("RANGE_AT", prefix, at)
        current, compact = int(current), int(compact)
        if at > current:
            raise InvalidArgument(f"revision {at} is in the future; the store is at {current}")
        if at + 1 < compact:
            raise RevisionCompacted(at, compact)
        state = {kv.key: kv for kv in (_kv_from_flat(live, i) for i in range(0, len(live), 6))}
        for i in range(0, len(changed), 3):
            key = changed[i].decode()
            history = [parse_history_entry(key, raw) for raw in changed[i + 1]]
            try:
                kv = state_at(history, bool(changed[i + 2]), at)
            except RevisionCompacted as exc:
                raise RevisionCompacted(at, max(compact, exc.compact_revision)) from None
            if kv is None:
                state.pop(key, None)
            else:
                state[key] = kv
        kvs = [state[key] for key in sorted(state)]
        return RangeResult(kvs[:limit] if limit else kvs, at)

    def history(self, key: str, limit: int = 0) -> list[Event]:
        """The key's retained changes, oldest first."""
        validate_key(key)
        raw = self._confirmed(self._redis, lambda pipe: pipe.lrange(
            f"{self.namespace}:hist:{key}", -limit if limit > 0 else 0, -1))[0]
        return [parse_history_entry(key, entry) for entry in raw]

    # -- writes --------------------------------------------------------------------------

    def put(self, key: str, value: bytes, *, expected_mod_revision: int | None = None,
            lease: int = 0) -> PutResult:
        """Write `value`; with `expected_mod_revision` only if the key is at that revision
        (0 = the key must not exist). A failed compare returns succeeded=False."""
        validate_key(key)
        validate_value(value)
        if expected_mod_revision is not None:
            validate_revision(expected_mod_revision, "expected revision")
        validate_revision(lease, "lease")
        expected = "" if expected_mod_revision is None else str(expected_mod_revision)
        reply = self._run("PUT", key, value, expected, lease)
        status, revision, current = int(reply[0]), int(reply[1]), int(reply[2])
        if status == -1:
            raise NotFound(f"lease {lease} does not exist or has expired", code="LEASE_NOT_FOUND")
        prev = None
        if status == 1 and len(reply) > 3:
            prev = KeyValue(key, reply[3] or b"", _int(reply[4]), current, _int(reply[5]),
                            _int(reply[6]))
        return PutResult(status == 1, revision, current, prev)

    def delete(self, key: str, *, expected_mod_revision: int | None = None) -> DeleteResult:
        validate_key(key)
        if expected_mod_revision is not None:
            validate_revision(expected_mod_revision, "expected revision")
        expected = "" if expected_mod_revision is None else str(expected_mod_revision)
        status, revision, current, deleted = (int(x) for x in self._run("DELETE", key, expected))
        return DeleteResult(status == 1, deleted == 1, revision, current)

    def rollback(self, key: str, to_revision: int, *, attempts: int = 16) -> PutResult:
        """Write again the value `key` had at `to_revision` (a new revision, like any put)."""
        validate_key(key)
        if validate_revision(to_revision, "revision") == 0:
            raise InvalidArgument("rollback needs a revision >= 1")
        for _ in range(attempts):
            revision, trimmed, raw = self._run("HISTORY", key)
            if to_revision > int(revision):
                raise InvalidArgument(f"revision {to_revision} is in the future; the store is "
                                      f"at {int(revision)}")
            history = [parse_history_entry(key, entry) for entry in raw]
            if not history:
                raise NotFound(f"key {key!r} has no history")
            kv = state_at(history, bool(trimmed), to_revision)
            if kv is None:
                raise NotFound(f"key {key!r} had no value at revision {to_revision}")
            latest = history[-1]  # the key as of the snapshot: CAS on it, retry if it moved
            current = latest.revision if latest.type is EventType.PUT else 0
            result = self.put(key, kv.value, expected_mod_revision=current)
            if result.succeeded:
                return result
        raise InvalidArgument(f"key {key!r} kept changing; rollback gave up after {attempts} tries")

    # -- leases --------------------------------------------------------------------------

    def lease_grant(self, ttl_seconds: int) -> int:
        validate_ttl(ttl_seconds)
        return int(self._run("LEASE_GRANT", ttl_seconds * 1000, ttl_seconds))

    def lease_keepalive(self, lease: int) -> int:
        """Extend the lease by its TTL; 0 means it had already expired (keys are gone)."""
        validate_revision(lease, "lease")
        return int(self._run("LEASE_KEEPALIVE", lease))

    def lease_revoke(self, lease: int) -> int:
        """Delete the lease and its keys now; returns how many keys were deleted."""
        validate_revision(lease, "lease")
        deleted = int(self._run("LEASE_REVOKE", lease))
        if deleted < 0:
            raise NotFound(f"lease {lease} does not exist or has expired", code="LEASE_NOT_FOUND")
        return deleted

    def reap_expired_leases(self, limit: int = 100) -> tuple[int, int]:
        """Revoke leases past their deadline: (leases reaped, keys deleted)."""
        leases, keys = self._run("LEASE_REAP", limit)
        return int(leases), int(keys)

    # -- event log -----------------------------------------------------------------------

    def read_events(self, after_revision: int, *, block_ms: int | None = None,
                    count: int = 1000) -> list[Event]:
        """Events with revision > `after_revision`, in order, waiting up to `block_ms` for one.

        Raises RevisionCompacted when the next wanted event has been trimmed from the log.
        """
        block = self.watch_block_ms if block_ms is None else block_ms
        # On the watch connection itself: the barrier runs once the XREAD returns, so an
        # event is handed out only once a replica holds it.
        reply = self._confirmed(self._watch_redis, lambda pipe: pipe.xread(
            {self._log_key: f"{after_revision}-0"}, count=count, block=block or None))[0]
        entries = reply[0][1] if reply else []
        if not entries:
            compact = self.compact_revision()
            if after_revision + 1 < compact:
                raise RevisionCompacted(after_revision + 1, compact)
            return []
        events = [_event_from_stream(entry_id, fields) for entry_id, fields in entries]
        if events[0].revision != after_revision + 1:
            raise RevisionCompacted(after_revision + 1, self.compact_revision())
        return events
