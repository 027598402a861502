"""Pull replies to Arrow: the columns of the `tidemq` Spark source, one batch per reply.

A partition yields `pyarrow.RecordBatch`es rather than Python rows, so Spark receives a whole
pull reply at once (columnar, no per-row pickling). Records outside the partition's
[start, end) are dropped: pull replies may run past the range end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from tidemq.client import compression
from tidemq.common import record as rec
from tidemq.common.errors import InvalidArgument

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


def arrow_schema() -> pa.Schema:
    """The exact Arrow schema Spark expects for SCHEMA_DDL (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(), timezone="UTC")


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
