"""HTTP request parsing and validation, and the JSON shape of messages (no Flask here).

Every rejection is an InvalidArgument / PayloadTooLarge with a precise code and a sentence,
so bad input is always a 4xx, never a 500. This checks the JSON shape only; what a broker
would refuse in a message (empty or oversized body, a bad key or property) is checked once,
by the client's encoder, when the backend sends it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from tidemq.client.message import Message, MessageExt, validate_topic_name
from tidemq.common.errors import InvalidArgument

MAX_QUEUES = 1024
MAX_BATCH = 1000
ENCODINGS = ("utf-8", "base64")


def parse_json(raw: bytes) -> Any:
    if not raw or not raw.strip():
        raise InvalidArgument("the request body is empty; send a JSON document",
                              code="EMPTY_BODY")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"the request body is not valid JSON: {exc}",
                              code="MALFORMED_JSON") from None


def _object(document: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(document, dict):
        raise InvalidArgument(f"{what} must be a JSON object", code="INVALID_REQUEST")
    return document


def parse_topic_create(document: Any) -> tuple[str, int]:
    """{"name": str, "queues": int 1..1024} → (name, queues)."""
    body = _object(document, "the request body")
    name = body.get("name")
    if not isinstance(name, str):
        raise InvalidArgument('"name" (a string) is required', code="INVALID_TOPIC")
    validate_topic_name(name)
    queues = body.get("queues", 4)
    if isinstance(queues, bool) or not isinstance(queues, int) or not 1 <= queues <= MAX_QUEUES:
        raise InvalidArgument(f'"queues" must be an integer 1..{MAX_QUEUES}, got {queues!r}',
                              code="INVALID_QUEUE_COUNT")
    return name, queues


def _decode_body(item: Mapping[str, Any], index: int) -> bytes:
    body = item.get("body")
    encoding = item.get("encoding", "utf-8")
    if encoding not in ENCODINGS:
        raise InvalidArgument(f"messages[{index}].encoding must be one of {ENCODINGS}",
                              code="INVALID_MESSAGE")
    if not isinstance(body, str):
        raise InvalidArgument(f"messages[{index}].body must be a string", code="INVALID_MESSAGE")
    if encoding == "base64":
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(f"messages[{index}].body is not valid base64",
                                  code="INVALID_MESSAGE") from None
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"messages[{index}].body is not valid Unicode text; "
                              'send bytes as base64 with "encoding": "base64"',
                              code="INVALID_MESSAGE") from None


def _string_map(value: Any, index: int) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidArgument(f"messages[{index}].properties must map non-empty strings to strings",
                              code="INVALID_MESSAGE")
    return value


def _keys(item: Mapping[str, Any], index: int) -> list[str]:
    keys = item.get("keys", item.get("key"))
    if keys is None:
        return []
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InvalidArgument(f"messages[{index}].key must be a string (or keys a list of them)",
                              code="INVALID_MESSAGE")
    return keys


def parse_messages(topic: str, document: Any) -> list[Message]:
    """{"messages": [{"body", "key"?, "tag"?, "properties"?, "encoding"?}]} → Messages."""
    validate_topic_name(topic)
    items = _object(document, "the request body").get("messages")
    if not isinstance(items, list) or not items:
        raise InvalidArgument('"messages" must be a non-empty list', code="INVALID_REQUEST")
    if len(items) > MAX_BATCH:
        raise InvalidArgument(f"at most {MAX_BATCH} messages per request, got {len(items)}",
                              code="BATCH_TOO_LARGE")
    messages = []
    for index, raw_item in enumerate(items):
        item = _object(raw_item, f"messages[{index}]")
        body = _decode_body(item, index)
        tag = item.get("tag", item.get("tags", ""))
        if not isinstance(tag, str):
            raise InvalidArgument(f"messages[{index}].tag must be a string", code="INVALID_MESSAGE")
        messages.append(Message(topic, body, tags=tag, keys=_keys(item, index),
                                properties=_string_map(item.get("properties"), index)))
    return messages


def parse_transaction_id(document: Any) -> str:
    """The optional "transaction_id" of a send ("" = not in a transaction)."""
    tx_id = _object(document, "the request body").get("transaction_id", "")
    if not isinstance(tx_id, str):
        raise InvalidArgument('"transaction_id" must be a string (the id POST /v1/transactions '
                              "answered)", code="INVALID_REQUEST")
    return tx_id


def parse_int(args: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"query parameter {name!r} must be an integer, got {raw!r}",
                              code="INVALID_ARGUMENT") from None
    if not low <= value <= high:
        raise InvalidArgument(f"query parameter {name!r} must be in {low}..{high}, got {value}",
                              code="INVALID_ARGUMENT")
    return value


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
    }
