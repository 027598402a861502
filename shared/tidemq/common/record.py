"""The message record: one layout on the wire, in the CommitLog and in pull replies.

Producers encode records in exactly the CommitLog layout (docs/storage.md) with the broker-assigned
fields left zero; the broker stamps those fields and copies the bytes, never decoding a body.
Pull replies carry contiguous slices of the CommitLog, which clients decode with
`iter_records`. One codec for all three places means no re-encoding anywhere on the path.

Layout (big-endian). RocketMQ's ``body_crc`` slot holds ``record_crc``: CRC32 over every byte
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

from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN

try:  # the C scan of pull replies and batch encoder (native/), optional: the client runs
    # without them (use_crc32: a build whose scan_records takes None for its own crc32)
    from tidemq_speedups import encode_batch as _encode_batch_c
    from tidemq_speedups import scan_records as _scan_records_c
    from tidemq_speedups import use_crc32 as _use_crc32
except ImportError:
    _encode_batch_c = _scan_records_c = _use_crc32 = None
try:  # ISA-L's crc32: zlib's checksum, several times faster on a 1 KiB record
    from isal import isal_zlib

    record_crc32 = isal_zlib.crc32
except ImportError:  # a platform without isal wheels: the same values, slower
    isal_zlib, record_crc32 = None, zlib.crc32
if _use_crc32 is not None and isal_zlib is not None:
    # the C loops' CRCs (the broker's append and dispatch, the clients' encode and decode)
    # with ISA-L's too: zlib's took 0.4 of a consumer's 0.67 µs per 1 KiB message decoded
    _use_crc32(isal_zlib.__file__)

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

MAX_PROPERTIES_SIZE = 32 * 1024  # docs/client.md
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

# Property names (RocketMQ's MessageConst spelling, so gateways can map 1:1).
PROP_TAGS = "TAGS"
PROP_KEYS = "KEYS"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_TRACE_CONTEXT = "TRACE_CONTEXT"
PROP_COMPRESSION = "COMPRESSION"
PROP_MESSAGE_GROUP = "MESSAGE_GROUP"  # FIFO: messages of one group go to one queue, in order
KEY_SEPARATOR = " "
_NAME_VALUE_SEP = "\x01"
_PROPERTY_SEP = "\x02"

# sys_flag bits
SYS_FLAG_COMPRESSED = 0x1
# RocketMQ's transaction type bits (MessageSysFlag): a half (prepared) message, and the type a
# message carries once its transaction ended (docs/transactions.md).
TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
SYS_FLAG_SCHEDULED = 0x10  # delayed / scheduled: a DELAY or TIMER_DELIVER_MS property (scheduled.md)

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


def new_unique_ids(count: int) -> list[str]:
    """`count` unique ids at once (one clock read), as `new_unique_id` would make them."""
    base = (_UNIQ_PREFIX + (int(time.time() * 1000) & 0xFFFFFFFFFFFF).to_bytes(6, "big")).hex()
    base = base.upper()
    counter = _uniq_counter
    return [f"{base}{next(counter) & 0xFFFF:04X}" for _ in range(count)]


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
    if not 0 < len(topic_raw) <= MAX_TOPIC_NAME_LEN:
        raise RecordFormatError(f"topic must be 1..{MAX_TOPIC_NAME_LEN} bytes")
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
    _U32.pack_into(buf, OFF_CRC, record_crc32(memoryview(buf)[CRC_START:]))
    return bytes(buf)


_ZERO_HOST = b"\0" * 8


def encode_batch(topic: str, items: Sequence[tuple[bytes, bytes, int]], *,
                 born_timestamp: int = 0, born_host: bytes = _ZERO_HOST) -> bytes:
    """Encode records of one topic into one buffer, CRCs included: what `encode` gives for
    each item, concatenated, without an intermediate object per record. Each item is
    (body, encoded properties, sys_flag). One C pass where `tidemq_speedups` is installed
    (most of a producer's CPU was this loop); `encode_batch_py` otherwise, and for whatever
    the C pass declines (it raises the precise error)."""
    if _encode_batch_c is not None and type(items) is list:
        topic_raw = topic.encode()
        if 0 < len(topic_raw) <= MAX_TOPIC_NAME_LEN:
            done = _encode_batch_c(bytes([len(topic_raw)]) + topic_raw, items, born_timestamp,
                                   born_host)
            if done is not None:
                return done
    return encode_batch_py(topic, items, born_timestamp=born_timestamp, born_host=born_host)


def encode_batch_py(topic: str, items: Sequence[tuple[bytes, bytes, int]], *,
                    born_timestamp: int = 0, born_host: bytes = _ZERO_HOST) -> bytes:
    """`encode_batch` in Python: the contract the C pass is held to."""
    topic_raw = topic.encode()
    topic_len = len(topic_raw)
    if not 0 < topic_len <= MAX_TOPIC_NAME_LEN:
        raise RecordFormatError(f"topic must be 1..{MAX_TOPIC_NAME_LEN} bytes")
    fixed = HEADER_SIZE + 1 + topic_len + 2
    sizes = [fixed + len(body) + len(props) for body, props, _ in items]
    buf = bytearray(sum(sizes))
    view, crc32, put = memoryview(buf), record_crc32, _U32.pack_into
    pack, magic, topic_head = HEADER.pack_into, MESSAGE_MAGIC, bytes([topic_len]) + topic_raw
    pos = 0
    for (body, props, sys_flag), total in zip(items, sizes, strict=True):
        props_len = len(props)
        if props_len > MAX_PROPERTIES_SIZE:
            raise RecordFormatError(
                f"properties are {props_len} bytes; the limit is {MAX_PROPERTIES_SIZE}")
        body_end = pos + HEADER_SIZE + len(body)
        pack(buf, pos, total, magic, 0, 0, 0, 0, 0, sys_flag, born_timestamp, born_host, 0,
             _ZERO_HOST, 0, 0, len(body))
        buf[pos + HEADER_SIZE:body_end] = body
        at = body_end + 1 + topic_len
        buf[body_end:at] = topic_head
        buf[at] = props_len >> 8
        buf[at + 1] = props_len & 0xFF
        end = pos + total
        buf[at + 2:end] = props
        put(buf, pos + OFF_CRC, crc32(view[pos + CRC_START:end]))
        pos = end
    view.release()
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
    message_group: str = ""

    def system_properties(self) -> dict[str, str]:
        props = dict(self.properties)
        if self.tags:
            props[PROP_TAGS] = self.tags
        if self.keys:
            props[PROP_KEYS] = KEY_SEPARATOR.join(self.keys)
        if self.message_group:
            props[PROP_MESSAGE_GROUP] = self.message_group
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


# Indexes into a HEADER tuple (HEADER.unpack_from), for callers that keep the tuple whole.
H_TOTAL_SIZE, H_MAGIC, H_CRC, H_QUEUE_ID, H_FLAG, H_QUEUE_OFFSET, H_PHYSICAL_OFFSET = range(7)
H_SYS_FLAG, H_BORN_TIMESTAMP, H_BORN_HOST, H_STORE_TIMESTAMP, H_STORE_HOST = range(7, 12)
H_RECONSUME_TIMES, H_PREPARED_TXN_OFFSET, H_BODY_LEN = range(12, 15)


def checked_header(view: memoryview, pos: int, verify_crc: bool = True) -> tuple:
    """The HEADER fields of the record at `pos` after checking its framing: magic, sizes, the
    body/topic/properties lengths adding up to total_size, and (optionally) the CRC. Topic and
    properties are not decoded here; `topic_at`/`properties_at` do that (and check UTF-8)."""
    if len(view) - pos < HEADER_SIZE:
        raise RecordFormatError(f"truncated header at {pos}")
    header = HEADER.unpack_from(view, pos)
    total = header[0]
    if header[1] != MESSAGE_MAGIC:
        raise RecordFormatError(f"bad magic {header[1]:#x} at {pos}")
    end = pos + total
    if total < HEADER_SIZE + 3 or end > len(view):
        raise RecordFormatError(f"bad total_size {total} at {pos}")
    if verify_crc and record_crc32(view[pos + CRC_START:end]) != header[2]:
        raise RecordFormatError(f"CRC mismatch at {pos}")
    body_len = header[14]
    body_end = pos + HEADER_SIZE + body_len
    if body_len < 0 or body_end + 3 > end:
        raise RecordFormatError(f"bad body_len {body_len} at {pos}")
    topic_end = body_end + 1 + view[body_end]
    if topic_end + 2 > end:
        raise RecordFormatError(f"bad topic_len {view[body_end]} at {pos}")
    if topic_end + 2 + (view[topic_end] << 8 | view[topic_end + 1]) != end:
        raise RecordFormatError(f"field lengths do not add up to total_size at {pos}")
    return header


def scan_records(buf: bytes | bytearray | memoryview, *,
                 verify_crc: bool = True) -> list[tuple[int, tuple]]:
    """Check every record of a concatenation (a pull reply) in one pass and return
    [(position, HEADER fields)], decoding nothing else: the base of lazy views, which decode
    topic, properties and body only when asked (`topic_at`, `properties_at`, `body_at`).
    One C pass where `tidemq_speedups` is installed; RecordFormatError names a bad record."""
    if _scan_records_c is not None:
        found = _scan_records_c(buf, verify_crc, None)  # its own crc32: ISA-L's or zlib's
        if found is not None:
            return found
    return scan_records_py(buf, verify_crc=verify_crc)


def scan_records_py(buf: bytes | bytearray | memoryview, *,
                    verify_crc: bool = True) -> list[tuple[int, tuple]]:
    """scan_records in Python, the contract of the C version and its fallback.

    The loop repeats `checked_header`'s checks inline (a call per record is a tenth of the
    cost); a record that fails them is handed to `checked_header` for the precise error."""
    view = memoryview(buf)
    pos, end, found = 0, len(view), []
    unpack, crc32, append, magic = HEADER.unpack_from, record_crc32, found.append, MESSAGE_MAGIC
    while pos < end:
        if end - pos < HEADER_SIZE:
            checked_header(view, pos, verify_crc)
        header = unpack(view, pos)
        stop = pos + header[0]
        body_end = pos + HEADER_SIZE + header[14]
        if (header[1] != magic or header[0] < HEADER_SIZE + 3 or stop > end
                or header[14] < 0 or body_end + 3 > stop):
            checked_header(view, pos, verify_crc)
        topic_end = body_end + 1 + view[body_end]
        if (topic_end + 2 > stop or topic_end + 2 + (view[topic_end] << 8 | view[topic_end + 1])
                != stop or verify_crc and crc32(view[pos + CRC_START:stop]) != header[2]):
            checked_header(view, pos, verify_crc)
        append((pos, header))
        pos = stop
    return found


def body_at(buf: bytes | bytearray | memoryview, pos: int, header: tuple) -> bytes:
    """The body (a copy) of the checked record at `pos`."""
    start = pos + HEADER_SIZE
    return bytes(buf[start:start + header[14]])


def topic_at(buf: bytes | bytearray | memoryview, pos: int, header: tuple) -> str:
    """The topic of the checked record at `pos` (RecordFormatError if it is not UTF-8)."""
    at = pos + HEADER_SIZE + header[14]
    try:
        return str(buf[at + 1:at + 1 + buf[at]], "utf-8")
    except UnicodeDecodeError as exc:
        raise RecordFormatError(f"topic is not UTF-8 at {pos}") from exc


def properties_at(buf: bytes | bytearray | memoryview, pos: int, header: tuple) -> dict[str, str]:
    """The properties of the checked record at `pos` (RecordFormatError if not UTF-8)."""
    at = pos + HEADER_SIZE + header[14]
    at += 3 + buf[at]
    try:
        return decode_properties(buf[at:pos + header[0]])
    except UnicodeDecodeError as exc:
        raise RecordFormatError(f"properties are not UTF-8 at {pos}") from exc


def property_at(buf: bytes | bytearray | memoryview, pos: int, header: tuple,
                name: str) -> str | None:
    """One property of the checked record at `pos` (None if absent), the others not decoded:
    what the timer reads of every scheduled record. The last value wins, as in
    `properties_at`."""
    at = pos + HEADER_SIZE + header[14]
    at += 3 + buf[at]
    framed = b"\x02" + bytes(buf[at:pos + header[0]])
    found = framed.rfind(f"\x02{name}\x01".encode())
    if found < 0:
        return None
    start = found + len(name.encode()) + 2
    try:
        return framed[start:framed.index(b"\x02", start)].decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"property {name!r} is malformed at {pos}") from exc


def decode(buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True) -> Record:
    """Decode the record at `pos`; raises RecordFormatError if it is not a whole valid record."""
    view = memoryview(buf)
    header = checked_header(view, pos, verify_crc)
    return _record(view, pos, header)


def _record(view: memoryview, pos: int, header: tuple) -> Record:
    (total, _, _, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_host,
     store_ts, store_host, reconsume, prepared, body_len) = header
    topic = topic_at(view, pos, header)
    properties = properties_at(view, pos, header)
    return Record(
        total, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_host,
        store_ts, store_host, reconsume, prepared,
        view[pos + HEADER_SIZE:pos + HEADER_SIZE + body_len], topic, properties,
    )


def iter_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Iterator[Record]:
    """Decode a concatenation of records (a send batch or a pull reply)."""
    view = memoryview(buf)
    pos, end = 0, len(view)
    while pos < end:
        header = checked_header(view, pos, verify_crc)
        yield _record(view, pos, header)
        pos += header[0]


# Properties a re-targeted record carries (RocketMQ's MessageConst names where one exists).
PROP_RETRY_TOPIC = "RETRY_TOPIC"              # the topic the message was first sent to
PROP_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"  # its offset msg id there
PROP_FIRST_FAILURE_MS = "FIRST_FAILURE_MS"    # when a consumer first gave it back (ms)
PROP_NOT_BEFORE_MS = "NOT_BEFORE_MS"          # a consumer holds it until then (old retries)
# Scheduled delivery (docs/scheduled.md) and transactions (docs/transactions.md), RocketMQ's names.
PROP_DELAY = "DELAY"                          # delay level 1..18, set by the producer
PROP_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"    # exact delivery time (epoch ms), by the producer
PROP_TIMER_OUT_MS = "TIMER_OUT_MS"            # due time the broker computed (schedule topic)
PROP_REAL_TOPIC = "REAL_TOPIC"                # a scheduled / half message's own topic
PROP_REAL_QUEUE_ID = "REAL_QID"               # ... and its queue there
PROP_TRANSACTION_PREPARED = "TRAN_MSG"        # "true": sent as part of a transaction
PROP_PRODUCER_GROUP = "PGROUP"                # the group whose producers are checked back
# Idempotent sends (docs/idempotence.md): the producer whose unique ids the broker deduplicates;
# a restarted or promoted broker rebuilds its table from the records carrying it.
PROP_PRODUCER_ID = "PRODUCER_ID"
# What the broker deduplicates an idempotent record by when it is not the message's UNIQ_KEY:
# a revived pop's retry copy keeps its message's UNIQ_KEY (every delivery of a message is one
# message) but is deduplicated per revive, "<checkpoint>:<queue offset>" of the delivery.
PROP_IDEMPOTENCE_KEY = "IDEMPOTENCE_KEY"
# Sequenced idempotent sends (Kafka's idempotent producer, docs/idempotence.md): on a batch's
# first record, "<producer id>:<epoch>:<first sequence>:<last sequence>" of the whole batch.
PROP_PRODUCER_SEQUENCE = "PRODUCER_SEQUENCE"


def retarget(raw: bytes | bytearray | memoryview, topic: str, *, queue_id: int = 0,
             reconsume_times: int | None = None,
             set_properties: Mapping[str, str] | None = None,
             keep_properties: Mapping[str, str] | None = None,
             drop_properties: Sequence[str] = (), clear_sys_flags: int = 0,
             transaction_type: int | None = None) -> bytes:
    """The stored record `raw`, moved to `topic`/`queue_id` as a new record for the append path.

    The body is copied as bytes (never decoded or decompressed); the broker-stamped fields
    (queue offset, physical offset, store time and host) are zeroed for the store to stamp
    again; `set_properties` replace or add, `keep_properties` add only where the record has no
    value yet (an origin stays the first one across retries), `drop_properties` go, the
    `clear_sys_flags` bits are cleared and `transaction_type` replaces the sys_flag's
    transaction bits (a half message and its commit); the CRC is recomputed. Retries, dead
    letters, re-drives, pop revives, scheduled delivery and transactions all move a record
    through this."""
    view = memoryview(raw)
    header = checked_header(view, 0, verify_crc=False)
    body_len = header[H_BODY_LEN]
    at = HEADER_SIZE + body_len
    at += 3 + view[at]
    stored = bytes(view[at:])  # the encoded properties
    if keep_properties or drop_properties or _has_any(stored, set_properties or {}):
        props = properties_at(view, 0, header)
        for name, value in (keep_properties or {}).items():
            props.setdefault(name, value)
        props.update(set_properties or {})
        for name in drop_properties:
            props.pop(name, None)
        encoded = encode_properties(props)
    else:  # only new names: appended as bytes, nothing decoded (a scheduled move)
        encoded = stored + encode_properties(set_properties) if set_properties else stored
    body = view[HEADER_SIZE:HEADER_SIZE + body_len]
    sys_flag = header[H_SYS_FLAG] & ~clear_sys_flags
    if transaction_type is not None:
        sys_flag = sys_flag & ~TRANSACTION_TYPE_MASK | transaction_type & TRANSACTION_TYPE_MASK
    return encode(topic, body, properties=encoded, queue_id=queue_id,
                  flag=header[H_FLAG], sys_flag=sys_flag,
                  born_timestamp=header[H_BORN_TIMESTAMP], born_host=header[H_BORN_HOST],
                  reconsume_times=(header[H_RECONSUME_TIMES] if reconsume_times is None
                                   else reconsume_times),
                  prepared_txn_offset=header[H_PREPARED_TXN_OFFSET])


def _has_any(encoded: bytes, names: Mapping[str, str]) -> bool:
    """Whether encoded properties hold a value for any of `names`."""
    framed = b"\x02" + encoded
    return any(f"\x02{name}\x01".encode() in framed for name in names)


def with_reconsume_times(raw: bytes | bytearray | memoryview, reconsume_times: int) -> bytes:
    """A copy of the one record `raw` with its reconsume count replaced (CRC recomputed): what
    an orderly pop hands out again, the stored record untouched."""
    buf = bytearray(raw)
    _I32.pack_into(buf, OFF_RECONSUME_TIMES, reconsume_times)
    _U32.pack_into(buf, OFF_CRC, record_crc32(memoryview(buf)[CRC_START:]))
    return bytes(buf)
