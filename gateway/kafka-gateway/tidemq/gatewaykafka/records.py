"""Kafka records <-> TideMQ messages (docs/kafka.md, "One record"). No network here.

One Kafka record is one TideMQ message. The value is the body; what a TideMQ message cannot
hold as it is goes into reserved properties, binary-safe (base64) and lossless:

* `KAFKA_KEY`: the key (absent = a null key; "" = an empty key). A key that is UTF-8 and a
  valid TideMQ key (non-empty, no space) is also the message's key, so `tidemq message query`
  and native consumers see it.
* A key longer than KEY_IN_PROPERTIES_MAX bytes does not fit a message's properties (32 KiB
  in all, base64 taking 4/3): it travels at the head of the body instead, `KAFKA_KEY_SIZE`
  saying how many bytes, and `KAFKA_KEY_DIGEST` (base64 SHA-256) names it for compaction.
  Native consumers see such a body as key + value.
* `KAFKA_HEADERS`: the headers in order, duplicates kept: JSON `[[name, base64 | null], ...]`.
  This is what Fetch reads back. Each header whose value is UTF-8 is also a user property of
  its name (`header_properties`), so native consumers, SQL92 filters and the Spark source see
  it: the last header of a name decides (Kafka's `lastHeader`), a name the system reads
  (RESERVED_PROPERTY_NAMES, or `KAFKA_...`) is never copied, and copies that would leave
  less than PROPERTIES_HEADROOM of a message's 32 KiB of properties are not made at all.
* `KAFKA_VALUE`: "null" or "empty" when the value is one of those; the body is then one zero
  byte, since a TideMQ message never has an empty body.
* `KAFKA_TIMESTAMP`: the record's CreateTime (epoch ms). A topic whose definition sets
  `message.timestamp.type` to LogAppendTime reads with the message's store time instead.

A message a native producer sent reads back with its first key as the Kafka key, its user
properties as UTF-8 headers (and its trace context, when it has one, as a last `traceparent`
header, as a Kafka client's instrumentation writes it) and its born time as the timestamp.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard
from crc32c import crc32c
from kafka.errors import CorruptRecordError, UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c
from tidemq.client import Message, MessageExt, ProducerSequence
from tidemq.client.message import SYSTEM_PROPERTIES, reply_positions
from tidemq.common import record as _record
from tidemq.gatewaykafka import metrics

try:
    from tidemq_speedups import kafka_records as _kafka_records_c
except ImportError:  # the C speedups are not built: the Python mapping does it all
    _kafka_records_c = None

PROP_KEY = "KAFKA_KEY"
PROP_HEADERS = "KAFKA_HEADERS"
PROP_VALUE = "KAFKA_VALUE"
PROP_TIMESTAMP = "KAFKA_TIMESTAMP"
PROP_KEY_SIZE = "KAFKA_KEY_SIZE"       # a long key's bytes at the head of the body
PROP_KEY_DIGEST = "KAFKA_KEY_DIGEST"   # ... and its SHA-256 (base64): compaction's key
RESERVED = frozenset({PROP_KEY, PROP_HEADERS, PROP_VALUE, PROP_TIMESTAMP, PROP_KEY_SIZE,
                      PROP_KEY_DIGEST})
KEY_IN_PROPERTIES_MAX = 12 * 1024      # base64: 16 KiB of the 32 KiB of properties
# Names a header is never copied to (header_properties): every property TideMQ itself sets or
# reads (shared record.PROP_*, the SDK's system properties, gateway-grpc's and the HTTP
# gateway's own) and, for this gateway's present and later ones, every name starting KAFKA_.
RESERVED_PROPERTY_NAMES = frozenset(
    {value for name, value in vars(_record).items() if name.startswith("PROP_")}
    | SYSTEM_PROPERTIES | RESERVED
    | {"RMQ_MESSAGE_ID", "RMQ_DELIVERY_MS", "GATEWAY_TRANSACTION_ID"})
RESERVED_PREFIX = "KAFKA_"
# What the copies must leave free of a message's properties: the producer's own (unique id,
# trace context, compression, sequence: about 200 bytes) and what a retry, a dead letter or a
# scheduled move adds later (origin topic and id, times), so a copy never makes a message
# that cannot be stored or moved.
PROPERTIES_HEADROOM = 1024
NULL, EMPTY = "null", "empty"
PLACEHOLDER_BODY = b"\x00"   # the body of a null or empty value (docs/kafka.md)

# The v2 record batch header (Kafka's DefaultRecordBatch): offsets of the fields used here.
BATCH_OVERHEAD = 61          # base offset .. records count, the smallest batch
LENGTH_OFFSET = 8            # int32 batch length, after the int64 base offset
MAGIC_OFFSET = 16
CRC_OFFSET = 17              # uint32 CRC32C of everything from the attributes on
ATTRIBUTES_OFFSET = 21       # int16: the codec in its low three bits
MAX_TIMESTAMP_OFFSET = 35    # int64, after last offset delta and first timestamp
LOG_APPEND_TIME_FLAG = 0x08  # the attributes' timestamp type bit
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
# the v2 batch header, as kafka-python's DefaultRecordBatchBuilder writes it
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
SUPPORTED_CODECS = frozenset({CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD})
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
XERIAL_HEADER = b"\x82SNAPPY\x00"   # the Java client's snappy framing (then 8 bytes, blocks)


class RecordError(ValueError):
    """A produced record set Kafka would refuse; `kafka_error` names Kafka's error code."""

    def __init__(self, kafka_error: str, message: str) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    records: list[KafkaRecord]
    producer_id: int
    producer_epoch: int
    base_sequence: int


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def split_batches(record_set: bytes | memoryview) -> Iterator[memoryview]:
    """Each v2 batch of a produced record set; CORRUPT_MESSAGE for a torn or older format."""
    view = memoryview(record_set)
    pos = 0
    while pos < len(view):
        if len(view) - pos < BATCH_OVERHEAD:
            raise RecordError("CORRUPT_MESSAGE", "a record batch is cut short")
        (length,) = struct.unpack_from(">i", view, pos + LENGTH_OFFSET)
        end = pos + LENGTH_OFFSET + 4 + length
        if length < BATCH_OVERHEAD - 12 or end > len(view):
            raise RecordError("CORRUPT_MESSAGE", f"a record batch claims {length} bytes")
        if view[pos + MAGIC_OFFSET] != 2:
            raise RecordError("UNSUPPORTED_VERSION",
                              f"record format v{view[pos + MAGIC_OFFSET]}: only v2 is accepted")
        yield view[pos:end]
        pos = end


def decode_batch(raw: bytes | memoryview, *, max_uncompressed: int) -> ProducedBatch:
    """The records of one v2 batch, its CRC32C checked and its codec undone."""
    batch = DefaultRecordBatch(raw)
    if not batch.validate_crc():
        raise RecordError("CORRUPT_MESSAGE", "record batch CRC32C mismatch")
    if batch.is_control_batch or batch.is_transactional:
        raise RecordError("INVALID_RECORD", "transactional batches are not accepted")
    if batch.compression_type not in SUPPORTED_CODECS:
        raise RecordError("UNSUPPORTED_COMPRESSION_TYPE",
                          f"compression type {batch.compression_type} is not Kafka's")
    if batch.compression_type != CODEC_NONE:
        # undone here, never past `max_uncompressed` (a small batch may inflate to gigabytes),
        # and handed to the library as the same batch uncompressed (the CRC is checked above)
        raw = bytes(raw)
        try:
            records_bytes = decompress(batch.compression_type, raw[BATCH_OVERHEAD:],
                                       max_uncompressed)
        except RecordError:
            raise
        except Exception as exc:   # each codec library raises its own errors
            raise RecordError("CORRUPT_MESSAGE", f"{CODEC_NAMES[batch.compression_type]} "
                              f"records do not decompress: {exc}") from None
        header = bytearray(raw[:BATCH_OVERHEAD])
        struct.pack_into(">i", header, LENGTH_OFFSET, BATCH_OVERHEAD - 12 + len(records_bytes))
        attributes = struct.unpack_from(">h", header, ATTRIBUTES_OFFSET)[0]
        struct.pack_into(">h", header, ATTRIBUTES_OFFSET, attributes & ~0x07)
        batch = DefaultRecordBatch(bytes(header) + records_bytes)
    records, size = [], 0
    try:
        for record in batch:
            size += len(record.value or b"") + len(record.key or b"")
            if size > max_uncompressed:
                raise RecordError("MESSAGE_TOO_LARGE",
                                  f"the batch holds more than {max_uncompressed} bytes")
            records.append(KafkaRecord(
                None if record.key is None else bytes(record.key),
                None if record.value is None else bytes(record.value),
                tuple((name, None if value is None else bytes(value))
                      for name, value in record.headers),
                record.timestamp))
    except (CorruptRecordError, UnsupportedCodecError, UnicodeDecodeError, struct.error,
            IndexError, ValueError, OSError, EOFError) as exc:
        if isinstance(exc, RecordError):
            raise
        raise RecordError("CORRUPT_MESSAGE", f"record batch does not decode: {exc}") from None
    if len(records) != batch.records_count:
        raise RecordError("CORRUPT_MESSAGE", "record count does not match the batch header")
    return ProducedBatch(records, batch.producer_id, batch.producer_epoch, batch.base_sequence)


def decompress(codec: int, data: bytes, limit: int) -> bytes:
    """A batch's records decompressed, MESSAGE_TOO_LARGE past `limit` bytes (found while
    decompressing: no more than `limit` + a block is ever produced)."""
    if codec == CODEC_GZIP:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(data, limit + 1)
    elif codec == CODEC_SNAPPY:
        out = _snappy(data, limit)
    elif codec == CODEC_LZ4:
        out = lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=limit + 1)
    else:
        chunks, size = [], 0
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            while size <= limit and (chunk := reader.read(min(limit + 1 - size, 1 << 20))):
                chunks.append(chunk)
                size += len(chunk)
        out = b"".join(chunks)
    if len(out) > limit:
        raise RecordError("MESSAGE_TOO_LARGE", f"the batch decompresses past {limit} bytes")
    return out


def _snappy(data: bytes, limit: int) -> bytes:
    """Raw snappy (librdkafka), or the Java client's xerial framing: blocks of [int32 size,
    raw snappy]; each block's size is read from its header before it is decompressed."""
    if not data.startswith(XERIAL_HEADER):
        blocks = [data]
    else:
        blocks, pos = [], 16
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            if size < 0 or pos + 4 + size > len(data):
                raise RecordError("CORRUPT_MESSAGE", "a snappy block is cut short")
            blocks.append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
    out, total = [], 0
    for block in blocks:
        total += cramjam.snappy.decompress_raw_len(block)
        if total > limit:
            raise RecordError("MESSAGE_TOO_LARGE", f"the batch decompresses past {limit} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
    return b"".join(out)


def batches_sequence(batches: Sequence[ProducedBatch]) -> ProducerSequence | None:
    """The sequence a partition's batches are sent under (the brokers check it: a repeat is
    stored once, a gap refused), None for a producer that is not idempotent. Several batches
    of one partition must be one producer's consecutive sequences (one send)."""
    if not batches or batches[0].producer_id < 0:
        if any(b.producer_id >= 0 for b in batches):
            raise RecordError("INVALID_RECORD", "idempotent and plain batches mixed")
        return None
    first = batches[0]
    expected = first.base_sequence
    for batch in batches:
        if (batch.producer_id, batch.producer_epoch) != (first.producer_id,
                                                          first.producer_epoch):
            raise RecordError("INVALID_RECORD", "batches of several producers in one partition")
        if batch.base_sequence != expected:
            raise RecordError("OUT_OF_ORDER_SEQUENCE_NUMBER",
                              f"batch sequence {batch.base_sequence}, expected {expected}")
        expected = (expected + len(batch.records)) % (1 << 31)
    if first.base_sequence < 0 or first.producer_epoch < 0:
        raise RecordError("INVALID_RECORD", "an idempotent batch without sequence or epoch")
    return ProducerSequence(first.producer_id, first.producer_epoch, first.base_sequence)


def to_message(topic: str, record: KafkaRecord) -> Message:
    """The TideMQ message of one Kafka record (module docstring)."""
    properties = {PROP_TIMESTAMP: str(record.timestamp)}
    keys: list[str] = []
    body = record.value
    if record.key is not None and len(record.key) > KEY_IN_PROPERTIES_MAX:
        properties[PROP_KEY_SIZE] = str(len(record.key))
        properties[PROP_KEY_DIGEST] = _b64(hashlib.sha256(record.key).digest())
        if not body:
            properties[PROP_VALUE] = NULL if body is None else EMPTY
        if record.headers:
            _add_headers(properties, record.headers, keys, 0)
        return Message(topic, record.key + (body or b""), properties=properties)
    if record.key is not None:
        properties[PROP_KEY] = _b64(record.key)
        try:
            text = record.key.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if text and " " not in text and text.isprintable():
            keys.append(text)
    if not body:
        properties[PROP_VALUE] = NULL if body is None else EMPTY
        body = PLACEHOLDER_BODY
    if record.headers:
        _add_headers(properties, record.headers, keys,
                     0 if record.key is None else len(record.key))
    return Message(topic, body, keys=keys, properties=properties)


def _add_headers(properties: dict[str, str], headers: Sequence[tuple[str, bytes | None]],
                 keys: list[str], key_size: int) -> None:
    """KAFKA_HEADERS, then the headers' copies as user properties (header_properties) when
    they fit. The copies take at most KAFKA_HEADERS' length (each header there is its name,
    JSON-escaped, at least its UTF-8 bytes, its value in base64, and 6 bytes more), so for most
    records a bound on every property's size settles it without adding sizes up."""
    text = properties[PROP_HEADERS] = json.dumps(
        [[name, None if value is None else _b64(value)] for name, value in headers],
        separators=(",", ":"))
    copies = header_properties(headers)
    if not copies:
        return
    if 2 * len(text) + 3 * key_size + _OTHER_PROPERTIES_MAX > _COPIES_LIMIT and \
            _used(properties, keys) + _size(copies) > _COPIES_LIMIT:
        _SKIPPED_SIZE.inc()
        return
    properties.update(copies)


# the gateway's properties beside KAFKA_HEADERS' JSON and the key (at most 4/3 of it in
# KAFKA_KEY, once more in KEYS): names, a timestamp, a value kind, a long key's size and digest
_OTHER_PROPERTIES_MAX = 256
_COPIES_LIMIT = _record.MAX_PROPERTIES_SIZE - PROPERTIES_HEADROOM


def _used(properties: dict[str, str], keys: list[str]) -> int:
    """The encoded bytes of `properties` (ASCII: base64, decimal, JSON as json.dumps escapes
    it) and of the KEYS property `keys` make."""
    used = sum(len(name) + len(value) + 2 for name, value in properties.items())
    return used + (len(keys[0].encode()) + 6 if keys else 0)


def _size(copies: dict[str, str]) -> int:
    return sum(len(name.encode()) + len(text.encode()) + 2 for name, text in copies.items())


_SKIPPED_RESERVED = metrics.HEADER_PROPERTIES_SKIPPED.labels(reason="reserved_name")
_SKIPPED_NOT_TEXT = metrics.HEADER_PROPERTIES_SKIPPED.labels(reason="not_utf8")
_SKIPPED_SIZE = metrics.HEADER_PROPERTIES_SKIPPED.labels(reason="size")
_NAME_OK: dict[str, bool] = {}   # header names seen: whether each may be a property
_NAME_CACHE_MAX = 4096


def _copyable_name(name: str) -> bool:
    ok = bool(name) and name not in RESERVED_PROPERTY_NAMES and \
        not name.startswith(RESERVED_PREFIX) and "\x01" not in name and "\x02" not in name
    if len(_NAME_OK) < _NAME_CACHE_MAX:
        _NAME_OK[name] = ok
    return ok


def header_properties(headers: Sequence[tuple[str, bytes | None]]) -> dict[str, str]:
    """The user properties a record's headers are also stored as: each header's UTF-8 value
    under its name, the last header of a name deciding (Kafka's `lastHeader`: a last one that
    is null or binary leaves the name out). Not copied, and counted in
    `tidemq_gateway_kafka_header_properties_skipped_total{reason}`: a reserved name
    (RESERVED_PROPERTY_NAMES, `KAFKA_...`, or one holding the properties' separators \\x01
    \\x02: reserved_name) and a value that is not UTF-8 text (binary, or holding a separator:
    not_utf8; a null one is not counted). to_message then makes none of a record's copies
    when they would leave less than PROPERTIES_HEADROOM of the 32 KiB of properties (size,
    once per record). KAFKA_HEADERS keeps every header either way."""
    copies: dict[str, str] = {}
    known = _NAME_OK
    for name, value in headers:
        ok = known.get(name)
        if ok is None:
            ok = _copyable_name(name)
        if not ok:
            _SKIPPED_RESERVED.inc()
        elif value is None:
            copies.pop(name, None)
        else:
            try:
                text = value.decode()
            except UnicodeDecodeError:
                text = "\x01"
            if "\x01" in text or "\x02" in text:   # str's `in`: a tenth of bytes' here
                _SKIPPED_NOT_TEXT.inc()
                copies.pop(name, None)
            else:
                copies[name] = text
    return copies


def from_message(message: MessageExt) -> KafkaRecord:
    """The Kafka record a stored message reads as (module docstring)."""
    properties = message.properties
    if PROP_TIMESTAMP not in properties:   # a native producer's message
        keys = message.keys
        key = keys[0].encode() if keys else None
        user = message.user_properties
        headers = tuple((name, value.encode()) for name, value in sorted(user.items()))
        traced = message.trace_carrier.get("traceparent")
        if traced and "traceparent" not in user:   # its trace goes on in Kafka consumers
            headers += (("traceparent", traced.encode()),)
        return KafkaRecord(key, message.body, headers, message.born_timestamp)
    value_kind = properties.get(PROP_VALUE)
    body = message.body
    raw_key, key_size = properties.get(PROP_KEY), properties.get(PROP_KEY_SIZE)
    try:
        if key_size is not None:   # a long key at the head of the body
            size = int(key_size)
            if not KEY_IN_PROPERTIES_MAX < size <= len(body):
                raise ValueError(f"{PROP_KEY_SIZE} {size} does not fit the body")
            key, body = body[:size], body[size:]
        else:
            key = None if raw_key is None else base64.b64decode(raw_key)
        headers = tuple((name, None if value is None else base64.b64decode(value))
                        for name, value in json.loads(properties.get(PROP_HEADERS, "[]")))
        timestamp = int(properties[PROP_TIMESTAMP])
    except (ValueError, TypeError, binascii.Error):
        # written by someone else than this gateway: read what the message itself says
        key, headers, timestamp, body = None, (), message.born_timestamp, message.body
    value = None if value_kind == NULL else b"" if value_kind == EMPTY else body
    return KafkaRecord(key, value, headers, timestamp)


def timestamp_of(message: MessageExt) -> int:
    """The Kafka (CreateTime) timestamp a stored message reads as, as from_message gives it,
    from its one property: nothing else of the message is decoded."""
    raw = message.properties.get(PROP_TIMESTAMP)
    if raw is None:
        return message.born_timestamp
    try:
        return int(raw)
    except ValueError:
        return message.born_timestamp


RECORD_OVERHEAD = 64   # a v2 record's own fields, at most, beside its key, value and headers


def answered_size(message: MessageExt) -> int:
    """At least the bytes `message` takes as a record of a Fetch answer (its body holds the
    value, and a long key; the key and headers properties are base64, longer than the raw)."""
    properties = message.properties
    return (len(message.body) + len(properties.get(PROP_KEY, ""))
            + len(properties.get(PROP_HEADERS, "")) + RECORD_OVERHEAD)


def within_bytes(messages: Sequence[MessageExt], max_bytes: int,
                 log_append_time: bool = False) -> Sequence[MessageExt]:
    """The longest prefix of `messages` whose records fit `max_bytes` (the first always, as
    Kafka answers a record larger than the limit alone), a batch header counted for each
    batch encode_messages makes (a run of consecutive offsets, and of one store time with
    `log_append_time`)."""
    used, follows, stored = 0, None, None
    for count, message in enumerate(messages):
        offset = message.queue_offset
        new_batch = offset != follows or (log_append_time
                                          and message.store_timestamp != stored)
        used += answered_size(message) + (BATCH_OVERHEAD if new_batch else 0)
        follows, stored = offset + 1, message.store_timestamp
        if count and used > max_bytes:
            return messages[:count]
    return messages


def encode_batch(base_offset: int, records: Sequence[KafkaRecord],
                 log_append_time: int | None = None) -> bytes:
    """One uncompressed v2 batch of consecutive offsets from `base_offset`. With
    `log_append_time` (epoch ms) the batch says LogAppendTime and carries that time as its
    max timestamp, which clients then give every record (as Kafka's broker writes it)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_NONE,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=2 ** 31 - 1)
    for delta, record in enumerate(records):
        builder.append(delta, timestamp=record.timestamp, key=record.key, value=record.value,
                       headers=list(record.headers))
    raw = builder.build()
    struct.pack_into(">q", raw, 0, base_offset)   # not covered by the CRC (it starts later)
    if log_append_time is not None:
        (attributes,) = struct.unpack_from(">h", raw, ATTRIBUTES_OFFSET)
        struct.pack_into(">h", raw, ATTRIBUTES_OFFSET, attributes | LOG_APPEND_TIME_FLAG)
        struct.pack_into(">q", raw, MAX_TIMESTAMP_OFFSET, log_append_time)
        struct.pack_into(">I", raw, CRC_OFFSET, calc_crc32c(bytes(raw[ATTRIBUTES_OFFSET:])))
    return bytes(raw)


def encode_messages(messages: Sequence[MessageExt], log_append_time: bool = False) -> bytes:
    """The record set of a fetch: one batch per run of consecutive queue offsets (and, for a
    LogAppendTime topic, of one store time: the batch carries it)."""
    out, run, base, stored = [], [], -1, -1
    for message in messages:
        if run and (message.queue_offset != base + len(run)
                    or (log_append_time and message.store_timestamp != stored)):
            out.append(encode_batch(base, run, stored if log_append_time else None))
            run = []
        if not run:
            base, stored = message.queue_offset, message.store_timestamp
        run.append(from_message(message))
    if run:
        out.append(encode_batch(base, run, stored if log_append_time else None))
    return b"".join(out)


def encode_fetched(messages: Sequence[MessageExt], max_bytes: int,
                   log_append_time: bool = False) -> bytes:
    """A Fetch's record set for one partition's pulled `messages`, within `max_bytes` (the
    first record always): `encode_messages` of `within_bytes`, or the same batches built in
    C (`tidemq_speedups.kafka_records`, per record no Python at all) when every message is
    one a Kafka client produced without a long key, its header names plain ASCII, as most are. The C path keeps
    to `max_bytes` in the batches' exact sizes, so it may answer more records than the Python
    path's estimate; for the records it answers the bytes are the same."""
    if _kafka_records_c is not None:
        fast = _encode_fetched_c(messages, max_bytes, log_append_time)
        if fast is not None:
            return fast
    return encode_messages(within_bytes(messages, max_bytes, log_append_time),
                           log_append_time)


def _encode_fetched_c(messages: Sequence[MessageExt], max_bytes: int,
                      log_append_time: bool) -> bytes | None:
    held = reply_positions(messages)
    if held is None:
        return None
    buf, positions = held
    out: list[bytes] = []
    used = done = 0
    while done < len(positions):
        made = _kafka_records_c(buf, positions[done], len(positions) - done, max_bytes - used,
                                log_append_time, not out)
        if made is None:
            return None
        blob, count, base, first_ts, max_ts, stored, last_pos, _ = made
        if not count:
            break
        if positions[done + count - 1] != last_pos:   # not the records `messages` hold
            return None
        header = bytearray(BATCH_HEADER.pack(
            base, BATCH_OVERHEAD - LENGTH_OFFSET - 4 + len(blob), 0, 2, 0,
            LOG_APPEND_TIME_FLAG if log_append_time else 0, count - 1, first_ts,
            stored if log_append_time else max_ts, -1, -1, -1, count))
        struct.pack_into(">I", header, CRC_OFFSET,
                         crc32c(blob, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:])))
        out += (header, blob)
        used += len(header) + len(blob)
        done += count
    return b"".join(out)
