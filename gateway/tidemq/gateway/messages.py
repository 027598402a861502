"""Messages over HTTP: a validated send request's messages to client Messages, and a
received message to its JSON shape (no Flask here).

The JSON shape of every request is checked by its declared schema (tidemq.gateway.bodies);
what is left here is what a schema cannot say (a base64 body that does not decode). What a
broker would refuse in a message (empty or oversized body, a bad key or property) is checked
once, by the client's encoder, when the backend sends it. Every rejection is an
InvalidArgument / PayloadTooLarge with a precise code and a sentence, so bad input is always a
4xx, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from tidemq.client.message import SYSTEM_PROPERTIES, Message, MessageExt, decode_records
from tidemq.client.simple_consumer import ReceivedBatch
from tidemq.common.errors import InvalidArgument
from tidemq.common.record import PROP_MESSAGE_GROUP, PROP_RETRY_TOPIC
from tidemq.common.topic_names import validate_topic_name

if TYPE_CHECKING:
    from tidemq.client import ReceivedMessage
    from tidemq.gateway.bodies import SendMessage, SendRequest

try:  # the pop's JSON written in C from the reply's records (native/), optional
    from tidemq_speedups import popped_json as _popped_json_c
except ImportError:
    _popped_json_c = None

# The properties a message's JSON does not list (`_shown`), as the C rendering takes them.
_SYSTEM_NAMES = tuple(sorted(name.encode() for name in SYSTEM_PROPERTIES))


def _decode_body(item: SendMessage, index: int) -> bytes:
    if item.encoding == "base64":
        try:
            return base64.b64decode(item.body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(f"messages[{index}].body is not valid base64",
                                  code="INVALID_MESSAGE") from None
    try:
        return item.body.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"messages[{index}].body is not valid Unicode text; "
                              'send bytes as base64 with "encoding": "base64"',
                              code="INVALID_MESSAGE") from None


def parse_messages(topic: str, request: SendRequest, now_ms: int | None = None) -> list[Message]:
    """A validated send request (tidemq.gateway.bodies.SendRequest) → Messages of `topic`;
    `delay_ms` counts from `now_ms` (when the request arrived)."""
    validate_topic_name(topic)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return [Message(topic, _decode_body(item, index), tags=item.tag or item.tags,
                    keys=item.all_keys, properties=item.properties,
                    message_group=item.message_group, deliver_at_ms=item.deliver_at_ms(now_ms))
            for index, item in enumerate(request.messages)]


def _body_and_encoding(body: bytes) -> tuple[str, str | None]:
    """UTF-8 text as is; anything else as base64, with "encoding": "base64"."""
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def _shown(message: MessageExt, receipt_handle: str | None) -> dict[str, Any]:
    """A message's JSON shape, built in one pass over the message (a pop answers 32 of them and
    this was over a third of its view's CPU): the header and the decoded fields read once
    (`MessageExt.fields`), the user's properties and the message group taken from them, as
    `user_properties` and `message_group` do, and the dict made in one display. With a receipt
    handle, a popped message's fields follow."""
    header, (topic, properties, tags, keys, unique_id, msg_id) = message.fields()
    text, encoding = _body_and_encoding(message.body)
    shown = {"body": text, "tag": tags, "keys": keys,
             "properties": {k: v for k, v in properties.items() if k not in SYSTEM_PROPERTIES},
             "queue_offset": header[5], "msg_id": msg_id or message.msg_id,
             "unique_id": unique_id, "born_timestamp": header[8], "store_timestamp": header[10],
             "reconsume_times": header[12],
             "message_group": properties.get(PROP_MESSAGE_GROUP, "")}
    if receipt_handle is not None:
        shown["topic"] = properties.get(PROP_RETRY_TOPIC) or topic
        shown["broker_name"] = message.broker_name
        shown["receipt_handle"] = receipt_handle
        shown["delivery_count"] = header[12] + 1
    return {"body": text, "encoding": encoding, **shown} if encoding else shown


def message_json(message: MessageExt) -> dict[str, Any]:
    """A message's JSON shape (`_shown`)."""
    return _shown(message, None)


def received_json(message: MessageExt, receipt_handle: str) -> dict[str, Any]:
    """A popped message: its JSON shape, the topic it was sent to, its broker group, receipt
    handle and delivery count (1 on the first delivery)."""
    return _shown(message, receipt_handle)


def popped_json(popped: Sequence[ReceivedMessage]) -> bytes | None:
    """A pop's messages as the JSON array `received_json` of each gives under orjson, written
    straight from the Pop reply's records by the C `popped_json` when `popped` is a
    ReceivedBatch and the extension is built (the array was about 115 µs of a pop's 32
    messages in Python: docs/http-api.md, "What a request costs"); None otherwise, or when
    the C declines a record (compressed, not UTF-8): the caller renders the messages."""
    if _popped_json_c is None or type(popped) is not ReceivedBatch:
        return None
    return _popped_json_c(popped.records, popped.broker_name, popped.receipt_handles,
                          _SYSTEM_NAMES)


def popped_json_py(records: bytes, broker_name: str, receipt_handles: Sequence[str]) -> bytes:
    """The contract of the C `popped_json` (tidemq_speedups): the JSON array, as orjson writes
    it, of `received_json` of each message of the Pop reply's `records` from `broker_name`
    with its receipt handle (RecordFormatError for a record that is not valid, ValueError
    unless there is one handle per record)."""
    return orjson.dumps([received_json(message, handle) for message, handle in zip(
        decode_records(records, broker_name), receipt_handles, strict=True)])
