"""The message record: one layout on the wire, in the CommitLog and in pull replies.

Producers encode records in exactly the CommitLog layout (SPEC §3) with the broker-assigned
fields left zero; the broker stamps those fields and copies the bytes, never decoding a body.
Pull replies carry contiguous slices of the CommitLog, which clients decode with
`iter_records`. One codec for all three places means no re-encoding anywhere on the path.

Layout (big-endian). The SPEC's ``body_crc`` slot holds ``record_crc``: CRC32 over every byte
after that field, so a torn or corrupt record of any kind is detected, not only a bad body.

    off size field
      0   4  total_size
      4   4  magic                 MESSAGE_MAGIC, or BLANK_MAGIC for the filler at a segment end
      8   4  record_crc            crc32(record[12:total_size])
     12   4  queue_id
     16   4  flag
     20   8  queue_offset
     28   8  physical_offset
     36   4  sys_flag
     40   8  born_timestamp (ms)
     48   8  born_host             ipv4 (4) + port (4)
     56   8  store_timestamp (ms)
     64   8  store_host            ipv4 (4) + port (4)
     72   4  reconsume_times
     76   8  prepared_txn_offset
     84   4  body_len, then body
          1  topic_len, then topic (utf-8)
          2  props_len, then properties (name \x01 value \x02 ...)
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194

HEADER = struct.Struct(">iIIiiqqiq8sq8siqi")
HEADER_SIZE = HEADER.size  # 88
assert HEADER_SIZE == 88

# Field offsets, for in-place stamping by the broker.
OFF_TOTAL_SIZE = 0
OFF_MAGIC = 4
OFF_CRC = 8
OFF_QUEUE_ID = 12
OFF_FLAG = 16
OFF_QUEUE_OFFSET = 20
OFF_PHYSICAL_OFFSET = 28
OFF_SYS_FLAG = 36
OFF_BORN_TIMESTAMP = 40
OFF_BORN_HOST = 48
OFF_STORE_TIMESTAMP = 56
OFF_STORE_HOST = 64
OFF_RECONSUME_TIMES = 72
OFF_PREPARED_TXN_OFFSET = 76
OFF_BODY_LEN = 84
CRC_START = 12

# A blank filler is total_size + magic only (8 bytes); the remainder of the segment is zero.
BLANK_HEADER = struct.Struct(">iI")

MAX_TOPIC_LEN = 127
MAX_PROPERTIES_SIZE = 32 * 1024  # SPEC §2
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

# Property names (RocketMQ's MessageConst spelling, so gateways can map 1:1).
PROP_TAGS = "TAGS"
PROP_KEYS = "KEYS"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_TRACE_CONTEXT = "TRACE_CONTEXT"
PROP_COMPRESSION = "COMPRESSION"
KEY_SEPARATOR = " "
_NAME_VALUE_SEP = "\x01"
_PROPERTY_SEP = "\x02"

# sys_flag bits
SYS_FLAG_COMPRESSED = 0x1

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")


class RecordFormatError(ValueError):
    """Bytes that are not a valid record (bad size, magic, CRC or field lengths)."""


def encode_properties(properties: Mapping[str, str]) -> bytes:
    for name, value in properties.items():
        if any(sep in name or sep in value for sep in (_NAME_VALUE_SEP, _PROPERTY_SEP)):
            raise ValueError(f"property {name!r} contains a reserved separator character")
    return "".join(
        f"{name}{_NAME_VALUE_SEP}{value}{_PROPERTY_SEP}" for name, value in properties.items()
    ).encode()


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    text = bytes(raw).decode()
    props: dict[str, str] = {}
    for item in text.split(_PROPERTY_SEP):
        if item:
            name, _, value = item.partition(_NAME_VALUE_SEP)
            props[name] = value
    return props


def tag_hash(tag: str) -> int:
    """Stable 63-bit tag hash stored in ConsumeQueue units (0 for no tag)."""
    return zlib.crc32(tag.encode()) if tag else 0


def pack_host(host: str, port: int) -> bytes:
    try:
        ip = socket.inet_aton(socket.gethostbyname(host))
    except OSError:
        ip = b"\0\0\0\0"
    return ip + _U32.pack(port)


def unpack_host(raw: bytes) -> str:
    return f"{socket.inet_ntoa(raw[:4])}:{_U32.unpack_from(raw, 4)[0]}"


def offset_msg_id(store_host: bytes, physical_offset: int) -> str:
    """RocketMQ's offset message id: store host + physical offset as 32 hex chars."""
    return (store_host + _I64.pack(physical_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[bytes, int]:
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ValueError(f"message id {msg_id!r} is not hexadecimal") from exc
    if len(raw) != 16:
        raise ValueError(f"message id {msg_id!r} must be 32 hex characters")
    return raw[:8], _I64.unpack_from(raw, 8)[0]


_UNIQ_PREFIX = (os.getpid() & 0xFFFF).to_bytes(2, "big") + os.urandom(6)
_uniq_counter = itertools.count()


def new_unique_id() -> str:
    """Client-side unique id: process prefix + ms timestamp + counter (32 hex chars)."""
    return (
        _UNIQ_PREFIX
        + (int(time.time() * 1000) & 0xFFFFFFFFFFFF).to_bytes(6, "big")
        + (next(_uniq_counter) & 0xFFFF).to_bytes(2, "big")
    ).hex().upper()


def encode(
    topic: str,
    body: bytes,
    *,
    properties: bytes = b"",
    queue_id: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes = b"\0" * 8,
    reconsume_times: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    store_timestamp: int = 0,
    store_host: bytes = b"\0" * 8,
    prepared_txn_offset: int = 0,
) -> bytes:
    """Encode one record, CRC included. `properties` is already encoded (encode_properties)."""
    topic_raw = topic.encode()
    if not 0 < len(topic_raw) <= MAX_TOPIC_LEN:
        raise RecordFormatError(f"topic must be 1..{MAX_TOPIC_LEN} bytes")
    if len(properties) > MAX_PROPERTIES_SIZE:
        raise RecordFormatError(
            f"properties are {len(properties)} bytes; the limit is {MAX_PROPERTIES_SIZE}"
        )
    total = HEADER_SIZE + len(body) + 1 + len(topic_raw) + 2 + len(properties)
    buf = bytearray(total)
    HEADER.pack_into(
        buf, 0, total, MESSAGE_MAGIC, 0, queue_id, flag, queue_offset, physical_offset,
        sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_txn_offset, len(body),
    )
    pos = HEADER_SIZE
    buf[pos:pos + len(body)] = body
    pos += len(body)
    buf[pos] = len(topic_raw)
    buf[pos + 1:pos + 1 + len(topic_raw)] = topic_raw
    pos += 1 + len(topic_raw)
    _U16.pack_into(buf, pos, len(properties))
    buf[pos + 2:] = properties
    _U32.pack_into(buf, OFF_CRC, zlib.crc32(memoryview(buf)[CRC_START:]))
    return bytes(buf)


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """What a producer sends: the user's view of a message before it becomes a record."""

    topic: str
    body: bytes
    tags: str = ""
    keys: Sequence[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    unique_id: str = ""

    def system_properties(self) -> dict[str, str]:
        props = dict(self.properties)
        if self.tags:
            props[PROP_TAGS] = self.tags
        if self.keys:
            props[PROP_KEYS] = KEY_SEPARATOR.join(self.keys)
        props[PROP_UNIQ_KEY] = self.unique_id or new_unique_id()
        return props


def encode_message(
    message: OutgoingMessage, *, born_host: bytes = b"\0" * 8, born_timestamp: int = 0,
    sys_flag: int = 0, body: bytes | None = None, extra_properties: Mapping[str, str] | None = None,
) -> tuple[bytes, str]:
    """Encode a producer message; returns (record bytes, unique id)."""
    props = message.system_properties()
    if extra_properties:
        props.update(extra_properties)
    record = encode(
        message.topic,
        message.body if body is None else body,
        properties=encode_properties(props),
        sys_flag=sys_flag,
        born_timestamp=born_timestamp or int(time.time() * 1000),
        born_host=born_host,
    )
    return record, props[PROP_UNIQ_KEY]


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record. `body` is a memoryview slice of the buffer it came from (no copy)."""

    total_size: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_txn_offset: int
    body: memoryview
    topic: str
    properties: dict[str, str]

    @property
    def tags(self) -> str:
        return self.properties.get(PROP_TAGS, "")

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROP_KEYS, "")
        return raw.split(KEY_SEPARATOR) if raw else []

    @property
    def unique_id(self) -> str:
        return self.properties.get(PROP_UNIQ_KEY, "")

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.physical_offset)


def decode(buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True) -> Record:
    """Decode the record at `pos`; raises RecordFormatError if it is not a whole valid record."""
    view = memoryview(buf)
    if len(view) - pos < HEADER_SIZE:
        raise RecordFormatError(f"truncated header at {pos}")
    (total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     born_host, store_ts, store_host, reconsume, prepared, body_len) = HEADER.unpack_from(view, pos)
    if magic != MESSAGE_MAGIC:
        raise RecordFormatError(f"bad magic {magic:#x} at {pos}")
    end = pos + total
    if total < HEADER_SIZE + 3 or end > len(view):
        raise RecordFormatError(f"bad total_size {total} at {pos}")
    if verify_crc and zlib.crc32(view[pos + CRC_START:end]) != crc:
        raise RecordFormatError(f"CRC mismatch at {pos}")
    body_end = pos + HEADER_SIZE + body_len
    if body_len < 0 or body_end + 3 > end:
        raise RecordFormatError(f"bad body_len {body_len} at {pos}")
    topic_len = view[body_end]
    topic_end = body_end + 1 + topic_len
    if topic_end + 2 > end:
        raise RecordFormatError(f"bad topic_len {topic_len} at {pos}")
    props_len = _U16.unpack_from(view, topic_end)[0]
    if topic_end + 2 + props_len != end:
        raise RecordFormatError(f"field lengths do not add up to total_size at {pos}")
    try:
        topic = bytes(view[body_end + 1:topic_end]).decode()
        properties = decode_properties(view[topic_end + 2:end])
    except UnicodeDecodeError as exc:
        raise RecordFormatError(f"topic or properties are not UTF-8 at {pos}") from exc
    return Record(
        total, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_host,
        store_ts, store_host, reconsume, prepared, view[pos + HEADER_SIZE:body_end],
        topic, properties,
    )


def iter_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Iterator[Record]:
    """Decode a concatenation of records (a send batch or a pull reply)."""
    pos, end = 0, len(buf)
    while pos < end:
        record = decode(buf, pos, verify_crc=verify_crc)
        yield record
        pos += record.total_size
