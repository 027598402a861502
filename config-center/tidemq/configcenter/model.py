"""The config center's domain values: keys with revisions, change events, write outcomes.

They mirror etcd's model (SPEC §7): every write gets a global, gap-free revision; a key knows
the revision that created it, the one that last modified it and how many writes it has seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tidemq.common.errors import InvalidArgument, PayloadTooLarge, PreconditionFailed

MAX_KEY_BYTES = 1024
MAX_VALUE_BYTES = 1024 * 1024
MAX_LEASE_TTL_S = 7 * 24 * 3600


class EventType(Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


@dataclass(frozen=True)
class Event:
    type: EventType
    kv: KeyValue  # for DELETE: key and the deletion's revision as mod_revision

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@dataclass(frozen=True)
class PutResult:
    succeeded: bool
    revision: int  # revision of this write, or the store revision when the compare failed
    current_mod_revision: int  # the key's mod revision before the write (0 = it was absent)
    prev_kv: KeyValue | None = None


@dataclass(frozen=True)
class DeleteResult:
    succeeded: bool
    deleted: bool
    revision: int
    current_mod_revision: int


@dataclass(frozen=True)
class RangeResult:
    kvs: list[KeyValue]
    revision: int


class RevisionCompacted(PreconditionFailed):
    """The requested revision is older than the retained event history."""

    code = "REVISION_COMPACTED"

    def __init__(self, revision: int, compact_revision: int) -> None:
        super().__init__(
            f"revision {revision} has been compacted; the oldest retained revision is "
            f"{compact_revision}: re-read the current state and watch from its revision"
        )
        self.revision = revision
        self.compact_revision = compact_revision


def validate_key(key: str, what: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"{what} must not be empty")
    return validate_prefix(key, what)


def validate_prefix(prefix: str, what: str = "prefix") -> str:
    size = len(prefix.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(f"{what} is {size} bytes; the limit is {MAX_KEY_BYTES} bytes")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in prefix):
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
