"""Pull replies -> Arrow batches for the tidemq Spark source (no Spark JVM needed)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.analytics.decode import (
    COLUMNS,
    ColumnBuilder,
    arrow_schema,
    decode_reply,
    decompress_body,
)
from tidemq.client import compression
from tidemq.common import record as rec
from tidemq.common.errors import InvalidArgument

from tests.support.damage import damaged

STORE_HOST = rec.pack_host("127.0.0.1", 10911)


def stored(topic: str, body: bytes, offset: int, *, tags: str = "", keys=(), props=None,
           sys_flag: int = 0, queue_id: int = 3) -> bytes:
    """A record as the broker stores it (broker-assigned fields stamped)."""
    message = rec.OutgoingMessage(topic, body, tags=tags, keys=keys, properties=props or {},
                                  unique_id=f"U{offset}")
    properties = message.system_properties()
    return rec.encode(
        topic, body, properties=rec.encode_properties(properties), queue_id=queue_id,
        queue_offset=offset, physical_offset=1000 + offset * 200, sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + offset, store_timestamp=1_700_000_000_500 + offset,
        store_host=STORE_HOST,
    )


def test_batch_has_the_exact_schema_spark_expects():
    builder = ColumnBuilder("broker-a", arrow_schema())
    reply = b"".join(stored("orders", b"x%d" % i, i, tags="T", keys=["k1", "k2"])
                     for i in range(5))
    assert builder.add_slice(reply, 0, 5) == 5
    batch = builder.flush()
    assert batch.schema.equals(arrow_schema())
    assert tuple(batch.schema.names) == COLUMNS
    row = batch.slice(2, 1).to_pylist()[0]
    assert row["topic"] == "orders" and row["broker"] == "broker-a"
    assert (row["queue_id"], row["queue_offset"]) == (3, 2)
    assert row["msg_id"] == rec.offset_msg_id(STORE_HOST, 1400)
    assert row["unique_id"] == "U2" and row["tag"] == "T" and row["keys"] == ["k1", "k2"]
    assert dict(row["properties"])["TAGS"] == "T"
    assert row["body"] == b"x2"
    assert row["born_timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 2000, dt.UTC)
    assert row["store_timestamp"] - row["born_timestamp"] == dt.timedelta(milliseconds=500)
    assert len(builder) == 0, "flush starts a new batch"


def test_records_outside_the_range_are_dropped():
    builder = ColumnBuilder("b", arrow_schema())
    reply = b"".join(stored("t", b"m", i) for i in range(10, 20))
    assert builder.add_slice(reply, 12, 15) == 3
    assert builder.flush().column("queue_offset").to_pylist() == [12, 13, 14]


def test_untagged_message_has_empty_tag_and_no_keys():
    builder = ColumnBuilder("b", arrow_schema())
    builder.add_slice(stored("t", b"m", 0), 0, 1)
    row = builder.flush().to_pylist()[0]
    assert (row["tag"], row["keys"]) == ("", [])


def test_compressed_body_is_returned_as_sent():
    body = b"abc" * 5000
    raw = stored("t", compression.compress(body, compression.ZSTD), 0,
                 props={rec.PROP_COMPRESSION: "zstd"}, sys_flag=rec.SYS_FLAG_COMPRESSED)
    assert decompress_body(rec.decode(raw)) == body


def test_unknown_codec_is_a_precise_error():
    raw = stored("t", b"??", 7, props={rec.PROP_COMPRESSION: "lz4"},
                 sys_flag=rec.SYS_FLAG_COMPRESSED)
    with pytest.raises(InvalidArgument) as info:
        decompress_body(rec.decode(raw))
    assert info.value.code == "UNSUPPORTED_COMPRESSION"
    assert "queue 3 offset 7" in info.value.message and "lz4" in info.value.message


def test_corrupt_reply_is_refused_not_misread():
    raw = bytearray(stored("t", b"payload", 0))
    raw[-1] ^= 0xFF
    with pytest.raises(rec.RecordFormatError, match="CRC"):
        ColumnBuilder("b", arrow_schema()).add_slice(bytes(raw), 0, 1)


@settings(max_examples=50, deadline=None)
@given(
    messages=st.lists(
        st.tuples(st.binary(min_size=1, max_size=64), st.text("ABCxyz", max_size=4),
                  st.booleans()),
        min_size=1, max_size=20,
    ),
    window=st.tuples(st.integers(0, 25), st.integers(0, 25)),
)
def test_decoding_keeps_bodies_tags_and_offsets(messages, window):
    start, end = min(window), max(window)
    parts = []
    for offset, (body, tag, compressed) in enumerate(messages):
        if compressed:
            parts.append(stored("t", compression.compress(body, "zstd"), offset, tags=tag,
                                props={rec.PROP_COMPRESSION: "zstd"},
                                sys_flag=rec.SYS_FLAG_COMPRESSED))
        else:
            parts.append(stored("t", body, offset, tags=tag))
    builder = ColumnBuilder("b", arrow_schema())
    kept = builder.add_slice(b"".join(parts), start, end)
    rows = builder.flush().to_pylist()
    expected = [(o, m[0], m[1]) for o, m in enumerate(messages) if start <= o < end]
    assert kept == len(expected)
    assert [(r["queue_offset"], r["body"], r["tag"]) for r in rows] == expected


# Properties as any producer may have stored them: the form encode_properties writes, plus
# what a raw record may hold (an item without \x01, a name twice, empty items, \x01 in a
# value, bytes that are not UTF-8).
property_bytes = st.one_of(
    st.dictionaries(st.text("KEYSTAGUNIQ_ab ", min_size=1, max_size=6),
                    st.text("ab é", max_size=6), max_size=4)
    .map(lambda props: rec.encode_properties(props)),
    st.lists(st.sampled_from([b"TAGS\x01t", b"KEYS\x01k1 k2", b"KEYS\x01", b"a\x01b\x01c",
                              b"noval", b"", b"UNIQ_KEY\x01u", b"TAGS\x01second", b"\xff\x01x"]),
             max_size=5).map(lambda items: b"\x02".join(items)),
)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(st.tuples(st.binary(max_size=40), property_bytes,
                               st.booleans(), st.sampled_from(["t", "tópico"])),
                     min_size=1, max_size=12),
    window=st.tuples(st.integers(0, 14), st.integers(0, 14)),
)
def test_columnar_decoder_gives_the_reference_decoders_batch(records, window):
    """decode_reply (Arrow columns, per-record Python only for slicing) and ColumnBuilder
    (record by record) give equal batches, or raise the same error, for the records of a
    reply in the range (decode_reply leaves the others' topic and properties undecoded)."""
    start, end = min(window), max(window)
    stored_records = [
        rec.encode(topic, compression.compress(body, "zstd") if compressed else body,
                   properties=props + (b"\x02COMPRESSION\x01zstd\x02" if compressed else b""),
                   queue_id=1, queue_offset=offset, physical_offset=77 * offset,
                   sys_flag=rec.SYS_FLAG_COMPRESSED if compressed else 0,
                   born_timestamp=offset, store_timestamp=2 * offset, store_host=STORE_HOST)
        for offset, (body, props, compressed, topic) in enumerate(records)]
    reply = b"".join(stored_records)
    builder = ColumnBuilder("b", arrow_schema())
    try:
        builder.add_slice(b"".join(stored_records[start:end]), start, end)
        expected = builder.flush()
    except rec.RecordFormatError as exc:
        with pytest.raises(rec.RecordFormatError, match=str(exc).split(" at ")[0]):
            decode_reply(reply, "b", start, end, arrow_schema())
        return
    batch = decode_reply(reply, "b", start, end, arrow_schema())
    assert batch.schema.equals(arrow_schema())
    assert batch.to_pylist() == expected.to_pylist()
    assert batch.equals(expected)


def test_columnar_decoder_refuses_a_corrupt_reply():
    raw = bytearray(stored("t", b"payload", 0))
    raw[-1] ^= 0xFF
    with pytest.raises(rec.RecordFormatError, match="CRC"):
        decode_reply(bytes(raw), "b", 0, 1, arrow_schema())


def test_columnar_decoder_reads_a_pull_reply_of_plain_records():
    reply = b"".join(stored("orders", b"x%d" % i, i, tags="T", keys=["k1", "k2"])
                     for i in range(5))
    batch = decode_reply(reply, "broker-a", 1, 4, arrow_schema())
    assert batch.column("queue_offset").to_pylist() == [1, 2, 3]
    row = batch.to_pylist()[0]
    assert (row["tag"], row["keys"], row["unique_id"], row["body"]) == ("T", ["k1", "k2"],
                                                                         "U1", b"x1")
    assert row["msg_id"] == rec.offset_msg_id(STORE_HOST, 1200)


# ---------------------------------------------------------------- .schema(...): column pruning

def _struct(ddl: str):
    """A user's .schema("name type, ...") as Spark hands it over (nullable by default; Spark's
    own DDL parser needs a running session)."""
    from pyspark.sql import types as t

    kinds = {"binary": t.BinaryType(), "bigint": t.LongType(), "int": t.IntegerType(),
             "string": t.StringType(), "array<string>": t.ArrayType(t.StringType()),
             "map<string,string>": t.MapType(t.StringType(), t.StringType())}
    return t.StructType([t.StructField(name, kinds[kind]) for name, kind in
                         (column.split() for column in ddl.split(", "))])


def test_every_column_is_no_projection_and_a_subset_is_its_own_schema():
    from tidemq.analytics.decode import projection, spark_schema

    assert projection(spark_schema()) == ""
    picked = projection(_struct("keys array<string>, queue_offset bigint, body binary, "
                                "properties map<string,string>"))
    schema = arrow_schema(picked)
    assert schema.names == ["keys", "queue_offset", "body", "properties"]
    assert all(f.nullable for f in schema)   # as declared: Spark checks it


@pytest.mark.parametrize(("ddl", "problem"), [
    ("value binary, body binary", "unknown columns value"),
    ("queue_id string", "a column with another type: queue_id string (it is int)"),
    ("body binary, body binary", "a column twice"),
])
def test_a_schema_that_is_not_a_choice_of_columns_is_refused_by_name(ddl, problem):
    from tidemq.analytics.decode import projection

    with pytest.raises(InvalidArgument, match=r"\.schema\(\.\.\.\) may pick some of them") as exc:
        projection(_struct(ddl))
    assert exc.value.message.endswith(problem)


def test_a_projected_reply_holds_the_full_reads_values_of_its_columns():
    """The bulk path, and the per-record loop (a compressed body) behind it."""
    from tidemq.analytics.decode import projection

    reply = b"".join(stored("t", b"body%d" % n, n, tags="A", keys=["k", str(n)],
                            props={"p": str(n)}) for n in range(4)) + stored(
        "t", compression.compress(b"zipped", "zstd"), 4, sys_flag=rec.SYS_FLAG_COMPRESSED,
        props={rec.PROP_COMPRESSION: "zstd"})
    full = decode_reply(reply, "b", 0, 5, arrow_schema())
    for ddl in ("body binary, queue_offset bigint",
                "properties map<string,string>, keys array<string>, tag string"):
        schema = arrow_schema(projection(_struct(ddl)))
        batch = decode_reply(reply, "b", 0, 5, schema)
        assert batch.schema.equals(schema)
        assert batch.to_pydict() == full.select(schema.names).to_pydict()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2**50)), min_size=1,
                max_size=6), st.data())
def test_the_c_scan_gives_the_python_scans_positions_and_offsets(records, data):
    """tidemq_speedups.scan_positions against record.scan_records_py after any damage: the
    same positions and queue offsets, or None exactly where the Python scan raises."""
    import tidemq_speedups

    reply = damaged(b"".join(stored("t", body, offset) for body, offset in records), data)
    try:
        scanned = rec.scan_records_py(reply)
    except rec.RecordFormatError:
        assert tidemq_speedups.scan_positions(reply) is None
        return
    positions, offsets = tidemq_speedups.scan_positions(reply)
    assert np.frombuffer(positions, np.int64).tolist() == [pos for pos, _ in scanned]
    assert np.frombuffer(offsets, np.int64).tolist() == [h[rec.H_QUEUE_OFFSET] for _, h in scanned]


def test_the_reply_scan_is_the_c_one():
    import tidemq_speedups
    from tidemq.analytics import decode

    assert decode._scan_positions_c is tidemq_speedups.scan_positions, "run `make sync`"
