"""The config center's value types, shared by the server and the client.

They mirror etcd's model (docs/config-center.md): every write gets a global, gap-free
revision; a key knows the revision that created it, the one that last modified it and how
many writes it has seen.
One definition serves both sides so a value read through the client is the same object shape
the store produced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tidemq.common.errors import PreconditionFailed

# The key rule (the config center enforces it, the HTTP gateway's OpenAPI document states it):
# at most MAX_KEY_BYTES of UTF-8 and no control character (U+0000..U+001F, U+007F).
MAX_KEY_BYTES = 1024
KEY_CONTROL_CHARACTERS = "\x00-\x1f\x7f"  # a regular-expression character class, no brackets


def has_control_character(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


class EventType(StrEnum):
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

    @property
    def text(self) -> str:
        return self.value.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.value)


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
