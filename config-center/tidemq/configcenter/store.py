"""ConfigStore: the versioned key-value store (etcd semantics) kept entirely in Redis.

Stateless by design: every fact (revision counter, keys, event log, histories, lease deadlines)
lives in Redis and every write is one Lua script, so any number of config-center instances can
serve the same store and a restarted instance loses nothing. Redis failures (down, hung, or
answering an error such as READONLY or MISCONF) surface as ServiceUnavailable within the socket
timeout, never as a hang or an unexplained INTERNAL error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
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
                 redis_timeout: float = 1.0, watch_block_ms: int = 1000) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self.watch_block_ms = watch_block_ms
        self._common = (namespace, retention, history_limit)
        retry = Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        self._redis = redis.Redis.from_url(
            redis_url, socket_timeout=redis_timeout, socket_connect_timeout=redis_timeout,
            retry=retry, retry_on_timeout=False)
        # Blocking XREADs get their own pool so they never starve short calls of connections.
        self._watch_redis = redis.Redis.from_url(
            redis_url, socket_timeout=redis_timeout + watch_block_ms / 1000,
            socket_connect_timeout=redis_timeout, retry=retry, retry_on_timeout=False)
        self._scripts: dict[str, Callable] = {
            name: self._redis.register_script(getattr(scripts, name))
            for name in ("GET", "PUT", "DELETE", "RANGE", "RANGE_AT", "LEASE_GRANT",
                         "LEASE_KEEPALIVE", "LEASE_REVOKE", "LEASE_REAP", "HISTORY")
        }
        self._log_key = f"{namespace}:log"

    def close(self) -> None:
        self._redis.close()
        self._watch_redis.close()

    @contextmanager
    def _redis_errors(self) -> Iterator[None]:
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise ServiceUnavailable(f"config store (redis) unavailable: {exc}") from None
        except redis.RedisError as exc:
            # READONLY (a demoted primary), MISCONF (failed persistence), NOPERM, OOM...: the
            # store cannot serve until the operator fixes Redis; say what Redis said.
            raise ServiceUnavailable(
                f"config store (redis) refused the call ({type(exc).__name__}): {exc}") from None

    def _run(self, name: str, *args: Any) -> Any:
        with self._redis_errors():
            return self._scripts[name](keys=[], args=[*self._common, *args])

    def persistence(self) -> dict[str, str]:
        """Redis's append-only settings ({} if CONFIG is not allowed), to warn when off."""
        with self._redis_errors():
            try:
                config = self._redis.config_get("append*")
            except redis.ResponseError:
                return {}
        return {str(k, "utf-8") if isinstance(k, bytes) else k:
                str(v, "utf-8") if isinstance(v, bytes) else v for k, v in config.items()}

    # -- reads ---------------------------------------------------------------------------

    def revision(self) -> int:
        with self._redis_errors():
            return _int(self._redis.get(f"{self.namespace}:rev"))

    def compact_revision(self) -> int:
        with self._redis_errors():
            return _int(self._redis.get(f"{self.namespace}:compact")) or 1

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
        with self._redis_errors():
            raw = self._redis.lrange(f"{self.namespace}:hist:{key}", -limit if limit > 0 else 0, -1)
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
        with self._redis_errors():
            reply = self._watch_redis.xread({self._log_key: f"{after_revision}-0"},
                                            count=count, block=block or None)
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
