"""Pull replies to Arrow columns in bulk: numpy over the reply's bytes, no Python per message.

The common reply (plain bodies, properties as the SDK writes them) is decoded with a few
array operations per column rather than a loop over its records:

* the fixed header fields of all records are one gather of their 88 bytes, read through
  a big-endian numpy record type (`_HEADER`);
* bodies, topics, property names and values are Arrow binary *views* into the reply (16
  bytes per value, built in numpy), which one Arrow cast turns into the plain `binary` /
  `string` columns Spark expects (the cast to string checks UTF-8);
* properties are split where the \x02 and \x01 bytes are (`np.flatnonzero`), every item
  mapped to its record with `searchsorted`; tag, unique id and keys are picked by name.

`bulk_columns` answers None when a reply needs the per-record loop (`decode._columns`): a
compressed body, a property region that does not end with \x02, an item without \x01, a
name twice in one record (a dict keeps its first place and last value), text that is not
UTF-8. The loop, and the reference decoder behind it, then give the batch or the precise
error; tests/unit/analytics/test_bulk.py holds the three to equal batches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tidemq.common import record as rec

_ITEM, _NAME_VALUE = 0x02, 0x01  # record._PROPERTY_SEP, record._NAME_VALUE_SEP
_INLINE = 12  # an Arrow binary view holds values up to 12 bytes inline, longer ones by offset
_MSG_ID_WIDTH = 32  # record.offset_msg_id: hex of store host (8 bytes) + physical offset (8)


def bulk_columns(buf: bytes, positions: np.ndarray, broker: str,
                 schema: pa.Schema) -> dict | None:
    """The columns of the checked records at `positions` (int64, in reply order), or None
    when one of them needs the per-record decoder (see the module docstring)."""
    if len(buf) >= 2**31:  # view offsets are int32; replies are a few MiB
        return None
    u8 = _padded(buf)
    headers = _rows(u8, positions, rec.HEADER_SIZE).view(_HEADER)[:, 0]
    if (headers["sys_flag"] & rec.SYS_FLAG_COMPRESSED).any():
        return None
    body_start = positions + rec.HEADER_SIZE
    body_end = body_start + headers["body_len"]
    topic_end = body_end + 1 + u8[body_end]
    props_end = positions + headers["total_size"]
    try:
        properties = _properties(_slices(u8, topic_end + 2, props_end), len(positions))
        if properties is None:
            return None
        topic = _slices(u8, body_end + 1, topic_end).cast(pa.string())  # checks UTF-8
    except pa.ArrowInvalid:
        return None
    names, values, ends, pick = properties
    # "" and absent are both no keys; a null splits into an empty list
    split = pc.split_pattern(pick(rec.PROP_KEYS, nonempty=True), rec.KEY_SEPARATOR)
    return {
        "topic": topic,
        "broker": pa.array([broker] * len(positions), pa.string()),
        "queue_id": pa.array(headers["queue_id"].astype(np.int32), pa.int32()),
        "queue_offset": pa.array(headers["queue_offset"].astype(np.int64), pa.int64()),
        "msg_id": _msg_ids(headers),
        "unique_id": pick(rec.PROP_UNIQ_KEY).fill_null(""),
        "tag": pick(rec.PROP_TAGS).fill_null(""),
        "keys": pa.ListArray.from_arrays(split.offsets, split.values,
                                         type=schema.field("keys").type),
        "properties": pa.MapArray.from_arrays(pa.array(ends, pa.int32()), names, values,
                                              type=schema.field("properties").type),
        "body": _slices(u8, body_start, body_end),
        "born_timestamp": pa.array(
            headers["born_timestamp"].astype(np.int64) * 1000,  # ms -> Spark's us
            schema.field("born_timestamp").type),
        "store_timestamp": pa.array(headers["store_timestamp"].astype(np.int64) * 1000,
                                    schema.field("store_timestamp").type),
    }


# record.HEADER as a numpy record (big-endian, the same offsets), read by one gather
_HEADER = np.dtype({
    "names": ["total_size", "queue_id", "queue_offset", "physical_offset", "sys_flag",
              "born_timestamp", "store_timestamp", "store_host", "body_len"],
    "formats": [">i4", ">i4", ">i8", "S8", ">i4", ">i8", ">i8", "S8", ">i4"],
    "offsets": [rec.OFF_TOTAL_SIZE, rec.OFF_QUEUE_ID, rec.OFF_QUEUE_OFFSET,
                rec.OFF_PHYSICAL_OFFSET, rec.OFF_SYS_FLAG, rec.OFF_BORN_TIMESTAMP,
                rec.OFF_STORE_TIMESTAMP, rec.OFF_STORE_HOST, rec.OFF_BODY_LEN],
    "itemsize": rec.HEADER_SIZE,
})
_LANES = np.arange(_INLINE)


def _padded(data) -> np.ndarray:
    """The bytes followed by 12 zeros, so that every value's first 12 bytes can be read."""
    padded = np.zeros(len(data) + _INLINE, np.uint8)
    padded[:len(data)] = np.frombuffer(data, np.uint8, len(data))
    return padded


def _rows(u8: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """u8[start:start + width] for every start, as one (count, width) array (a row gather
    over a sliding-window view: a copy of `width` bytes per row, no index per byte)."""
    windows = np.ndarray((max(len(u8) - width + 1, 0), width), np.uint8, buffer=u8, strides=(1, 1))
    return windows[starts]


def _slices(u8: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """u8[starts[i]:ends[i]] for every i as a `binary` array (`u8` from `_padded`): views
    built in numpy (length, then the value itself up to 12 bytes, else its first 4 bytes,
    buffer 0 and its offset; Arrow's view layout), copied into one contiguous array by
    Arrow's cast."""
    count = len(starts)
    lengths = (ends - starts).astype(np.int32)
    head = _rows(u8, starts, _INLINE)
    head *= lengths[:, None] > _LANES  # inline values are padded with zeros
    words = head.view("<i4")  # (count, 3): the 12 bytes after the length
    by_offset = lengths > _INLINE
    views = np.empty((count, 4), "<i4")
    views[:, 0] = lengths
    views[:, 1] = words[:, 0]  # inline bytes 0-3, or the prefix: the same bytes
    views[:, 2] = np.where(by_offset, 0, words[:, 1])  # buffer index 0: `buf`
    views[:, 3] = np.where(by_offset, starts, words[:, 2])
    array = pa.Array.from_buffers(pa.binary_view(), count,
                                  [None, pa.py_buffer(views), pa.py_buffer(u8)])
    return array.cast(pa.binary())


def _properties(regions: pa.Array, count: int):
    """Split every record's property region into names and values: (names, values, map
    offsets, pick), or None when a region is not in the form `record.encode_properties`
    writes (or one `decode_properties` reads the same way)."""
    offsets = np.frombuffer(regions.buffers()[1], np.int32, count + 1).astype(np.int64)
    data = regions.buffers()[2]
    text = _padded(memoryview(data)[:offsets[-1]] if data is not None else b"")
    filled = offsets[1:] > offsets[:-1]
    if (text[offsets[1:][filled] - 1] != _ITEM).any():
        return None
    separators = np.flatnonzero(text[:offsets[-1]] == _ITEM)
    item_start = np.concatenate(([0], separators[:-1] + 1)).astype(np.int64)
    item_end = separators
    nonempty = item_end > item_start  # filter(None, ...) drops empty items
    item_start, item_end = item_start[nonempty], item_end[nonempty]
    name_ends = np.flatnonzero(text[:offsets[-1]] == _NAME_VALUE)
    first = np.searchsorted(name_ends, item_start)
    if (first >= len(name_ends)).any():
        return None
    name_end = name_ends[first]
    if (name_end >= item_end).any():  # an item without \x01
        return None
    record_of = np.searchsorted(offsets, item_start, side="right") - 1
    names = _slices(text, item_start, name_end).cast(pa.string())  # checks UTF-8
    values = _slices(text, name_end + 1, item_end).cast(pa.string())
    if _repeats_a_name(names, record_of):
        return None  # a dict keeps the first place and the last value: the loop's job
    ends = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(record_of, minlength=count), out=ends[1:])
    value_lengths = item_end - name_end - 1

    def pick(name: str, *, nonempty: bool = False) -> pa.Array:
        """Each record's value of property `name` (null where it has none)."""
        hit = pc.equal(names, name).to_numpy(zero_copy_only=False)
        if nonempty:
            hit = hit & (value_lengths > 0)
        where = np.full(count, -1, np.int64)
        where[record_of[hit]] = np.flatnonzero(hit)
        return values.take(pa.array(where, mask=where < 0))

    return names, values, ends, pick


def _repeats_a_name(names: pa.Array, record_of: np.ndarray) -> bool:
    """Whether some record holds a property name twice."""
    if len(names) < 2:
        return False
    codes = pc.dictionary_encode(names).indices.to_numpy().astype(np.int64)
    pairs = np.sort(record_of * (int(codes.max()) + 1) + codes)
    return bool((pairs[1:] == pairs[:-1]).any())


def _msg_ids(headers: np.ndarray) -> pa.Array:
    """record.offset_msg_id of every record: hex, upper case, of the store host and the
    big-endian physical offset, both as the header holds them."""
    raw = np.empty((len(headers), 2), "S8")
    raw[:, 0], raw[:, 1] = headers["store_host"], headers["physical_offset"]
    hexed = raw.tobytes().hex().upper().encode()
    offsets = np.arange(0, len(headers) * _MSG_ID_WIDTH + 1, _MSG_ID_WIDTH, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(headers),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(hexed)])
