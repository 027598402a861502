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
from typing import TYPE_CHECKING, Any

from tidemq.client.message import Message, MessageExt
from tidemq.common.errors import InvalidArgument
from tidemq.common.topic_names import validate_topic_name

if TYPE_CHECKING:
    from tidemq.gateway.bodies import SendMessage, SendRequest


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


def body_json(body: bytes) -> dict[str, str]:
    """UTF-8 text as is; anything else as base64 with "encoding": "base64"."""
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "encoding": "base64"}


def message_json(message: MessageExt) -> dict[str, Any]:
    return {
        **body_json(message.body),
        "tag": message.tags,
        "keys": message.keys,
        "properties": message.user_properties,
        "queue_offset": message.queue_offset,
        "msg_id": message.msg_id,
        "unique_id": message.unique_id,
        "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp,
        "reconsume_times": message.reconsume_times,
        "message_group": message.message_group,
    }
