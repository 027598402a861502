"""Kafka's consumer protocol payloads, decoded for display (admin, HTTP API, console).

A Kafka consumer group (protocol type `consumer`) carries, opaque to the coordinator, each
member's ConsumerProtocolSubscription (JoinGroup metadata) and ConsumerProtocolAssignment
(SyncGroup assignment), both non-flexible Kafka structs after an int16 version (0-3 today):

    Assignment:   [topic: string, partitions: [int32]] user_data: nullable bytes
    Subscription: topics: [string] user_data: nullable bytes
                  v1+ owned_partitions: [topic, [int32]]  v2+ generation_id: int32
                  v3+ rack_id: nullable string

A version above 3 is read as 3 with what follows ignored, as Kafka's own ConsumerProtocol
does. Anything malformed (truncated, negative lengths, a count the bytes cannot hold, a topic
that is not UTF-8) decodes to None: these functions never raise.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class KafkaAssignment:
    version: int
    partitions: dict[str, list[int]]   # topic -> partitions, in the order sent
    user_data_len: int | None          # None = null user data

    def to_json(self) -> dict:
        return {"version": self.version, "partitions": self.partitions,
                "user_data_len": self.user_data_len}


@dataclass(frozen=True, slots=True)
class KafkaSubscription:
    version: int
    topics: list[str]
    user_data_len: int | None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


class _Malformed(Exception):
    pass


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Malformed
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def count(self, min_item: int) -> int:
        """An array's length; it must fit in the bytes left (items of `min_item` bytes)."""
        n = self.int32()
        if n < 0 or n * min_item > len(self.data) - self.pos:
            raise _Malformed
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n == -1 and nullable:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise _Malformed from None

    def nullable_bytes_len(self) -> int | None:
        n = self.int32()
        if n == -1:
            return None
        self.take(n)
        return n

    def version(self) -> int:
        v = self.int16()
        if v < 0:
            raise _Malformed
        return v

    def topic_partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count(2 + 4)):
            topic = self.string()
            partitions = [self.int32() for _ in range(self.count(4))]
            out.setdefault(topic, []).extend(partitions)
        return out


def decode_assignment(raw: bytes) -> KafkaAssignment | None:
    """A ConsumerProtocolAssignment (SyncGroup's member assignment), or None if malformed."""
    try:
        r = _Reader(bytes(raw))
        version = r.version()
        partitions = r.topic_partitions()
        return KafkaAssignment(version, partitions, r.nullable_bytes_len())
    except (_Malformed, struct.error, TypeError, ValueError):
        return None


def decode_subscription(raw: bytes) -> KafkaSubscription | None:
    """A ConsumerProtocolSubscription (JoinGroup's member metadata), or None if malformed."""
    try:
        r = _Reader(bytes(raw))
        version = r.version()
        topics = [r.string() for _ in range(r.count(2))]
        user_data_len = r.nullable_bytes_len()
        owned: dict[str, list[int]] = {}
        generation_id, rack_id = -1, None
        if version >= 1:
            owned = r.topic_partitions()
        if version >= 2:
            generation_id = r.int32()
        if version >= 3:
            rack_id = r.string(nullable=True)
        return KafkaSubscription(version, topics, user_data_len, owned, generation_id, rack_id)
    except (_Malformed, struct.error, TypeError, ValueError):
        return None
