"""Pull replies to Arrow: the columns of the `tidemq` Spark source, one batch per reply.

A partition yields `pyarrow.RecordBatch`es rather than Python rows, so Spark receives a whole
pull reply at once (columnar, no per-row pickling). Records outside the partition's
[start, end) are dropped: pull replies may run past the range end.

Three decoders with one contract. `decode_reply` checks a whole reply in one pass (`_scan`:
C where built), then hands the records in the range to `bulk.bulk_columns`: numpy and Arrow
over the reply's bytes, no Python per message, for every reply of plain records whose
properties are as the SDK writes them. When a reply needs more (a compressed body, a name
twice, an item without \x01 or without its closing \x02, text that is not UTF-8), `_columns`
takes it: one lean loop that slices each record's body, topic and properties (split into a
dict as `record.decode_properties` does), Arrow building the columns from plain lists.
`ColumnBuilder` decodes record by record (`record.iter_records`, a `Record` per message) and
is the reference; the loop hands the records to it when a topic or properties are not UTF-8
or a property item has no \x01 (the reference then raises its precise error, or reads the
item as a name with an empty value), so all give the same batch, or the same error, for the
records in the range of any reply (tests/unit/analytics/test_decode.py, test_bulk.py).
"""

from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass, field
from operator import methodcaller

import numpy as np
import pyarrow as pa
from tidemq.analytics.bulk import bulk_columns
from tidemq.common import record as rec
from tidemq.common.errors import InvalidArgument

try:  # the C scan of a reply (native/), optional: `record.scan_records` is its twin
    from tidemq_speedups import scan_positions as _scan_positions_c
except ImportError:
    _scan_positions_c = None

# Column order of the rows (Spark's Kafka source layout, adapted to TideMQ records).
COLUMNS = (
    "topic", "broker", "queue_id", "queue_offset", "msg_id", "unique_id", "tag", "keys",
    "properties", "body", "born_timestamp", "store_timestamp",
)

def decompress_body(record: rec.Record) -> bytes:
    """The body as the producer gave it: undo compression when SYS_FLAG_COMPRESSED is set.

    The codec is named by the COMPRESSION property (the client library's codecs); zstd when
    absent.
    """
    if not record.sys_flag & rec.SYS_FLAG_COMPRESSED:
        return bytes(record.body)
    from tidemq.client import compression  # the whole SDK: imported only when needed

    codec = record.properties.get(rec.PROP_COMPRESSION, compression.ZSTD)
    try:
        return compression.decompress(bytes(record.body), codec)
    except InvalidArgument as exc:
        raise InvalidArgument(
            f"message at queue {record.queue_id} offset {record.queue_offset}: {exc.message}",
            code="UNSUPPORTED_COMPRESSION",
        ) from None


@dataclass
class ColumnBuilder:
    """Accumulates decoded records column by column, then emits one Arrow batch."""

    broker: str
    schema: pa.Schema
    columns: dict[str, list] = field(default_factory=lambda: {name: [] for name in COLUMNS})

    def __len__(self) -> int:
        return len(self.columns["queue_offset"])

    def add(self, record: rec.Record) -> None:
        c = self.columns
        props = record.properties
        c["topic"].append(record.topic)
        c["broker"].append(self.broker)
        c["queue_id"].append(record.queue_id)
        c["queue_offset"].append(record.queue_offset)
        c["msg_id"].append(record.msg_id)
        c["unique_id"].append(props.get(rec.PROP_UNIQ_KEY, ""))
        c["tag"].append(props.get(rec.PROP_TAGS, ""))
        c["keys"].append(record.keys)
        c["properties"].append(list(props.items()))
        c["body"].append(decompress_body(record))
        c["born_timestamp"].append(record.born_timestamp * 1000)  # ms -> Spark's us
        c["store_timestamp"].append(record.store_timestamp * 1000)

    def add_slice(self, records: bytes, start: int, end: int) -> int:
        """Decode a pull reply, keeping records with start <= queue_offset < end; returns kept."""
        kept = 0
        for record in rec.iter_records(records):
            if start <= record.queue_offset < end:
                self.add(record)
                kept += 1
        return kept

    def flush(self) -> pa.RecordBatch:
        arrays = [
            pa.array(self.columns[f.name], type=f.type) for f in self.schema
        ]
        self.columns = {name: [] for name in COLUMNS}
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


_PACK_I64 = struct.Struct(">q").pack
_ITEM = "\x02"  # record._PROPERTY_SEP: ends every name\x01value item
_NAME_VALUE = "\x01"  # record._NAME_VALUE_SEP


def decode_reply(records: bytes, broker: str, start: int, end: int,
                 schema: pa.Schema) -> pa.RecordBatch:
    """One pull reply -> one batch of its records with start <= queue_offset < end (maybe
    empty) of `schema`'s columns. Every record's framing and CRC are checked first (`_scan`),
    as `ColumnBuilder` checks them."""
    full = arrow_schema()  # every column is decoded; `schema` says which are handed on
    positions, queue_offsets = _scan(records)
    in_range = (queue_offsets >= start) & (queue_offsets < end)
    columns = bulk_columns(records, positions[in_range], broker, full)
    if columns is not None:
        return _projected(columns, schema)
    kept = [found for found, keep in zip(rec.scan_records(records, verify_crc=False),
                                         in_range.tolist(), strict=True) if keep]
    try:
        columns = _columns(records, kept, broker, full)
    except (ValueError, UnicodeDecodeError, pa.ArrowInvalid):
        columns = None  # the reference decoder says precisely what is wrong, or reads it
    if columns is None:
        builder = ColumnBuilder(broker, schema)
        for pos, _ in kept:
            builder.add(rec.decode(records, pos, verify_crc=False))  # checked by the scan
        return builder.flush()
    return _projected(columns, schema)


def _scan(records: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The positions and queue offsets of a reply's records, every record's framing and CRC
    checked: one C pass without a tuple per record where tidemq_speedups is built
    (`scan_positions`), else `record.scan_records`, which also names a bad record."""
    found = _scan_positions_c(records) if _scan_positions_c is not None else None
    if found is not None:
        return np.frombuffer(found[0], np.int64), np.frombuffer(found[1], np.int64)
    scanned = rec.scan_records(records)
    return (np.fromiter((pos for pos, _ in scanned), np.int64, len(scanned)),
            np.fromiter((header[rec.H_QUEUE_OFFSET] for _, header in scanned), np.int64,
                        len(scanned)))


def _projected(columns: dict, schema: pa.Schema) -> pa.RecordBatch:
    """The batch of `schema`'s columns; a column the user declared with nullable elements or
    values is cast to that type (the same values)."""
    arrays = []
    for f in schema:
        array = columns[f.name]
        arrays.append(array if array.type == f.type else array.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _columns(buf: bytes, kept: list, broker: str, schema: pa.Schema) -> dict:
    """The columns of the checked records `kept` ([(position, header)]); ValueError when
    one needs the reference decoder (an item without \x01, text that is not UTF-8)."""
    topics, bodies, names, values, ends, tags, unique_ids, keys = ([] for _ in range(8))
    # locals: this loop runs once per message
    header_size, body_len, total_size, sys_flag = (rec.HEADER_SIZE, rec.H_BODY_LEN,
                                                   rec.H_TOTAL_SIZE, rec.H_SYS_FLAG)
    compressed, separator = rec.SYS_FLAG_COMPRESSED, rec.KEY_SEPARATOR
    split_item = methodcaller("split", _NAME_VALUE, 1)
    for pos, header in kept:
        body_start = pos + header_size
        body_end = body_start + header[body_len]
        topic_end = body_end + 1 + buf[body_end]
        topics.append(buf[body_end + 1:topic_end])
        # record.decode_properties: a dict keeps a name's first place and its last value;
        # an item without \x01 makes dict() raise ValueError
        props = dict(map(split_item, filter(None, str(
            buf[topic_end + 2:pos + header[total_size]], "utf-8").split(_ITEM))))
        names.extend(props)
        values.extend(props.values())
        ends.append(len(names))
        tags.append(props.get(rec.PROP_TAGS, ""))
        unique_ids.append(props.get(rec.PROP_UNIQ_KEY, ""))
        key_text = props.get(rec.PROP_KEYS)
        keys.append(key_text.split(separator) if key_text else [])
        if header[sys_flag] & compressed:
            bodies.append(decompress_body(rec.decode(buf, pos, verify_crc=False)))
        else:
            bodies.append(buf[body_start:body_end])
    headers = [header for _, header in kept]
    return {
        "topic": pa.array(topics, pa.binary()).cast(pa.string()),  # checks UTF-8
        "broker": pa.array([broker] * len(kept), pa.string()),
        "queue_id": pa.array([h[rec.H_QUEUE_ID] for h in headers], pa.int32()),
        "queue_offset": pa.array([h[rec.H_QUEUE_OFFSET] for h in headers], pa.int64()),
        "msg_id": pa.array([(h[rec.H_STORE_HOST] + _PACK_I64(h[rec.H_PHYSICAL_OFFSET]))
                            .hex().upper() for h in headers], pa.string()),
        "unique_id": pa.array(unique_ids, pa.string()),
        "tag": pa.array(tags, pa.string()),
        "keys": pa.array(keys, schema.field("keys").type),
        "properties": pa.MapArray.from_arrays(
            pa.array([0, *ends], pa.int32()), pa.array(names, pa.string()),
            pa.array(values, pa.string()), type=schema.field("properties").type),
        "body": pa.array(bodies, pa.binary()),
        "born_timestamp": pa.array([h[rec.H_BORN_TIMESTAMP] * 1000 for h in headers],
                                   schema.field("born_timestamp").type),
        "store_timestamp": pa.array([h[rec.H_STORE_TIMESTAMP] * 1000 for h in headers],
                                    schema.field("store_timestamp").type),
    }


@functools.cache
def arrow_schema(projected: str = "") -> pa.Schema:
    """The exact Arrow schema Spark expects (timestamps in UTC): for spark_schema, or for the
    schema a user gave (`projected`: its JSON, from `projection`)."""
    from pyspark.sql import types as t
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = t.StructType.fromJson(json.loads(projected)) if projected else spark_schema()
    return to_arrow_schema(schema, timezone="UTC")


def projection(schema) -> str:
    """What a read hands to Spark, for `arrow_schema`: "" for every column, else the JSON of
    the schema the user gave with .schema(...). Its columns must be columns of spark_schema
    with their types (nullable or not), in any order: the Python Data Source API has no column
    pruning, so this is how a job asks for fewer columns, and Spark then converts only those."""
    problem = _projection_problem(schema)
    if problem:
        raise InvalidArgument(
            f"format 'tidemq' reads columns of {spark_schema().simpleString()}; "
            f".schema(...) may pick some of them, in any order, with their types: {problem}")
    return "" if schema == spark_schema() else schema.json()


def _projection_problem(schema) -> str:
    """What makes `schema` not a choice of the source's columns, "" if nothing."""
    full = {f.name: f.dataType for f in spark_schema().fields}
    names = [f.name for f in schema.fields]
    unknown = [name for name in names if name not in full]
    if unknown:
        return f"unknown columns {', '.join(unknown)}"
    retyped = [f"{f.name} {f.dataType.simpleString()} (it is {full[f.name].simpleString()})"
               for f in schema.fields if _nullable(f.dataType) != _nullable(full[f.name])]
    if retyped:
        return f"a column with another type: {'; '.join(retyped)}"
    if not names:
        return "no column"
    return "a column twice" if len(set(names)) != len(names) else ""


def _nullable(data_type):
    """`data_type` with every element and value nullable: types compared without that."""
    from pyspark.sql import types as t

    if isinstance(data_type, t.ArrayType):
        return t.ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, t.MapType):
        return t.MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


def spark_schema():
    """topic, broker, queue_id, queue_offset, msg_id, unique_id, tag, keys, properties, body,
    born_timestamp, store_timestamp; none is null (absent tag/unique id = "")."""
    from pyspark.sql import types as t

    kinds = {
        "queue_id": t.IntegerType(), "queue_offset": t.LongType(),
        "keys": t.ArrayType(t.StringType(), containsNull=False),
        "properties": t.MapType(t.StringType(), t.StringType(), valueContainsNull=False),
        "body": t.BinaryType(), "born_timestamp": t.TimestampType(),
        "store_timestamp": t.TimestampType(),
    }
    return t.StructType(
        [t.StructField(name, kinds.get(name, t.StringType()), nullable=False) for name in COLUMNS]
    )
