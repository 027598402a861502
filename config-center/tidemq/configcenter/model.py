"""Limits and validation of the config center's inputs; the value types live in tidemq.common.kv."""

from __future__ import annotations

from tidemq.common.errors import InvalidArgument, PayloadTooLarge
from tidemq.common.kv import (  # noqa: F401 - re-exported for the store and servicer
    MAX_KEY_BYTES,
    DeleteResult,
    Event,
    EventType,
    KeyValue,
    PutResult,
    RangeResult,
    RevisionCompacted,
    has_control_character,
)

MAX_VALUE_BYTES = 1024 * 1024
MAX_LEASE_TTL_S = 7 * 24 * 3600


def validate_key(key: str, what: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"{what} must not be empty")
    return validate_prefix(key, what)


def validate_prefix(prefix: str, what: str = "prefix") -> str:
    size = len(prefix.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(f"{what} is {size} bytes; the limit is {MAX_KEY_BYTES} bytes")
    if has_control_character(prefix):
        raise InvalidArgument(f"{what} {prefix!r} contains a control character")
    return prefix


def validate_value(value: bytes) -> bytes:
    if len(value) > MAX_VALUE_BYTES:
        raise PayloadTooLarge(
            f"value is {len(value)} bytes; the limit is {MAX_VALUE_BYTES} bytes (1 MiB)"
        )
    return value


def validate_revision(revision: int, what: str = "revision") -> int:
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
        raise InvalidArgument(f"{what} must be a non-negative integer, got {revision!r}")
    return revision


def validate_ttl(ttl_seconds: int) -> int:
    if not isinstance(ttl_seconds, int) or not 1 <= ttl_seconds <= MAX_LEASE_TTL_S:
        raise InvalidArgument(
            f"lease TTL must be between 1 and {MAX_LEASE_TTL_S} seconds, got {ttl_seconds!r}"
        )
    return ttl_seconds
