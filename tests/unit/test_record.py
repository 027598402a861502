"""The record codec: round trips, and every kind of bad input ends in RecordFormatError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.common import record

topics = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_characters="#"),
    min_size=1, max_size=40,
)
prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    max_size=20,
)
messages = st.builds(
    record.OutgoingMessage,
    topic=topics,
    body=st.binary(max_size=2048),
    tags=prop_text,
    keys=st.lists(st.text(alphabet="abcdefgh0123456789", min_size=1, max_size=8), max_size=3),
    properties=st.dictionaries(
        st.text(alphabet="ABCDEFGHIJ_", min_size=1, max_size=8), prop_text, max_size=4
    ),
)


@given(messages, st.integers(0, 2**31 - 1), st.integers(0, 2**62))
def test_encode_decode_round_trip(message, queue_id, queue_offset):
    raw = record.encode(
        message.topic, message.body, properties=record.encode_properties(message.properties),
        queue_id=queue_id, queue_offset=queue_offset, store_host=record.pack_host("127.0.0.1", 9),
    )
    decoded = record.decode(raw)
    assert decoded.total_size == len(raw)
    assert (decoded.topic, bytes(decoded.body)) == (message.topic, message.body)
    assert (decoded.queue_id, decoded.queue_offset) == (queue_id, queue_offset)
    assert decoded.properties == dict(message.properties)
    assert record.unpack_host(decoded.store_host) == "127.0.0.1:9"


@given(st.lists(messages, min_size=1, max_size=8))
def test_batches_decode_in_order(batch):
    encoded = [record.encode_message(m) for m in batch]
    decoded = list(record.iter_records(b"".join(raw for raw, _ in encoded)))
    assert [r.unique_id for r in decoded] == [uid for _, uid in encoded]
    for message, rec in zip(batch, decoded, strict=True):
        assert rec.tags == message.tags
        assert rec.keys == list(message.keys)
        assert bytes(rec.body) == message.body


@given(messages, st.data())
def test_torn_record_is_rejected(message, data):
    raw, _ = record.encode_message(message)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(record.RecordFormatError):
        record.decode(raw[:cut])


@given(messages, st.data())
def test_any_flipped_byte_is_detected(message, data):
    raw = bytearray(record.encode_message(message)[0])
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(record.RecordFormatError):
        record.decode(raw)


@settings(max_examples=300)
@given(st.binary(max_size=600), st.booleans())
def test_garbage_raises_only_record_format_error(garbage, verify_crc):
    with contextlib.suppress(record.RecordFormatError):
        list(record.iter_records(garbage, verify_crc=verify_crc))


@given(st.binary(min_size=record.HEADER_SIZE, max_size=400))
def test_garbage_with_valid_magic_raises_only_record_format_error(garbage):
    raw = bytearray(garbage)
    raw[0:8] = record.BLANK_HEADER.pack(len(raw), record.MESSAGE_MAGIC)
    with contextlib.suppress(record.RecordFormatError):
        record.decode(raw, verify_crc=False)


def test_reserved_separator_in_property_is_refused():
    with pytest.raises(ValueError, match="reserved separator"):
        record.encode_properties({"a": "x\x01y"})


def test_oversized_topic_is_refused():
    with pytest.raises(record.RecordFormatError, match="topic"):
        record.encode("t" * 200, b"")


def test_offset_message_id_round_trip():
    host = record.pack_host("10.1.2.3", 10911)
    msg_id = record.offset_msg_id(host, 123456789)
    assert record.parse_offset_msg_id(msg_id) == (host, 123456789)
    with pytest.raises(ValueError, match="32 hex"):
        record.parse_offset_msg_id("ABCD")
