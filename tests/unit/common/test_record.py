"""The record codec: round trips, and every kind of bad input ends in RecordFormatError."""

from __future__ import annotations

import contextlib
import struct
import zlib
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.common import record
from tidemq.common.topic_names import MAX_TOPIC_NAME_LEN

from tests.support.damage import damaged

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
    with pytest.raises(record.RecordFormatError, match=f"1..{MAX_TOPIC_NAME_LEN} bytes"):
        record.encode("t" * (MAX_TOPIC_NAME_LEN + 1), b"")
    with pytest.raises(record.RecordFormatError, match=f"1..{MAX_TOPIC_NAME_LEN} bytes"):
        record.encode_batch("t" * (MAX_TOPIC_NAME_LEN + 1), [(b"", b"", 0)])


def test_a_topic_of_the_longest_name_round_trips_through_every_reader():
    """249 bytes (Kafka's limit) in the record's one-byte topic length: read unsigned by the
    Python decoder and by the C scan (a signed read would see -7)."""
    topic = "t" * MAX_TOPIC_NAME_LEN
    one = record.encode(topic, b"body", properties=record.encode_properties({"a": "b"}))
    batch = record.encode_batch(topic, [(b"x", b"", 0), (b"yy", b"", 0)])
    assert batch == record.encode_batch_py(topic, [(b"x", b"", 0), (b"yy", b"", 0)])
    raw = one + batch
    assert [(r.topic, bytes(r.body)) for r in record.iter_records(raw)] == \
        [(topic, b"body"), (topic, b"x"), (topic, b"yy")]
    first = len(record.encode_batch(topic, [(b"x", b"", 0)]))
    assert [pos for pos, _ in record.scan_records(raw)] == [0, len(one), len(one) + first]
    assert [pos for pos, _ in record.scan_records_py(raw)] == [0, len(one), len(one) + first]


def test_offset_message_id_round_trip():
    host = record.pack_host("10.1.2.3", 10911)
    msg_id = record.offset_msg_id(host, 123456789)
    assert record.parse_offset_msg_id(msg_id) == (host, 123456789)
    with pytest.raises(ValueError, match="32 hex"):
        record.parse_offset_msg_id("ABCD")


# ---------------------------------------------------------------- lazy decoding (scan_records)

headers = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**62),
                    st.integers(0, 2**62), st.integers(0, 2**31 - 1))


def _stored(message: record.OutgoingMessage, fields: tuple[int, int, int, int, int]) -> bytes:
    queue_id, queue_offset, physical_offset, store_ts, reconsume = fields
    return record.encode(
        message.topic, message.body,
        properties=record.encode_properties(message.system_properties()),
        queue_id=queue_id, queue_offset=queue_offset, physical_offset=physical_offset,
        store_timestamp=store_ts, reconsume_times=reconsume, born_timestamp=store_ts // 2,
        store_host=record.pack_host("127.0.0.1", 10911), born_host=record.pack_host("10.0.0.1", 7),
    )


@given(st.lists(st.tuples(messages, headers), min_size=1, max_size=8))
def test_lazy_scan_equals_eager_decode(batch):
    raw = b"".join(_stored(m, h) for m, h in batch)
    eager = list(record.iter_records(raw))
    scanned = record.scan_records(raw)
    assert [pos for pos, _ in scanned] == [0, *accumulate(r.total_size for r in eager)][:-1]
    for (pos, header), rec in zip(scanned, eager, strict=True):
        assert header == record.HEADER.unpack_from(raw, pos)
        assert header[record.H_TOTAL_SIZE] == rec.total_size
        assert header[record.H_QUEUE_OFFSET] == rec.queue_offset
        assert header[record.H_STORE_HOST] == rec.store_host
        assert record.topic_at(raw, pos, header) == rec.topic
        assert record.properties_at(raw, pos, header) == rec.properties
        assert record.body_at(raw, pos, header) == bytes(rec.body)


@settings(max_examples=300)
@given(st.binary(max_size=600), st.booleans())
def test_scan_of_garbage_raises_only_record_format_error(garbage, verify_crc):
    with contextlib.suppress(record.RecordFormatError):
        record.scan_records(garbage, verify_crc=verify_crc)


@given(st.lists(messages, min_size=1, max_size=4), st.data())
def test_scan_detects_any_flipped_byte_in_any_record(batch, data):
    raw = bytearray(b"".join(record.encode_message(m)[0] for m in batch))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(record.RecordFormatError):
        record.scan_records(raw)


@given(messages, st.data())
def test_scan_rejects_a_torn_tail(message, data):
    raw, _ = record.encode_message(message)
    cut = data.draw(st.integers(1, len(raw) - 1))
    with pytest.raises(record.RecordFormatError):
        record.scan_records(raw + raw[:cut])


def test_non_utf8_fields_pass_the_scan_and_fail_when_read():
    raw = record.encode("t", b"body", properties=b"\xff\xfe\x01v\x02")
    ((pos, header),) = record.scan_records(raw)
    assert record.body_at(raw, pos, header) == b"body"
    with pytest.raises(record.RecordFormatError, match="not UTF-8"):
        record.properties_at(raw, pos, header)
    with pytest.raises(record.RecordFormatError, match="not UTF-8"):
        record.decode(raw)


@given(st.binary(max_size=4096))
def test_the_record_checksum_is_zlibs_crc32(data):
    """record_crc32 (ISA-L's where installed) must stay zlib's CRC-32: stored records and
    other implementations (the C stamping loop) use that polynomial."""
    assert record.record_crc32(data) == zlib.crc32(data)
    assert record.record_crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])


@settings(max_examples=200)
@given(st.lists(st.tuples(messages, headers), min_size=1, max_size=6), st.data())
def test_the_c_scan_gives_the_python_scans_results(batch, data):
    """tidemq_speedups.scan_records against scan_records_py: the same positions and header
    fields for stored records, and "invalid" exactly where the Python scan raises, after any
    damage (a byte flipped, a torn tail, garbage), with and without the CRC check."""
    import tidemq_speedups

    raw = damaged(b"".join(_stored(m, h) for m, h in batch), data)
    for verify in (True, False):
        try:
            py_found = record.scan_records_py(raw, verify_crc=verify)
        except record.RecordFormatError:
            py_found = None
        for crc32 in (record.record_crc32, None):  # None: the C loops' own
            assert tidemq_speedups.scan_records(raw, verify, crc32) == py_found


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=20),
       st.lists(st.tuples(st.binary(max_size=300), st.binary(max_size=64),
                          st.one_of(st.integers(-2**31, 2**31 - 1),
                                    st.integers(2**31, 2**40))), max_size=6),
       st.integers(-2**63, 2**63 - 1), st.binary(min_size=0, max_size=10),
       st.booleans())
def test_the_c_batch_encoder_gives_the_python_encoders_bytes(topic, items, born_timestamp,
                                                             born_host, oversized):
    """record.encode_batch (tidemq_speedups.encode_batch where it is installed) against
    encode_batch_py: the same bytes, or the same error where the Python loop refuses (a flag
    out of range, properties over the limit, a host that is not 8 bytes is padded alike)."""
    if oversized and items:
        items[0] = (items[0][0], b"p" * (record.MAX_PROPERTIES_SIZE + 1), 0)

    def outcome(encode):
        try:
            return encode(topic, list(items), born_timestamp=born_timestamp,
                          born_host=born_host)
        except (record.RecordFormatError, struct.error) as exc:
            return type(exc)

    import tidemq_speedups

    assert outcome(record.encode_batch) == outcome(record.encode_batch_py)
    valid = (not oversized and len(born_host) == 8 and len(topic.encode()) <= MAX_TOPIC_NAME_LEN
             and all(-2**31 <= flag < 2**31 for _, _, flag in items))
    topic_raw = topic.encode()
    by_c = tidemq_speedups.encode_batch(bytes([len(topic_raw) & 0xFF]) + topic_raw,
                                        list(items), born_timestamp, born_host)
    if valid:  # the C pass took it, byte for byte
        assert by_c == record.encode_batch_py(topic, items, born_timestamp=born_timestamp,
                                              born_host=born_host)
        assert [h[record.H_BODY_LEN] for _, h in record.scan_records(by_c)] == [
            len(body) for body, _, _ in items]
