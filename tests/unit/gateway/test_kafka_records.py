"""gateway-kafka's record mapping: Kafka record -> TideMQ message -> Kafka record is lossless
(hypothesis), and produced batches are checked as Kafka checks them."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c
from tidemq.client import MessageExt
from tidemq.gatewaykafka import records


def _stored(message, offset: int = 0) -> MessageExt:
    """The message as a consumer reads it back (what the broker keeps of it)."""
    return MessageExt(message.topic, bytes(message.body), "", list(message.keys),
                      dict(message.properties), "broker-a", 0, offset, "", "", 1, 2, 0)


kafka_records = st.builds(
    records.KafkaRecord,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)),
                     max_size=4).map(tuple),
    timestamp=st.integers(0, 2 ** 41))


@settings(max_examples=300)
@given(kafka_records)
def test_a_record_survives_the_message_it_is_stored_as(record):
    message = records.to_message("t", record)
    message.validate()
    assert records.from_message(_stored(message)) == record
    # ListOffsets by time reads only the timestamp, and reads the same one
    assert records.timestamp_of(_stored(message)) == record.timestamp


@pytest.mark.parametrize("value", [None, b"", b"v" * 70_000])
def test_a_key_too_long_for_the_properties_travels_in_the_body(value):
    """librdkafka's 0003 produces a 99 000-byte key: past the 32 KiB of properties a message
    may carry, so it goes at the head of the body, named for compaction by its digest."""
    key = bytes(range(256)) * 387   # 99 072 bytes, not UTF-8
    record = records.KafkaRecord(key, value, (("h", b"x"), ("h", None)), 1234)
    message = records.to_message("t", record)
    message.validate()
    assert not message.keys and records.PROP_KEY not in message.properties
    assert message.properties[records.PROP_KEY_SIZE] == str(len(key))
    assert bytes(message.body) == key + (value or b"")
    assert records.from_message(_stored(message)) == record
    at_limit = records.KafkaRecord(b"k" * records.KEY_IN_PROPERTIES_MAX, value, (), 1)
    assert records.PROP_KEY in records.to_message("t", at_limit).properties
    # a size that does not fit the body is someone else's message: read as it is
    forged = _stored(message)
    forged.properties[records.PROP_KEY_SIZE] = str(len(message.body) + 1)
    assert records.from_message(forged).key is None


def test_utf8_keys_are_also_tidemq_keys():
    assert records.to_message("t", records.KafkaRecord(b"order-1", b"v", (), 1)).keys == \
        ["order-1"]
    for key in (b"two words", b"\xff\xfe", b"", None):
        assert records.to_message("t", records.KafkaRecord(key, b"v", (), 1)).keys == []


def test_a_native_message_reads_with_its_key_properties_and_born_time():
    native = MessageExt("t", b"body", "tag", ["k1", "k2"], {"region": "eu"}, "broker-a", 0, 5,
                        "", "", 1234, 1235, 0)
    assert records.from_message(native) == records.KafkaRecord(
        b"k1", b"body", (("region", b"eu"),), 1234)
    assert records.timestamp_of(native) == 1234


def _batch(values: list[bytes], compression: int = 0) -> bytearray:
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 2 ** 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1000 + i, key=None, value=value, headers=[])
    return builder.build()


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])   # none gzip snappy lz4 zstd
def test_batches_decode_and_fetch_encodes_consecutive_offsets(compression):
    raw = _batch([b"a", b"b", b"c"], compression)
    (batch,) = list(records.split_batches(bytes(raw)))
    decoded = records.decode_batch(batch, max_uncompressed=1 << 20)
    assert [r.value for r in decoded.records] == [b"a", b"b", b"c"]
    stored = [_stored(records.to_message("t", r), 7 + i) for i, r in enumerate(decoded.records)]
    (again,) = list(records.split_batches(records.encode_messages(stored)))
    assert struct.unpack_from(">q", again)[0] == 7
    assert [r.value for r in records.decode_batch(again, max_uncompressed=1 << 20).records] == \
        [b"a", b"b", b"c"]


def test_log_append_time_batches_carry_each_store_time():
    """A LogAppendTime topic's fetch: a batch per store time, flagged LogAppendTime, its max
    timestamp the store time (what every record then reads with), CRC32C still valid."""
    sent = [records.to_message("t", records.KafkaRecord(None, b"v%d" % i, (), 1000 + i))
            for i in range(3)]
    stored = [MessageExt("t", bytes(m.body), "", [], dict(m.properties), "broker-a", 0, 4 + i,
                         "", "", 1000 + i, store, 0)
              for i, (m, store) in enumerate(zip(sent, (5000, 5000, 6000), strict=True))]
    batches = [DefaultRecordBatch(raw) for raw in
               records.split_batches(records.encode_messages(stored, log_append_time=True))]
    assert [b.validate_crc() for b in batches] == [True, True]
    assert [[(r.offset, r.timestamp, r.timestamp_type, r.value) for r in b] for b in batches] \
        == [[(4, 5000, 1, b"v0"), (5, 5000, 1, b"v1")], [(6, 6000, 1, b"v2")]]
    (create_time,) = [DefaultRecordBatch(raw) for raw in
                      records.split_batches(records.encode_messages(stored))]
    assert [(r.timestamp, r.timestamp_type) for r in create_time] == \
        [(1000, 0), (1001, 0), (1002, 0)]


def test_a_flipped_byte_is_a_corrupt_message():
    raw = _batch([b"payload"])
    raw[-2] ^= 0xFF
    with pytest.raises(records.RecordError) as caught:
        records.decode_batch(bytes(raw), max_uncompressed=1 << 20)
    assert caught.value.kafka_error == "CORRUPT_MESSAGE"


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_codecs_kafka_does_not_have_are_refused(codec):
    raw = _batch([b"x"])
    attributes_at = 21   # base offset 8, length 4, leader epoch 4, magic 1, crc 4
    raw[attributes_at + 1] = codec
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[attributes_at:])))
    with pytest.raises(records.RecordError) as caught:
        records.decode_batch(bytes(raw), max_uncompressed=1 << 20)
    assert caught.value.kafka_error == "UNSUPPORTED_COMPRESSION_TYPE"


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_decompressed_size_is_capped(compression):
    raw = _batch([b"z" * 10_000], compression)
    with pytest.raises(records.RecordError) as caught:
        records.decode_batch(bytes(raw), max_uncompressed=1000)
    assert caught.value.kafka_error == "MESSAGE_TOO_LARGE"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_bomb_is_stopped_while_it_decompresses(codec, monkeypatch):
    """64 MiB of zeros in a few KiB: refused without ever holding more than the cap + a
    block (the output handed back is bounded by what each codec call is allowed)."""
    bomb = {1: gzip.compress, 2: cramjam.snappy.compress_raw,
            3: lz4.frame.compress, 4: zstandard.ZstdCompressor().compress}[codec](
        bytes(64 << 20))
    assert len(bytes(bomb)) < 4 << 20
    with pytest.raises(records.RecordError) as caught:
        records.decompress(codec, bytes(bomb), 1 << 20)
    assert caught.value.kafka_error == "MESSAGE_TOO_LARGE"


def test_raw_snappy_as_librdkafka_writes_it():
    data = b"librdkafka " * 100
    assert records.decompress(2, bytes(cramjam.snappy.compress_raw(data)), 1 << 20) == data


def test_torn_record_sets_are_corrupt():
    raw = bytes(_batch([b"a"]))
    with pytest.raises(records.RecordError):
        list(records.split_batches(raw[:-1]))
    with pytest.raises(records.RecordError):
        list(records.split_batches(raw[:30]))


def test_a_fetch_keeps_to_max_bytes_in_answered_sizes():
    stored = [_stored(records.to_message("t", records.KafkaRecord(b"k", b"v" * 1000, (), 1)),
                      offset=i) for i in range(5)]
    size = records.answered_size(stored[0])
    assert size > 1000
    assert records.within_bytes(stored, 2 * size) == stored[:2]
    assert records.within_bytes(stored, 1) == stored[:1]        # the first always
    assert records.within_bytes(stored, 10 * size) == stored
    assert len(records.encode_messages(stored[:2])) <= 2 * size   # a bound, not a guess
