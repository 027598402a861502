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
from prometheus_client import REGISTRY
from tidemq.client import MessageExt
from tidemq.client.message import decode_records, reply_positions
from tidemq.common import record
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


def _expected_copies(headers) -> dict[str, str]:
    """The model of header_properties: Kafka's lastHeader per name, kept when it is UTF-8
    text under a name TideMQ does not reserve."""
    last: dict[str, bytes | None] = {}
    for name, value in headers:
        last.pop(name, None)   # insertion order: where the last header of the name stands
        last[name] = value
    out = {}
    for name, value in last.items():
        if (not name or name in records.RESERVED_PROPERTY_NAMES or name.startswith("KAFKA_")
                or "\x01" in name or "\x02" in name or value is None):
            continue
        try:
            text = value.decode()
        except UnicodeDecodeError:
            continue
        if "\x01" not in text and "\x02" not in text:
            out[name] = text
    return out


header_names = st.sampled_from(["region", "dup", "KEYS", "UNIQ_KEY", "KAFKA_HEADERS", "KAFKA_X",
                                "TRACE_CONTEXT", "DELAY", "", "a\x01b", "ключ"]) | st.text(max_size=6)
header_values = st.none() | st.binary(max_size=12) | st.text(max_size=12).map(str.encode) | \
    st.sampled_from([b"\xff\xfe", b"eu", b"", b"a\x02b"])


@settings(max_examples=300)
@given(st.lists(st.tuples(header_names, header_values), max_size=8), st.none() | st.binary(max_size=20))
def test_utf8_headers_are_also_user_properties_the_last_of_a_name_deciding(headers, key):
    record_ = records.KafkaRecord(key, b"v", tuple(headers), 7)
    message = records.to_message("t", record_)
    expected = _expected_copies(headers)
    assert {name: value for name, value in message.properties.items()
            if name not in records.RESERVED_PROPERTY_NAMES} == expected
    record.encode_properties(message.properties)   # storable: no separator slipped in
    # the reserved properties are the gateway's own, whatever the headers are named
    assert message.properties[records.PROP_TIMESTAMP] == "7"
    assert message.keys == records.to_message("t", records.KafkaRecord(key, b"v", (), 7)).keys
    # and Fetch still reads KAFKA_HEADERS: every header, byte for byte, in order
    assert records.from_message(_stored(message)) == record_


@settings(max_examples=150, deadline=None)
@given(st.none() | st.binary(max_size=14_000) | st.sampled_from([b"k" * 12_000, "ключ".encode() * 2000]),
       st.lists(st.tuples(st.sampled_from(["a", "ключ", "𝄞x", "b"]),
                          st.sampled_from([b"v", "значение".encode() * 900, b"x" * 9000,
                                           "𝄞".encode() * 3000])), max_size=4))
def test_header_copies_are_made_exactly_when_they_fit(key, headers):
    """The decision to byte precision, also where its quick bound (copies take at most
    KAFKA_HEADERS' length) does not settle it: big keys, non-ASCII names and values."""
    limit = record.MAX_PROPERTIES_SIZE - records.PROPERTIES_HEADROOM
    message = records.to_message("t", records.KafkaRecord(key, b"v", tuple(headers), 1))
    keys = {"KEYS": message.keys[0]} if message.keys else {}
    copies = records.header_properties(headers)
    stored = len(record.encode_properties({**message.properties, **keys}))
    if copies and all(name in message.properties for name in copies):
        assert stored <= limit
    else:
        assert not any(name in message.properties for name in copies)
        if copies:
            assert stored + len(record.encode_properties(copies)) > limit


def _skipped(reason: str) -> float:
    return REGISTRY.get_sample_value("tidemq_gateway_kafka_header_properties_skipped_total",
                                     {"reason": reason}) or 0.0


def test_header_copies_that_would_not_fit_the_properties_are_not_made_and_counted():
    before = {reason: _skipped(reason) for reason in ("size", "reserved_name", "not_utf8")}
    limit = record.MAX_PROPERTIES_SIZE - records.PROPERTIES_HEADROOM

    def message_with(size: int):
        return records.to_message("t", records.KafkaRecord(b"k", b"v", (("big", b"x" * size),), 1))

    def encoded(message) -> int:   # the properties as stored, the SDK's KEYS included
        return len(record.encode_properties(message.properties)) + len("KEYS\x01k\x02")

    low, high = 1, record.MAX_PROPERTIES_SIZE   # the largest value whose copy is made
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if "big" in message_with(middle).properties else \
            (low, middle - 1)
    size = low
    assert encoded(message_with(size)) <= limit
    over = message_with(size + 1)
    assert encoded(over) + len("big\x01\x02") + size + 1 > limit   # the copy would pass it
    assert _skipped("size") > before["size"]
    before["size"] = _skipped("size")
    over = message_with(size + 1)
    assert _skipped("size") == before["size"] + 1
    assert "big" not in over.properties and records.PROP_HEADERS in over.properties
    assert records.from_message(_stored(over)).headers == (("big", b"x" * (size + 1)),)
    # a long key leaves less room; a record's copies are all made or none (a consumer seeing
    # one of them sees them all)
    long_key = records.to_message("t", records.KafkaRecord(
        b"k" * records.KEY_IN_PROPERTIES_MAX, None, (("region", b"eu"), ("big", b"y" * 1500)), 1))
    assert "region" not in long_key.properties and "big" not in long_key.properties
    assert len(record.encode_properties({**long_key.properties,
                                         "KEYS": long_key.keys[0]})) <= limit   # storable
    assert _skipped("size") == before["size"] + 2
    records.to_message("t", records.KafkaRecord(None, b"v", (("KEYS", b"a"), ("KAFKA_K", b"b"),
                                                              ("bin", b"\xff"), ("n", None)), 1))
    assert _skipped("reserved_name") == before["reserved_name"] + 2
    assert _skipped("not_utf8") == before["not_utf8"] + 1


def test_a_native_message_reads_with_its_key_properties_and_born_time():
    native = MessageExt("t", b"body", "tag", ["k1", "k2"], {"region": "eu"}, "broker-a", 0, 5,
                        "", "", 1234, 1235, 0)
    assert records.from_message(native) == records.KafkaRecord(
        b"k1", b"body", (("region", b"eu"),), 1234)
    assert records.timestamp_of(native) == 1234
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = MessageExt("t", b"body", "", [], {"region": "eu", "TRACE_CONTEXT": parent},
                        "broker-a", 0, 5, "", "", 1234, 1235, 0)
    assert records.from_message(traced).headers == (("region", b"eu"),
                                                    ("traceparent", parent.encode()))
    own = MessageExt("t", b"body", "", [], {"traceparent": "mine", "TRACE_CONTEXT": parent},
                     "broker-a", 0, 5, "", "", 1234, 1235, 0)
    assert records.from_message(own).headers == (("traceparent", b"mine"),)   # the sender's


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
    header = records.BATCH_OVERHEAD
    assert records.within_bytes(stored, 2 * size + header) == stored[:2]
    assert records.within_bytes(stored, 2 * size + header - 1) == stored[:1]
    assert records.within_bytes(stored, 1) == stored[:1]        # the first always
    assert records.within_bytes(stored, 10 * size) == stored
    assert len(records.encode_messages(stored[:2])) <= 2 * size + header   # a bound


# -- the Fetch's C path (tidemq_speedups.kafka_records) against the Python mapping ----------

def _pulled(stored: list[tuple]) -> list[MessageExt]:
    """A pull reply's lazy messages: each (properties, body, queue offset, store time, sys
    flag) as the broker stores a record, decoded as the SDK decodes a reply."""
    raw = b"".join(record.encode("t", body, properties=record.encode_properties(props),
                                 queue_offset=offset, store_timestamp=store, sys_flag=flag)
                   for props, body, offset, store, flag in stored)
    return decode_records(raw, "broker-a")


def _kafka_stored(kafka_record, mangle: str | None) -> tuple[dict, bytes]:
    message = records.to_message("t", kafka_record)
    props = dict(message.properties)
    if message.keys:
        props[record.PROP_KEYS] = " ".join(message.keys)
    props[record.PROP_UNIQ_KEY] = "7F000001" + "0" * 24
    if mangle == "timestamp":
        props[records.PROP_TIMESTAMP] = " 12"            # int() takes it; the C path declines
    elif mangle == "key" and records.PROP_KEY in props:
        props[records.PROP_KEY] = props[records.PROP_KEY].rstrip("=")   # lenient base64 only
    elif mangle == "native":
        props.pop(records.PROP_TIMESTAMP)
    return props, bytes(message.body)


ascii_headers = st.lists(st.tuples(st.text(st.characters(min_codepoint=32, max_codepoint=126),
                                           max_size=12),
                                   st.none() | st.binary(max_size=40)), max_size=4).map(tuple)
plain_records = st.builds(records.KafkaRecord, key=st.none() | st.binary(max_size=40),
                          value=st.none() | st.binary(max_size=200),
                          headers=st.just(()) | ascii_headers,
                          timestamp=st.integers(-1, 2 ** 41))
stored_fetches = st.one_of(   # fetches the C path takes whole, and fetches it declines
    st.lists(st.tuples(plain_records, st.none(), st.integers(1, 2), st.booleans()),
             min_size=1, max_size=12),
    st.lists(st.tuples(kafka_records, st.sampled_from([None] * 6 + [
        "timestamp", "key", "native"]), st.integers(1, 2), st.booleans()),
        min_size=1, max_size=12))


@settings(max_examples=300, deadline=None)
@given(stored_fetches, st.booleans(), st.integers(1, 3000))
def test_the_c_fetch_path_answers_the_python_mappings_bytes(fetch, log_append_time, max_bytes):
    """The same bytes as encode_messages for every record the C path answers (headers, a
    native message, a mangled property: it declines and the Python mapping answers); within
    max_bytes (in exact sizes; the Python path by its estimate), the first record always;
    offsets with gaps and store times split batches as in Python."""
    stored, offset, store = [], 40, 5000
    for kafka_record, mangle, step, new_time in fetch:
        props, body = _kafka_stored(kafka_record, mangle)
        store += new_time
        stored.append((props, body, offset, store, 0))
        offset += step
    everything = records.encode_fetched(_pulled(stored), 1 << 30, log_append_time)
    assert everything == records.encode_messages(_pulled(stored), log_append_time)
    bounded = records.encode_fetched(_pulled(stored), max_bytes, log_append_time)
    answered = [r for raw in records.split_batches(bounded) for r in DefaultRecordBatch(raw)]
    expected = [r for raw in records.split_batches(everything) for r in DefaultRecordBatch(raw)]
    assert answered and [(r.offset, r.key, r.value, r.timestamp) for r in answered] == \
        [(r.offset, r.key, r.value, r.timestamp) for r in expected[:len(answered)]]
    assert len(bounded) <= max_bytes or len(answered) == 1   # either path
    fast = records._encode_fetched_c(_pulled(stored), max_bytes, log_append_time)
    assert fast is None or fast == bounded


def test_the_c_fetch_path_takes_plain_kafka_records_and_keeps_to_max_bytes():
    import tidemq_speedups

    assert records._kafka_records_c is tidemq_speedups.kafka_records   # the Fetch takes it
    plain = [_kafka_stored(records.KafkaRecord(b"k%d" % i, b"v" * 1000, (), 1000 + i), None)
             for i in range(5)]
    stored = [(props, body, 7 + i, 9000, 0) for i, (props, body) in enumerate(plain)]
    messages = _pulled(stored)
    buf, positions = reply_positions(messages)
    made = tidemq_speedups.kafka_records(buf, positions[0], 5, 1 << 20, False, True)
    assert made is not None and made[1:6] == (5, 7, 1000, 1004, 9000)
    assert records.encode_fetched(messages, 1 << 20) == records.encode_messages(_pulled(stored))
    two = records.encode_fetched(_pulled(stored), 2 * 1100)
    assert len(two) <= 2 * 1100
    assert [r.offset for r in DefaultRecordBatch(two)] == [7, 8]
    assert [r.offset for r in DefaultRecordBatch(records.encode_fetched(_pulled(stored), 1))] \
        == [7]                                                  # the first always
    traced = records.KafkaRecord(b"k", b"v", (("traceparent", b"00-ab-cd-01"), ("n", None),
                                              ("e", b"")), 1)
    props, body = _kafka_stored(traced, None)
    buf, positions = reply_positions(_pulled([(props, body, 0, 1, 0)]))
    assert tidemq_speedups.kafka_records(buf, positions[0], 1, 1 << 20, False, True) is not None
    escaped = records.KafkaRecord(b"k", b"v", (("h\"é", b"1"),), 1)   # JSON-escaped name
    props, body = _kafka_stored(escaped, None)
    buf, positions = reply_positions(_pulled([(props, body, 0, 1, 0)]))
    assert tidemq_speedups.kafka_records(buf, positions[0], 1, 1 << 20, False, True) is None


def test_the_c_fetch_pass_declines_what_it_cannot_read_and_names_itself_when_misused():
    import tidemq_speedups

    props, body = _kafka_stored(records.KafkaRecord(b"k", b"v", (), 1), None)
    raw = record.encode("t", body, properties=record.encode_properties(props))
    for buf, pos in ((raw[:-1], 0), (raw, 1), (bytearray(raw), 0), (raw, len(raw) + 1)):
        assert tidemq_speedups.kafka_records(buf, pos, 1, 1 << 20, False, True) is None
    assert tidemq_speedups.kafka_records(raw, len(raw), 1, 1 << 20, False, True)[1] == 0
    with pytest.raises(TypeError, match="kafka_records takes 6 arguments"):
        tidemq_speedups.kafka_records(raw, 0)
