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
from tidemq.common.delays import DELAY_LEVEL_COUNT
from tidemq.common.errors import InvalidArgument, PayloadTooLarge, TideMQError
from tidemq.common.recall import RecallHandle
from tidemq.common.topic_names import validate_topic_name

try:  # the C decode of pull replies (native/), optional: decode_records_py is its twin
    from tidemq_speedups import decode_messages as _decode_messages_c
except ImportError:
    _decode_messages_c = None

MAX_MESSAGE_SIZE = record.DEFAULT_MAX_MESSAGE_SIZE


def delay_property(message: Message) -> str:
    """The record property (name\x01value\x02) of a delayed message; INVALID_DELAY for a
    negative value, a level outside 1..18 or both a level and a time."""
    level, at = message.delay_level, message.deliver_at_ms
    if type(level) is not int or type(at) is not int:
        raise InvalidArgument("delay_level and deliver_at_ms must be integers",
                              code="INVALID_DELAY")
    if level and at:
        raise InvalidArgument("a message has either a delay_level or a deliver_at_ms, not both",
                              code="INVALID_DELAY")
    if level:
        if not 1 <= level <= DELAY_LEVEL_COUNT:
            raise InvalidArgument(f"delay_level must be 1..{DELAY_LEVEL_COUNT}, got {level}",
                                  code="INVALID_DELAY")
        return f"{record.PROP_DELAY}\x01{level}\x02"
    if at < 0:
        raise InvalidArgument(f"deliver_at_ms must be epoch milliseconds >= 0, got {at}",
                              code="INVALID_DELAY")
    return f"{record.PROP_TIMER_DELIVER_MS}\x01{at}\x02"


MAX_MESSAGE_GROUP_LEN = 255


def validate_message_group(group: str) -> str:
    """A message group is 0..255 printable characters ("" = none)."""
    if not isinstance(group, str) or len(group) > MAX_MESSAGE_GROUP_LEN or not \
            group.isprintable():
        raise InvalidArgument(
            f"message group {group!r} must be at most {MAX_MESSAGE_GROUP_LEN} printable "
            "characters", code="INVALID_MESSAGE")
    return group


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send.

    `message_group` (FIFO): messages with the same group go to the same queue (the producer
    picks `crc32(group) % write queues` unless told otherwise), so one group's messages are
    stored, and consumed orderly, in send order. `delay_level` / `deliver_at_ms`: delivery
    held until a delay level (1..18) passes or until an epoch-ms time (docs/scheduled.md).

    >>> Message("orders", b"{'id': 1}", tags="created", keys=["order-1"]).topic
    'orders'
    """

    topic: str
    body: bytes
    tags: str = ""
    keys: Sequence[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    message_group: str = ""
    # Scheduled delivery (docs/scheduled.md): one of a delay level 1..18 (1s 5s 10s 30s 1m
    # 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h) or an exact time in epoch ms; 0 = now.
    delay_level: int = 0
    deliver_at_ms: int = 0

    @property
    def tag(self) -> str:
        """The message's one tag (`tags` is RocketMQ's name for it; JSON says "tag")."""
        return self.tags

    @property
    def scheduled(self) -> bool:
        """Delivered later (a delay level or a time): recallable until then."""
        return bool(self.delay_level or self.deliver_at_ms)

    def validate(self, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        """Raise the precise error for a message that no broker would accept."""
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
        if self.scheduled:
            delay_property(self)
        validate_message_group(self.message_group)


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (the unit of ordering and assignment)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


class SendStatus(enum.Enum):
    """docs/client.md. The last three mean: stored on the master, durability asked for
    unconfirmed."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


@dataclass(frozen=True, slots=True)
class ProducerSequence:
    """A batch's place in a sequenced producer's stream (Kafka's idempotent producer,
    docs/idempotence.md): record i of the batch is sequence `base_sequence + i` of
    (`producer_id`, `epoch`) on its queue. The broker stores such a batch once, answers a
    repeat of one of the queue's last five batches with its first offsets, and refuses a gap
    (OUT_OF_ORDER_SEQUENCE_NUMBER), an older epoch (INVALID_PRODUCER_EPOCH) and a producer it
    holds no state for past sequence 0 (UNKNOWN_PRODUCER_ID)."""

    producer_id: int
    epoch: int
    base_sequence: int

    def property_value(self, count: int) -> str:
        """PRODUCER_SEQUENCE of a batch of `count` records (on its first record)."""
        last = (self.base_sequence + count - 1) % (1 << 31)
        return f"{self.producer_id}:{self.epoch}:{self.base_sequence}:{last}"


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str          # offset message id (store host + physical offset, 32 hex chars)
    unique_id: str       # client-generated id, indexed by the broker
    broker_name: str
    queue_id: int
    queue_offset: int
    store_timestamp: int = 0   # when the broker stored the batch (epoch ms); 0 if unknown

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue("", self.broker_name, self.queue_id)

    def recall_handle(self, topic: str) -> str:
        """What `Producer.recall` takes to take back this delayed message of `topic`."""
        return RecallHandle(topic, self.broker_name, self.unique_id).encode()


# SendResult's slot setters: a batch's results are made without the frozen dataclass's
# per-field object.__setattr__ (a third of a batch send's client CPU otherwise).
_SEND_RESULT_SETTERS = tuple(SendResult.__dict__[name].__set__ for name in (
    "status", "msg_id", "unique_id", "broker_name", "queue_id", "queue_offset",
    "store_timestamp"))


def send_results(status: SendStatus, msg_ids: list[str], unique_ids: list[str], broker_name: str,
                 queue_id: int, first_queue_offset: int,
                 store_timestamp: int = 0) -> list[SendResult]:
    """The results of one stored batch: consecutive queue offsets from `first_queue_offset`."""
    (set_status, set_msg_id, set_unique_id, set_broker, set_queue, set_offset,
     set_stored) = _SEND_RESULT_SETTERS
    new, results = object.__new__, []
    for offset, (msg_id, unique_id) in enumerate(zip(msg_ids, unique_ids, strict=True),
                                                 first_queue_offset):
        result = new(SendResult)
        set_status(result, status)
        set_msg_id(result, msg_id)
        set_unique_id(result, unique_id)
        set_broker(result, broker_name)
        set_queue(result, queue_id)
        set_offset(result, offset)
        set_stored(result, store_timestamp)
        results.append(result)
    return results


class SendManyError(TideMQError):
    """`Producer.send_many` stored some messages but not others (a broker group refused its
    batch, e.g. STORAGE_FULL, and no other group took it within the retries): per-message
    outcomes instead of one error for all.

    `results[i]` is message i's SendResult, or None where it was not stored; `errors[i]` is
    the error of message i's batch, or None where it was stored. `code`, `grpc_status` and
    `http_status` are those of the first failure, and the error raised is also an instance of
    that failure's class (`except errors.ServiceUnavailable` catches it as before).
    """

    def __init__(self, message: str, *, results: Sequence[SendResult | None],
                 errors: Sequence[TideMQError | None], code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.results = list(results)
        self.errors = list(errors)

    @property
    def sent(self) -> list[int]:
        """Indexes (in the input) of the messages that were stored."""
        return [i for i, result in enumerate(self.results) if result is not None]

    @property
    def failed(self) -> list[int]:
        """Indexes (in the input) of the messages that were not stored."""
        return [i for i, error in enumerate(self.errors) if error is not None]

    @classmethod
    def of(cls, results: Sequence[SendResult | None],
           errors: Sequence[TideMQError | None]) -> SendManyError:
        """The error to raise for these outcomes: a SendManyError that is also an instance of
        the first failure's class, with its code and statuses."""
        first = next(error for error in errors if error is not None)
        kind = _SEND_MANY_KINDS.get(type(first))
        if kind is None:
            kind = _SEND_MANY_KINDS[type(first)] = type(
                f"SendManyError[{type(first).__name__}]", (cls, type(first)),
                {"grpc_status": first.grpc_status, "http_status": first.http_status})
        failed = sum(error is not None for error in errors)
        return kind(f"{failed} of {len(errors)} messages were not sent "
                    f"({len(errors) - failed} were): {first.message}",
                    results=results, errors=errors, code=first.code)


_SEND_MANY_KINDS: dict[type, type] = {}


_FIELDS = ("topic", "body", "tags", "keys", "properties", "broker_name", "queue_id",
           "queue_offset", "msg_id", "unique_id", "born_timestamp", "store_timestamp",
           "reconsume_times", "physical_offset")
_H = record  # header tuple indexes: record.H_*


class MessageExt:
    """A stored message, as read back by a consumer (read-only).

    Messages of a pull reply are lazy views: the reply's records are checked (framing and CRC)
    when it arrives, but only the fixed header is unpacked; topic, properties (tags, keys,
    unique id) and the body are decoded on first access and cached. A message keeps its reply
    buffer alive until its body and properties have been read. Constructing one with all
    fields (as a dataclass would) gives an eager message; both kinds compare, print and pickle
    alike, and a lazy record that turns out not to be UTF-8 raises RecordFormatError when read.
    """

    # _hd: the fixed header's fields (record.HEADER), unpacked on first access (`_h`)
    __slots__ = ("_buf", "_pos", "_hd", "_broker", "_body", "_dec")
    __match_args__ = _FIELDS

    def __init__(self, topic: str, body: bytes, tags: str, keys: list[str],
                 properties: dict[str, str], broker_name: str, queue_id: int, queue_offset: int,
                 msg_id: str, unique_id: str, born_timestamp: int, store_timestamp: int,
                 reconsume_times: int, physical_offset: int = 0) -> None:
        self._buf = None
        self._pos = 0
        self._hd = (0, 0, 0, queue_id, 0, queue_offset, physical_offset, 0, born_timestamp, b"",
                   store_timestamp, b"", reconsume_times, 0, len(body))
        self._broker = broker_name
        self._body = body
        self._dec = (topic, properties, tags, keys, unique_id, msg_id)

    # -- fields from the fixed header (no decoding) -----------------------------------------
    @property
    def _h(self) -> tuple:
        """The header's fields. Read before `_buf` is let go: `body` and `_decode` read it
        first."""
        header = self._hd
        if header is None:
            header = self._hd = record.HEADER.unpack_from(self._buf, self._pos)
        return header

    @property
    def broker_name(self) -> str:
        return self._broker

    @property
    def queue_id(self) -> int:
        return self._h[3]

    @property
    def queue_offset(self) -> int:
        return self._h[5]

    @property
    def physical_offset(self) -> int:
        return self._h[6]

    @property
    def born_timestamp(self) -> int:
        return self._h[8]

    @property
    def store_timestamp(self) -> int:
        return self._h[10]

    @property
    def reconsume_times(self) -> int:
        return self._h[12]

    @property
    def msg_id(self) -> str:
        """Offset message id (store host + physical offset, 32 hex chars)."""
        dec = self._dec
        if dec is not None and dec[5] is not None:
            return dec[5]
        return record.offset_msg_id(self._h[11], self._h[6])

    # -- fields decoded on first access --------------------------------------------------------
    @property
    def body(self) -> bytes:
        body = self._body
        if body is None:
            buf, h = self._buf, self._h
            if buf is None:  # another thread decoded everything meanwhile
                return self._body
            body = record.body_at(buf, self._pos, h)
            if h[7] & record.SYS_FLAG_COMPRESSED:
                body = compression.decompress(
                    body, self.properties.get(record.PROP_COMPRESSION, compression.ZSTD))
            self._body = body
            if self._dec is not None:
                self._buf = None  # everything is decoded: let go of the reply buffer
        return body

    @property
    def topic(self) -> str:
        return (self._dec or self._decode())[0]

    @property
    def properties(self) -> dict[str, str]:
        return (self._dec or self._decode())[1]

    @property
    def tags(self) -> str:
        return (self._dec or self._decode())[2]

    @property
    def tag(self) -> str:
        """The same as `tags`: a message carries one tag (JSON and HTTP say "tag")."""
        return (self._dec or self._decode())[2]

    @property
    def keys(self) -> list[str]:
        return (self._dec or self._decode())[3]

    @property
    def unique_id(self) -> str:
        return (self._dec or self._decode())[4]

    def _decode(self) -> tuple:
        buf, pos, h = self._buf, self._pos, self._h
        if buf is None:  # another thread decoded everything meanwhile
            return self._dec
        props = record.properties_at(buf, pos, h)
        keys = props.get(record.PROP_KEYS, "")
        self._dec = dec = (record.topic_at(buf, pos, h), props, props.get(record.PROP_TAGS, ""),
                           keys.split(record.KEY_SEPARATOR) if keys else [],
                           props.get(record.PROP_UNIQ_KEY, ""), None)
        if self._body is not None:
            self._buf = None
        return dec

    def fields(self) -> tuple[tuple, tuple]:
        """Everything but the body, decoded at once: the fixed header's fields (in
        `record.HEADER`'s order) and (topic, properties, tags, keys, unique_id, msg_id or
        None: then `msg_id` derives it). For code that reads every field of many messages:
        the HTTP gateway renders 32 per pop (107 -> 92 µs with this and one dict display,
        docs/http-api.md)."""
        header = self._h
        return header, self._dec or self._decode()

    # -- derived ------------------------------------------------------------------------------
    @property
    def user_properties(self) -> dict[str, str]:
        """Properties set by the sender, without TideMQ's system ones."""
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTIES}

    @property
    def message_group(self) -> str:
        """The sender's message group (FIFO), "" for none."""
        return self.properties.get(record.PROP_MESSAGE_GROUP, "")

    @property
    def origin_topic(self) -> str:
        """The topic the message was sent to, also when it is redelivered from a retry topic
        or read from a dead-letter queue."""
        return self.properties.get(record.PROP_RETRY_TOPIC) or self.topic

    @property
    def trace_carrier(self) -> dict[str, str]:
        """The producer's trace context, for `tidemq.common.tracing.extract_context`."""
        traceparent = self.properties.get(record.PROP_TRACE_CONTEXT, "")
        return {"traceparent": traceparent} if traceparent else {}

    # -- value semantics (as the frozen dataclass this replaced) -------------------------------
    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())  # TypeError, like the dataclass: keys is a list

    def __repr__(self) -> str:
        return "MessageExt(" + ", ".join(
            f"{name}={value!r}" for name, value in zip(_FIELDS, self._fields(), strict=True)) + ")"

    def __reduce__(self) -> tuple:
        return (MessageExt, self._fields())  # pickles eagerly, without the reply buffer

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
    record.PROP_COMPRESSION, record.PROP_MESSAGE_GROUP, record.PROP_RETRY_TOPIC,
    record.PROP_ORIGIN_MESSAGE_ID,
    record.PROP_FIRST_FAILURE_MS, record.PROP_NOT_BEFORE_MS, record.PROP_REAL_TOPIC,
    record.PROP_REAL_QUEUE_ID, record.PROP_TRANSACTION_PREPARED, record.PROP_PRODUCER_GROUP,
    record.PROP_PRODUCER_ID,
})


def decode_records(raw: bytes, broker_name: str = "") -> list[MessageExt]:
    """A pull reply's records as lazy messages: every record's framing and CRC is checked now
    (RecordFormatError), everything else is decoded on first access (in C where built: per
    1 KiB message, about 1 µs in Python, 0.26 in C)."""
    if not isinstance(raw, bytes):
        raw = bytes(raw)
    if _decode_messages_c is not None:
        messages = _decode_messages_c(raw, MessageExt, broker_name)
        if messages is not None:
            return messages
    return decode_records_py(raw, broker_name)  # the precise error of an invalid record


def decode_records_py(raw: bytes, broker_name: str = "") -> list[MessageExt]:
    """decode_records in Python: the contract of the C version and its fallback."""
    new, cls, messages = object.__new__, MessageExt, []
    append = messages.append
    for pos, header in record.scan_records(raw):
        m = new(cls)
        m._buf, m._pos, m._hd, m._broker, m._body, m._dec = raw, pos, header, broker_name, None, None
        append(m)
    return messages


def reply_positions(messages: Sequence[MessageExt]) -> tuple[bytes, list[int]] | None:
    """(the reply buffer, each message's position in it) when every message is a lazy view
    `decode_records` made over one reply that it still holds; None otherwise (a message built
    another way, or one already decoded and let go of the buffer). For readers that walk the
    records themselves (gateway-kafka's Fetch encodes a pull's records in C)."""
    if not messages:
        return None
    buf = getattr(messages[0], "_buf", None)
    if buf is None:
        return None
    positions = []
    for message in messages:
        if getattr(message, "_buf", None) is not buf:
            return None
        positions.append(message._pos)
    return buf, positions


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
