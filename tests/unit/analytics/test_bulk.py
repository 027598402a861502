"""bulk_columns (numpy over a pull reply) against the record-by-record reference decoder."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.analytics import decode
from tidemq.analytics.bulk import bulk_columns
from tidemq.analytics.decode import ColumnBuilder, arrow_schema, decode_reply
from tidemq.client import compression
from tidemq.common import record as rec

STORE_HOST = rec.pack_host("10.1.2.3", 10911)
SCHEMA = arrow_schema()


def stored(offset: int, body: bytes, properties: bytes, *, topic: str = "t",
           sys_flag: int = 0) -> bytes:
    return rec.encode(topic, body, properties=properties, queue_id=2, queue_offset=offset,
                      physical_offset=(1 << 40) + 313 * offset, sys_flag=sys_flag,
                      born_timestamp=1_700_000_000_000 + offset,
                      store_timestamp=1_700_000_000_900 + 7 * offset, store_host=STORE_HOST)


def reference(reply: bytes, start: int = 0, end: int = 1 << 62) -> pa.RecordBatch:
    builder = ColumnBuilder("broker-a", SCHEMA)
    builder.add_slice(reply, start, end)
    return builder.flush()


def bulk(reply: bytes, start: int = 0, end: int = 1 << 62) -> pa.RecordBatch | None:
    positions = np.array([pos for pos, header in rec.scan_records(reply)
                          if start <= header[rec.H_QUEUE_OFFSET] < end], np.int64)
    columns = bulk_columns(reply, positions, "broker-a", SCHEMA)
    if columns is None:
        return None
    return pa.RecordBatch.from_arrays([columns[f.name] for f in SCHEMA], schema=SCHEMA)


# What the SDK writes: a dict of properties (tags, keys, a unique id and user properties),
# bodies of any length (inline views are up to 12 bytes), topics in any script.
sdk_messages = st.lists(
    st.tuples(
        st.binary(max_size=40),
        st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]),
                max_size=5),  # tags
        st.lists(st.text("ab", min_size=1, max_size=3), max_size=3),  # keys
        st.dictionaries(st.text("xyzé", min_size=1, max_size=4),
                        st.text("vé\x00 ", max_size=14), max_size=3),
        st.sampled_from(["t", "tópico", "話題", "a" * 30]),
    ),
    max_size=15,
)


@settings(max_examples=200, deadline=None)
@given(messages=sdk_messages, window=st.tuples(st.integers(0, 16), st.integers(0, 16)))
def test_sdk_records_are_decoded_in_bulk_exactly_as_the_reference_does(messages, window):
    start, end = min(window), max(window)
    reply = b"".join(
        stored(offset, body, rec.encode_properties(rec.OutgoingMessage(
            topic, body, tags=tags, keys=keys, properties=props,
            unique_id=f"U{offset}").system_properties()), topic=topic)
        for offset, (body, tags, keys, props, topic) in enumerate(messages))
    batch = bulk(reply, start, end)
    assert batch is not None, "an SDK record must not need the per-record loop"
    expected = reference(reply, start, end)
    assert batch.to_pylist() == expected.to_pylist()
    assert batch.equals(expected)


raw_property_items = st.lists(
    st.sampled_from([b"TAGS\x01t", b"KEYS\x01k1 k2", b"KEYS\x01", b"KEYS\x01 a  b ", b"a\x01b\x01c",
                     b"noval", b"", b"UNIQ_KEY\x01u", b"TAGS\x01second", b"\xff\x01x",
                     b"\x01empty-name", b"long-name-over-twelve\x01long-value-over-twelve"]),
    max_size=5)


@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.tuples(st.binary(max_size=20), raw_property_items,
                                  st.booleans()), min_size=1, max_size=10))
def test_bulk_gives_the_reference_batch_or_hands_the_reply_on(records):
    """Any reply: bulk_columns equals the reference, or answers None (never another batch,
    and never a batch for a reply the reference refuses)."""
    reply = b"".join(stored(offset, body, b"\x02".join(items) + (b"\x02" if end else b""))
                     for offset, (body, items, end) in enumerate(records))
    batch = bulk(reply)
    try:
        expected = reference(reply)
    except (UnicodeDecodeError, ValueError):
        assert batch is None
        return
    if batch is not None:
        assert batch.to_pylist() == expected.to_pylist()
        assert batch.equals(expected)
    assert decode_reply(reply, "broker-a", 0, 1 << 62, SCHEMA).equals(expected)


@pytest.mark.parametrize("properties, sys_flag", [
    (b"TAGS\x01a\x02TAGS\x01b\x02", 0),  # a name twice: first place, last value
    (b"TAGS\x01a\x02noval\x02", 0),  # an item without \x01
    (b"TAGS\x01\xff\x02", 0),  # not UTF-8
    (b"TAGS\x01a", 0),  # no \x02 at the end
    (b"COMPRESSION\x01zstd\x02", rec.SYS_FLAG_COMPRESSED),
])
def test_what_bulk_leaves_to_the_per_record_loop(properties, sys_flag):
    body = compression.compress(b"body", "zstd") if sys_flag else b"body"
    reply = stored(0, b"plain", b"TAGS\x01x\x02") + stored(1, body, properties,
                                                             sys_flag=sys_flag)
    assert bulk(reply) is None
    assert bulk(reply, 0, 1) is not None, "only the records in the range count"


def test_plain_replies_never_reach_the_loop(monkeypatch):
    def loop(*args):
        raise AssertionError("decode_reply fell back to the per-record loop")

    monkeypatch.setattr(decode, "_columns", loop)
    reply = b"".join(stored(i, b"x" * i, rec.encode_properties(
        {rec.PROP_TAGS: "T", rec.PROP_KEYS: "k1 k2", rec.PROP_UNIQ_KEY: f"U{i}"}))
        for i in range(30))
    batch = decode_reply(reply, "broker-a", 5, 25, SCHEMA)
    assert batch.equals(reference(reply, 5, 25))
    row = batch.to_pylist()[0]
    assert (row["queue_offset"], row["tag"], row["keys"], row["body"]) == (
        5, "T", ["k1", "k2"], b"xxxxx")
    assert row["msg_id"] == rec.offset_msg_id(STORE_HOST, (1 << 40) + 313 * 5)


def test_an_empty_range_is_an_empty_batch_of_the_schema():
    reply = stored(0, b"m", b"TAGS\x01x\x02")
    batch = bulk(reply, 5, 9)
    assert batch is not None and batch.num_rows == 0 and batch.schema.equals(SCHEMA)
    assert bulk(stored(0, b"m", b""), 0, 1).equals(reference(stored(0, b"m", b"")))
