"""The user-facing message model: what callers send and what they get back.

`Message` is what a producer sends; `MessageExt` is a stored message as a consumer sees it
(decoded from a CommitLog record, body decompressed); `SendResult` and `PullResult` are the
answers. None of these know about gRPC.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tidemq.client import compression
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PayloadTooLarge

TOPIC_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_%|-")
MAX_TOPIC_NAME_LEN = 127
MAX_MESSAGE_SIZE = record.DEFAULT_MAX_MESSAGE_SIZE


def validate_topic_name(topic: str) -> str:
    """SPEC §2: `[A-Za-z0-9_%|-]{1,127}`; raises INVALID_TOPIC with the reason."""
    if not isinstance(topic, str) or not 0 < len(topic) <= MAX_TOPIC_NAME_LEN:
        raise InvalidArgument(
            f"topic name must be 1..{MAX_TOPIC_NAME_LEN} characters", code="INVALID_TOPIC"
        )
    bad = sorted(set(topic) - TOPIC_NAME_CHARS)
    if bad:
        raise InvalidArgument(
            f"topic name {topic!r} has characters outside [A-Za-z0-9_%|-]: {''.join(bad)!r}",
            code="INVALID_TOPIC",
        )
    return topic


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send.

    >>> Message("orders", b"{'id': 1}", tags="created", keys=["order-1"]).topic
    'orders'
    """

    topic: str
    body: bytes
    tags: str = ""
    keys: Sequence[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)

    def validate(self, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        """Raise the SPEC's error for a message that no broker would accept."""
        validate_topic_name(self.topic)
        if not isinstance(self.body, bytes | bytearray | memoryview):
            raise InvalidArgument("message body must be bytes", code="INVALID_MESSAGE")
        if len(self.body) == 0:
            raise InvalidArgument("message body must not be empty", code="MESSAGE_BODY_EMPTY")
        if len(self.body) > max_message_size:
            raise PayloadTooLarge(
                f"message body is {len(self.body)} bytes; the limit is {max_message_size}"
            )
        for key in self.keys:
            if not key or record.KEY_SEPARATOR in key:
                raise InvalidArgument(
                    f"message key {key!r} must be non-empty and contain no spaces",
                    code="INVALID_MESSAGE",
                )


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (the unit of ordering and assignment)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


class SendStatus(enum.Enum):
    """SPEC §2. The last three mean: stored on the master, durability asked for unconfirmed."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str          # offset message id (store host + physical offset, 32 hex chars)
    unique_id: str       # client-generated id, indexed by the broker
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue("", self.broker_name, self.queue_id)


@dataclass(frozen=True, slots=True)
class MessageExt:
    """A stored message, as read back by a consumer."""

    topic: str
    body: bytes
    tags: str
    keys: list[str]
    properties: dict[str, str]
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    unique_id: str
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    physical_offset: int = 0

    @property
    def user_properties(self) -> dict[str, str]:
        """Properties set by the sender, without TideMQ's system ones."""
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTIES}

    @property
    def trace_carrier(self) -> dict[str, str]:
        """The producer's trace context, for `tidemq.common.tracing.extract_context`."""
        traceparent = self.properties.get(record.PROP_TRACE_CONTEXT, "")
        return {"traceparent": traceparent} if traceparent else {}

    @classmethod
    def from_record(cls, rec: record.Record, broker_name: str = "") -> MessageExt:
        body = bytes(rec.body)
        if rec.sys_flag & record.SYS_FLAG_COMPRESSED:
            body = compression.decompress(
                body, rec.properties.get(record.PROP_COMPRESSION, compression.ZSTD)
            )
        return cls(
            topic=rec.topic, body=body, tags=rec.tags, keys=rec.keys, properties=rec.properties,
            broker_name=broker_name, queue_id=rec.queue_id, queue_offset=rec.queue_offset,
            msg_id=rec.msg_id, unique_id=rec.unique_id, born_timestamp=rec.born_timestamp,
            store_timestamp=rec.store_timestamp, reconsume_times=rec.reconsume_times,
            physical_offset=rec.physical_offset,
        )


SYSTEM_PROPERTIES = frozenset({
    record.PROP_TAGS, record.PROP_KEYS, record.PROP_UNIQ_KEY, record.PROP_TRACE_CONTEXT,
    record.PROP_COMPRESSION,
})


def decode_records(raw: bytes, broker_name: str = "") -> list[MessageExt]:
    """Decode a pull reply's record batch into messages (CRC-checked)."""
    return [MessageExt.from_record(rec, broker_name) for rec in record.iter_records(raw)]


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    messages: list[MessageExt]
    next_offset: int
    min_offset: int
    max_offset: int
