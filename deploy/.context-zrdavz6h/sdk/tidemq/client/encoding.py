"""Producer messages → one buffer of CommitLog records, in one pass over the batch.

Why a module of its own: encoding was most of a producer's CPU (a validated copy of every
message, a properties dict, a record object and a join per message). Here the topic is checked
once per batch, properties are built as one string per message, unique ids come from one
clock read, and every record is packed into a single preallocated buffer
(`record.encode_batch`). The record bytes are exactly those of `record.encode_message`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tidemq.client import compression as codecs
from tidemq.client.message import Message, delay_property, validate_message_group
from tidemq.common import errors, record
from tidemq.common.topic_names import validate_topic_name

_NV, _SEP = "\x01", "\x02"
_TAGS = record.PROP_TAGS + _NV
_KEYS = record.PROP_KEYS + _NV
_UNIQ = record.PROP_UNIQ_KEY + _NV
_GROUP = record.PROP_MESSAGE_GROUP + _NV
_SYSTEM = frozenset({record.PROP_TAGS, record.PROP_KEYS, record.PROP_UNIQ_KEY,
                     record.PROP_TRACE_CONTEXT, record.PROP_COMPRESSION,
                     record.PROP_MESSAGE_GROUP})


class BatchEncoder:
    """Encodes batches of one topic for one producer (its size limit, codec and host)."""

    def __init__(self, *, max_message_size: int, compression: str, compress_threshold: int,
                 born_host: bytes) -> None:
        self.max_message_size = max_message_size
        self.compression = compression
        self.compress_threshold = compress_threshold
        self.born_host = born_host

    def encode(self, messages: Sequence[Message],
               traceparent: str = "") -> tuple[bytes, list[str]]:
        """(records, unique ids). Raises the precise error for the first invalid message."""
        raw, unique_ids, _ = self.encode_marked(messages, traceparent)
        return raw, unique_ids

    def encode_marked(self, messages: Sequence[Message],
                      traceparent: str = "") -> tuple[bytes, list[str], bool]:
        """(records, unique ids, scheduled): `scheduled` if a message has a delay, so the
        SendRequest is marked and the broker looks for delays in this batch only."""
        scheduled = False
        topic = messages[0].topic
        validate_topic_name(topic)
        unique_ids = record.new_unique_ids(len(messages))
        extra = f"{record.PROP_TRACE_CONTEXT}{_NV}{traceparent}{_SEP}" if traceparent else ""
        compressed_extra = f"{extra}{record.PROP_COMPRESSION}{_NV}{self.compression}{_SEP}"
        limit, threshold = self.max_message_size, self.compress_threshold
        compress = self.compression != codecs.NONE
        items = []
        for message, unique_id in zip(messages, unique_ids, strict=True):
            body = message.body
            if type(body) is not bytes:
                body = _as_bytes(message)
            if not 0 < len(body) <= limit or message.topic != topic:
                self._refuse(message, topic)
            sys_flag, tail = 0, extra
            if compress and len(body) > threshold:
                body, sys_flag = codecs.compress(body, self.compression), record.SYS_FLAG_COMPRESSED
                tail = compressed_extra
            text = (_properties(message, unique_id) if message.properties or message.keys
                    or message.tags or message.message_group
                    else f"{_UNIQ}{unique_id}{_SEP}") + tail
            if message.scheduled:
                text += delay_property(message)
                sys_flag |= record.SYS_FLAG_SCHEDULED
                scheduled = True
            items.append((body, text.encode(), sys_flag))
        try:
            raw = record.encode_batch(topic, items, born_timestamp=int(time.time() * 1000),
                                      born_host=self.born_host)
        except record.RecordFormatError as exc:
            raise errors.InvalidArgument(str(exc), code="INVALID_MESSAGE") from None
        return raw, unique_ids, scheduled

    def _refuse(self, message: Message, topic: str) -> None:
        if message.topic != topic:
            raise errors.InvalidArgument(
                f"a batch must hold one topic, got {sorted({topic, message.topic})}")
        message.validate(self.max_message_size)  # raises the precise error


def _as_bytes(message: Message) -> bytes:
    if not isinstance(message.body, bytes | bytearray | memoryview):
        message.validate()  # INVALID_MESSAGE: body must be bytes
    return bytes(message.body)


def _properties(message: Message, unique_id: str) -> str:
    """name\x01value\x02 for the sender's properties, tags, keys and the unique id."""
    props = message.properties
    if props and not _SYSTEM.isdisjoint(props):  # rare: merge as a dict, system names win
        props = {**props, **_system(message, unique_id)}
        return "".join(f"{name}{_NV}{value}{_SEP}" for name, value in _checked(props).items())
    text = "".join(f"{name}{_NV}{value}{_SEP}" for name, value in props.items()) if props else ""
    if message.tags:
        text = f"{text}{_TAGS}{message.tags}{_SEP}"
    if message.keys:
        text = f"{text}{_KEYS}{_keys(message)}{_SEP}"
    if message.message_group:
        text = f"{text}{_GROUP}{_group(message)}{_SEP}"
    fields = len(props) + bool(message.tags) + bool(message.keys) + bool(message.message_group)
    if text.count(_NV) != fields or text.count(_SEP) != fields:
        _checked({**props, **_system(message, unique_id)})  # raises, naming the property
    return f"{text}{_UNIQ}{unique_id}{_SEP}"


def _system(message: Message, unique_id: str) -> dict[str, str]:
    system = {}
    if message.tags:
        system[record.PROP_TAGS] = message.tags
    if message.keys:
        system[record.PROP_KEYS] = _keys(message)
    if message.message_group:
        system[record.PROP_MESSAGE_GROUP] = _group(message)
    system[record.PROP_UNIQ_KEY] = unique_id
    return system


def _checked(props: dict[str, str]) -> dict[str, str]:
    try:
        record.encode_properties(props)
    except ValueError as exc:
        raise errors.InvalidArgument(str(exc), code="INVALID_MESSAGE") from None
    return props


def _keys(message: Message) -> str:
    for key in message.keys:
        if not key or record.KEY_SEPARATOR in key:
            message.validate()  # the precise INVALID_MESSAGE error
    return record.KEY_SEPARATOR.join(message.keys)


def _group(message: Message) -> str:
    validate_message_group(message.message_group)  # INVALID_MESSAGE for a bad one
    return message.message_group
