"""Properties: the C loops of `tidemq_speedups` give exactly the results of the Python loops
in tidemq.broker.store.loops, which define the contract: the same stamped bytes, offsets and
chunks for any batch at any log position (segment rolls included), the same verdict on an
invalid batch, and the same units, runs and index entries for any chunk of the log."""

from __future__ import annotations

import struct

import pytest
import tidemq_speedups
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.store import loops
from tidemq.broker.store.config import StoreError
from tidemq.broker.store.consume_queue import UNIT
from tidemq.broker.store.index import index_put_py
from tidemq.client import message
from tidemq.common import record

from .helpers import HOST, property_lists

SEGMENT = 4096
STAMP = struct.pack(">q8s", 1_700_000_000_123, HOST)


@st.composite
def producer_records(draw, topic: str) -> bytes:
    props = draw(property_lists)
    raw_props = b"".join(f"{n}\x01{v}\x02".encode() for n, v in props)
    if raw_props and draw(st.booleans()):
        raw_props = raw_props[:-1]   # the last value then runs to the record end
    body = draw(st.binary(max_size=300))
    return record.encode(topic, body, properties=raw_props)


def test_the_extension_is_built_and_used():
    assert loops.ACCELERATED, "tidemq_speedups did not import: run `make sync` (needs gcc)"
    assert loops.scan_chunk is tidemq_speedups.scan_chunk
    assert record._encode_batch_c is tidemq_speedups.encode_batch  # the producer's, too
    assert message._decode_messages_c is tidemq_speedups.decode_messages  # the consumers'
    assert tidemq_speedups.crc32_backend() == "isal", "the C loops lost ISA-L's crc32"


def test_only_a_loaded_library_with_zlibs_crc32_values_is_taken_for_the_crc():
    assert not tidemq_speedups.use_crc32(tidemq_speedups.__file__)   # no crc32_gzip_refl
    assert not tidemq_speedups.use_crc32("/nonexistent/libisal.so")  # never loaded
    assert tidemq_speedups.crc32_backend() == "isal"                 # what was chosen stays



def test_bad_calls_raise_and_release_every_buffer_taken():
    """A wrong argument count names the function; a bad later argument leaves no earlier
    buffer exported (a bytearray with an exported buffer refuses to resize)."""
    with pytest.raises(TypeError, match=r"unit_runs takes 2 arguments \(1 given\)"):
        tidemq_speedups.unit_runs(b"")
    buf, units = bytearray(64), bytearray(64)
    with pytest.raises(TypeError):  # the stamp, the last of three buffers, is not one
        tidemq_speedups.stamp_batch(buf, 0, 64, b"\x01t", 7, 42, 0, SEGMENT, SEGMENT, 1 << 20,
                                    None, 0, 0)
    with pytest.raises(BufferError):  # units: bytes are not writable
        tidemq_speedups.scan_chunk(units, b"")
    buf.extend(b"x")
    units.extend(b"x")

def stamp_both(raw: bytes, topic: str, cursor: int, max_size: int = 1 << 20):
    """stamp_batch_py and the C stamp_batch on copies of `raw`: (buffer, outcome) each, the
    outcome being the result tuple, or None / the StoreError for an invalid batch."""
    field = bytes((len(topic),)) + topic.encode()
    segment_end = cursor - cursor % SEGMENT + SEGMENT
    outcomes = []
    for stamp in (loops.stamp_batch_py, tidemq_speedups.stamp_batch):
        buf = bytearray(raw)
        try:
            outcome = stamp(buf, 0, len(buf), field, 7, 42, cursor, segment_end, SEGMENT,
                            max_size, STAMP, cursor, 0)
        except StoreError as exc:
            outcome = exc
        outcomes.append((buf, outcome))
    return outcomes


@settings(max_examples=150, deadline=None)
@given(st.lists(producer_records("orders"), min_size=1, max_size=8),
       st.integers(min_value=0, max_value=3 * SEGMENT))
def test_stamping_matches_for_valid_batches_anywhere_in_the_log(raws, cursor):
    (py_buf, py_out), (c_buf, c_out) = stamp_both(b"".join(raws), "orders", cursor)
    assert not isinstance(py_out, StoreError)
    assert c_out == py_out
    assert c_buf == py_buf
    assert list(record.iter_records(py_buf))   # stamped CRCs verify


@settings(max_examples=200, deadline=None)
@given(st.lists(producer_records("orders"), min_size=1, max_size=4), st.data())
def test_stamping_rejects_exactly_what_python_rejects(raws, data):
    raw = bytearray(b"".join(raws))
    damage = data.draw(st.sampled_from(["byte", "cut", "topic", "size"]))
    if damage == "byte":   # any header or trailer byte
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    elif damage == "cut":
        raw = raw[:data.draw(st.integers(1, len(raw)))]
    elif damage == "size":  # a record larger than the limit
        pass
    outcomes = stamp_both(bytes(raw), "orders" if damage != "topic" else "order5",
                          data.draw(st.integers(0, 2 * SEGMENT)),
                          max_size=200 if damage == "size" else 1 << 20)
    (py_buf, py_out), (c_buf, c_out) = outcomes
    if isinstance(py_out, StoreError):
        assert c_out is None
    else:
        assert c_out == py_out and c_buf == py_buf


def test_the_wrapper_raises_the_python_error_for_an_invalid_batch():
    raw = record.encode("orders", b"x", properties=b"")
    with pytest.raises(StoreError, match="not for topic 'other'"):
        loops.stamp_batch(bytearray(raw), 0, len(raw), b"\x05other", 0, 0, 0, SEGMENT,
                          SEGMENT, 1 << 20, STAMP, 0, 0)


@st.composite
def log_chunks(draw) -> bytes:
    """Stamped records of a few queues as the CommitLog holds them, maybe ending in a filler,
    maybe cut mid-record."""
    out = bytearray()
    offsets: dict[tuple[str, int], int] = {}
    for _ in range(draw(st.integers(1, 10))):
        topic = draw(st.sampled_from(["orders", "pay", "o"]))
        queue_id = draw(st.integers(0, 2))
        raws = draw(st.lists(producer_records(topic), min_size=1, max_size=3))
        first = offsets.get((topic, queue_id), 0) + draw(st.sampled_from([0, 0, 5]))
        buf = bytearray(b"".join(raws))
        field = bytes((len(topic),)) + topic.encode()
        stamped = loops.stamp_batch_py(buf, 0, len(buf), field, queue_id, first, len(out),
                                       1 << 40, 1 << 40, 1 << 20, STAMP, len(out), 0)
        offsets[(topic, queue_id)] = stamped[1]
        out += buf
    tail = draw(st.sampled_from(["none", "filler", "short filler", "cut"]))
    if tail == "filler":
        out += record.BLANK_HEADER.pack(0, record.BLANK_MAGIC) + bytes(100)
    elif tail == "short filler":
        out += record.BLANK_HEADER.pack(0, record.BLANK_MAGIC)
    elif tail == "cut":
        out = out[:draw(st.integers(1, len(out)))]
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(log_chunks())
def test_scanning_matches(chunk):
    size = 20 * (len(chunk) // (record.HEADER_SIZE + 3) + 1)
    py_units, c_units = bytearray(size), bytearray(size)
    py_out = loops.scan_chunk_py(chunk, py_units)
    c_out = tidemq_speedups.scan_chunk(chunk, c_units)
    assert c_out == py_out
    assert c_units == py_units


def test_scanning_reports_garbage_as_no_record():
    chunk = record.encode("orders", b"x", properties=b"") + b"\x00\x00\x00\x99" + bytes(100)
    units = bytearray(200)
    for scan in (loops.scan_chunk_py, tidemq_speedups.scan_chunk):
        pos, filler, bad, runs, _ = scan(chunk, units)
        assert (filler, bad, len(runs)) == (False, True, 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x7FFFFFFF), st.integers(0, 2**40),
                          st.integers(0, 2**45)), max_size=40),
       st.integers(1, 30), st.integers(0, 10), st.integers(0, 2**45), st.binary(max_size=200))
def test_indexing_matches(entries, slots, count, begin_ts, garbage):
    """From any prior content of the slots (stale or out-of-range heads included)."""
    entries_at = 40 + slots * 4
    initial = bytearray(entries_at + (count + len(entries)) * 20)
    garbage = garbage[:entries_at - 40]
    initial[40:40 + len(garbage)] = garbage
    py_mm, c_mm = bytearray(initial), bytearray(initial)
    py_out = index_put_py(py_mm, slots, entries_at, count, begin_ts, begin_ts, entries)
    c_out = tidemq_speedups.index_put(c_mm, slots, entries_at, count, begin_ts, begin_ts,
                                      entries)
    assert c_out == py_out
    assert c_mm == py_mm


def test_indexing_refuses_entries_that_do_not_fit():
    with pytest.raises(ValueError, match="do not fit"):
        tidemq_speedups.index_put(bytearray(100), 4, 56, 1, 0, 0, [(1, 2, 3), (1, 2, 3)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(91, 5000)), min_size=1, max_size=60),
       st.integers(0, 2**40), st.integers(0, 200_000))
def test_unit_runs_match(units, first, max_bytes):
    """Units back to back in the log or not (a gap before a unit), any byte limit."""
    raw, physical = bytearray(), first
    for gap, size in units:
        physical += 7 * gap
        raw += UNIT.pack(physical, size, 0)
        physical += size
    assert tidemq_speedups.unit_runs(bytes(raw), max_bytes) == loops.unit_runs_py(bytes(raw),
                                                                                  max_bytes)
