"""A message's JSON (tidemq.gateway.messages) is the shape it always was, whichever way the
message was made: decoded lazily from a broker's reply or built whole; UTF-8 or binary body;
with a message group, user and system properties, from a retry topic."""

from __future__ import annotations

import base64

import pytest
from tidemq.client import Message
from tidemq.client.message import SYSTEM_PROPERTIES, MessageExt, decode_records
from tidemq.client.producer import BatchEncoder
from tidemq.common import record
from tidemq.gateway.messages import message_json, received_json


def reference_json(message: MessageExt) -> dict:
    """The shape as the gateway wrote it before it was built in one pass (issue #37)."""
    try:
        shown = {"body": message.body.decode("utf-8")}
    except UnicodeDecodeError:
        shown = {"body": base64.b64encode(message.body).decode("ascii"), "encoding": "base64"}
    shown.update(tag=message.tags, keys=message.keys,
                 properties={k: v for k, v in message.properties.items()
                             if k not in SYSTEM_PROPERTIES},
                 queue_offset=message.queue_offset, msg_id=message.msg_id,
                 unique_id=message.unique_id, born_timestamp=message.born_timestamp,
                 store_timestamp=message.store_timestamp,
                 reconsume_times=message.reconsume_times,
                 message_group=message.properties.get(record.PROP_MESSAGE_GROUP, ""))
    return shown


def reference_received(message: MessageExt, handle: str) -> dict:
    return {**reference_json(message),
            "topic": message.properties.get(record.PROP_RETRY_TOPIC) or message.topic,
            "broker_name": message.broker_name, "receipt_handle": handle,
            "delivery_count": message.reconsume_times + 1}


SENT = [
    Message("Orders", b"plain text"),
    Message("Orders", "h\u00e9llo \u2603".encode(), tags="red", keys=["k1", "k2"],
            properties={"region": "eu", "n": "1"}, message_group="g-7"),
    Message("Orders", b"\xff\xfe\x00binary"),
]


RAW, _ = BatchEncoder(max_message_size=1 << 20, compression="none",
                      compress_threshold=1 << 30,
                      born_host=record.pack_host("10.0.0.1", 0)).encode(SENT)


def lazy_messages() -> list[MessageExt]:
    """Decoded on first access, as a pop's reply is (each call: fresh, nothing cached)."""
    return decode_records(RAW, "broker-a")


def eager_messages() -> list[MessageExt]:
    return [MessageExt(topic="%RETRY%billing", body=b"again", tags="t", keys=[],
                       properties={record.PROP_RETRY_TOPIC: "Orders", "user": "v",
                                   record.PROP_UNIQ_KEY: "U1"},
                       broker_name="broker-b", queue_id=2, queue_offset=41,
                       msg_id="0A0000010000000000000000000000FF", unique_id="U1",
                       born_timestamp=1_700_000_000_000, store_timestamp=1_700_000_000_005,
                       reconsume_times=3),
            MessageExt(topic="Orders", body=b"\x00\x01", tags="", keys=["a"], properties={},
                       broker_name="broker-a", queue_id=0, queue_offset=0, msg_id="",
                       unique_id="", born_timestamp=1, store_timestamp=2, reconsume_times=0)]


@pytest.mark.parametrize("made", [lazy_messages, eager_messages])
def test_message_json_keeps_its_shape(made) -> None:
    for fresh, seen in zip(made(), made(), strict=True):
        shown = message_json(fresh)
        expected = reference_json(seen)
        assert shown == expected
        assert list(shown) == list(expected)  # the same order of fields too


@pytest.mark.parametrize("made", [lazy_messages, eager_messages])
def test_received_json_keeps_its_shape(made) -> None:
    for index, (fresh, seen) in enumerate(zip(made(), made(), strict=True)):
        shown = received_json(fresh, f"handle-{index}")
        expected = reference_received(seen, f"handle-{index}")
        assert shown == expected
        assert list(shown) == list(expected)


def test_a_retried_message_shows_the_topic_it_was_sent_to() -> None:
    retried = eager_messages()[0]
    shown = received_json(retried, "h")
    assert (shown["topic"], shown["delivery_count"], shown["properties"]) == \
        ("Orders", 4, {"user": "v"})
