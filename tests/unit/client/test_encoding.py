"""The producer's one-pass batch encoder against the per-message codec: identical records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import Message, compression
from tidemq.client.encoding import BatchEncoder
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PayloadTooLarge

HOST = record.pack_host("10.1.2.3", 0)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02",
                                           blacklist_categories=("Cs",)), max_size=10)
names = st.one_of(st.text("abcXYZ_", min_size=1, max_size=6),
                  st.sampled_from([record.PROP_TAGS, record.PROP_KEYS, record.PROP_UNIQ_KEY,
                                   record.PROP_MESSAGE_GROUP]))
messages = st.builds(
    Message, topic=st.just("orders"),
    body=st.one_of(st.binary(min_size=1, max_size=300), st.just(b"z" * 700)),
    tags=prop_text, keys=st.lists(st.text("abc123", min_size=1, max_size=5), max_size=3),
    properties=st.dictionaries(names, prop_text, max_size=3),
    message_group=st.one_of(st.just(""), st.text("gG-1é", min_size=1, max_size=8)),
)


def encoder(codec: str = compression.ZSTD, threshold: int = 512) -> BatchEncoder:
    return BatchEncoder(max_message_size=1000, compression=codec, compress_threshold=threshold,
                        born_host=HOST)


def per_message(message: Message, unique_id: str, born: int, codec: str, threshold: int,
                traceparent: str) -> bytes:
    """The producer's former encoding, one record at a time (record.encode_message)."""
    body, sys_flag = message.body, 0
    extra = {record.PROP_TRACE_CONTEXT: traceparent} if traceparent else {}
    if codec != compression.NONE and len(body) > threshold:
        body, sys_flag = compression.compress(body, codec), record.SYS_FLAG_COMPRESSED
        extra[record.PROP_COMPRESSION] = codec
    outgoing = record.OutgoingMessage(message.topic, body, message.tags, tuple(message.keys),
                                      message.properties, unique_id, message.message_group)
    return record.encode_message(outgoing, born_host=HOST, born_timestamp=born,
                                 sys_flag=sys_flag, extra_properties=extra)[0]


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, min_size=1, max_size=6), st.sampled_from(["", TRACEPARENT]),
       st.sampled_from([compression.ZSTD, compression.NONE]))
def test_batch_encoding_equals_the_per_message_codec(batch, traceparent, codec):
    raw, unique_ids = encoder(codec).encode(batch, traceparent)
    assert len(set(unique_ids)) == len(unique_ids)
    assert all(len(u) == 32 and int(u, 16) >= 0 for u in unique_ids)
    born = record.decode(raw).born_timestamp
    assert raw == b"".join(per_message(m, u, born, codec, 512, traceparent)
                           for m, u in zip(batch, unique_ids, strict=True))
    for message, rec in zip(batch, record.iter_records(raw), strict=True):
        assert rec.tags == message.tags or message.properties.get(record.PROP_TAGS) == rec.tags
        assert rec.keys == list(message.keys) or not message.keys


@pytest.mark.parametrize(("message", "error", "code"), [
    (Message("orders", b""), InvalidArgument, "MESSAGE_BODY_EMPTY"),
    (Message("orders", b"x" * 1001), PayloadTooLarge, "MESSAGE_TOO_LARGE"),
    (Message("orders", "text"), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", keys=["a b"]), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", keys=[""]), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", tags="a\x02b"), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", keys=["a\x01"]), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", properties={"k": "v\x01"}), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", properties={"k\x02": "v"}), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", properties={"TAGS": "\x01"}), InvalidArgument, "INVALID_MESSAGE"),
    (Message("bad topic", b"x"), InvalidArgument, "INVALID_TOPIC"),
    (Message("orders", b"x", message_group="a\x01b"), InvalidArgument, "INVALID_MESSAGE"),
    (Message("orders", b"x", message_group="g" * 256), InvalidArgument, "INVALID_MESSAGE"),
])
def test_an_invalid_message_fails_the_batch_with_its_precise_code(message, error, code):
    with pytest.raises(error) as info:
        encoder().encode([Message(message.topic, b"fine"), message])
    assert info.value.code == code


def test_a_batch_holds_one_topic():
    with pytest.raises(InvalidArgument, match="one topic"):
        encoder().encode([Message("orders", b"a"), Message("other", b"b")])


def test_bytearray_and_memoryview_bodies_are_encoded_as_bytes():
    raw, _ = encoder().encode([Message("orders", bytearray(b"ab")),
                               Message("orders", memoryview(b"cd"))])
    assert [bytes(r.body) for r in record.iter_records(raw)] == [b"ab", b"cd"]


def test_system_names_among_user_properties_lose_to_the_message_fields():
    raw, (uid,) = encoder().encode([Message("orders", b"x", tags="real", properties={
        "TAGS": "fake", "UNIQ_KEY": "fake", "KEYS": "kept", "a": "1"})])
    rec = record.decode(raw)
    assert (rec.tags, rec.unique_id, rec.keys) == ("real", uid, ["kept"])
    assert rec.properties["a"] == "1"


@given(st.lists(st.integers(0, 2**62), min_size=1, max_size=20), st.integers(0, 2**40),
       st.booleans())
def test_send_results_equal_the_dataclass_results(physical, first, answered_by_broker):
    from tidemq.client.message import MessageQueue, SendResult, SendStatus
    from tidemq.client.producer import _results
    from tidemq.v1 import broker_pb2

    host = record.pack_host("10.0.0.9", 10911)
    unique_ids = record.new_unique_ids(len(physical))
    response = broker_pb2.SendResponse(
        status=1, broker_name="broker-b" if answered_by_broker else "", queue_id=3,
        first_queue_offset=first, physical_offsets=physical, store_host=host)
    mq = MessageQueue("orders", "broker-a", 5)
    expected = [SendResult(SendStatus.FLUSH_DISK_TIMEOUT, record.offset_msg_id(host, p), u,
                           "broker-b" if answered_by_broker else "broker-a",
                           3 if answered_by_broker else 5, first + i)
                for i, (p, u) in enumerate(zip(physical, unique_ids, strict=True))]
    results = _results(response, mq, unique_ids)
    assert results == expected and repr(results) == repr(expected)
    with pytest.raises(AttributeError):
        results[0].msg_id = "x"  # still frozen


def test_the_message_group_is_a_system_property_read_back_on_the_message():
    from tidemq.client.message import decode_records

    raw, _ = encoder().encode([Message("orders", b"x", message_group="order-7",
                                       properties={"MESSAGE_GROUP": "fake", "a": "1"}),
                               Message("orders", b"y")])
    grouped, plain = decode_records(raw)
    assert (grouped.message_group, plain.message_group) == ("order-7", "")
    assert grouped.user_properties == {"a": "1"}
