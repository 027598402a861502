"""Lazy MessageExt (pull replies) against the eager decode it replaced: same values, same
equality, repr and pickling, whatever order fields are read in."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import compression
from tidemq.client.message import MessageExt, decode_records, decode_records_py
from tidemq.common import record

from tests.support.damage import damaged

FIELDS = ("topic", "body", "tags", "keys", "properties", "broker_name", "queue_id",
          "queue_offset", "msg_id", "unique_id", "born_timestamp", "store_timestamp",
          "reconsume_times", "physical_offset", "user_properties", "trace_carrier")

prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02",
                                           blacklist_categories=("Cs",)), max_size=12)
stored = st.fixed_dictionaries({
    "topic": st.text("abcXYZ019_%|-", min_size=1, max_size=20),
    "body": st.binary(min_size=1, max_size=600),
    "tags": prop_text,
    "keys": st.lists(st.text("abcdef0123", min_size=1, max_size=6), max_size=3),
    "properties": st.dictionaries(st.text("ABCDEFG_", min_size=1, max_size=6), prop_text,
                                  max_size=3),
    "traceparent": st.sampled_from(["", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]),
    "compressed": st.booleans(),
    "queue_id": st.integers(0, 2**31 - 1),
    "queue_offset": st.integers(0, 2**62),
    "physical_offset": st.integers(0, 2**62),
    "store_timestamp": st.integers(0, 2**62),
    "reconsume_times": st.integers(0, 2**31 - 1),
})


def encode(m: dict) -> bytes:
    outgoing = record.OutgoingMessage(m["topic"], m["body"], m["tags"], m["keys"],
                                      m["properties"])
    props = outgoing.system_properties()
    body, sys_flag = m["body"], 0
    if m["traceparent"]:
        props[record.PROP_TRACE_CONTEXT] = m["traceparent"]
    if m["compressed"]:
        body, sys_flag = compression.compress(body, compression.ZSTD), record.SYS_FLAG_COMPRESSED
        props[record.PROP_COMPRESSION] = compression.ZSTD
    return record.encode(
        m["topic"], body, properties=record.encode_properties(props), sys_flag=sys_flag,
        queue_id=m["queue_id"], queue_offset=m["queue_offset"],
        physical_offset=m["physical_offset"], store_timestamp=m["store_timestamp"],
        born_timestamp=m["store_timestamp"] // 3, reconsume_times=m["reconsume_times"],
        store_host=record.pack_host("127.0.0.1", 10911),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(stored, min_size=1, max_size=6), st.permutations(FIELDS))
def test_lazy_messages_equal_the_eager_decode(batch, order):
    raw = b"".join(encode(m) for m in batch)
    eager = [MessageExt.from_record(rec, "broker-a") for rec in record.iter_records(raw)]
    lazy = decode_records(raw, "broker-a")
    for message, expected, spec in zip(lazy, eager, batch, strict=True):
        for name in order:  # any access order gives the eager values
            assert getattr(message, name) == getattr(expected, name), name
        assert message.body == spec["body"] and message.tags == spec["tags"]
        assert message.keys == spec["keys"]
    fresh = decode_records(raw, "broker-a")
    assert fresh == eager and repr(fresh) == repr(eager)  # equality reads every field
    assert [pickle.loads(pickle.dumps(m)) for m in decode_records(raw, "broker-a")] == eager


@settings(max_examples=150, deadline=None)
@given(st.lists(stored, min_size=1, max_size=5), st.data())
def test_the_c_decode_gives_the_python_decodes_messages(batch, data):
    """tidemq_speedups.decode_messages against decode_records_py: the same messages field for
    field, and None exactly where the Python decode raises, after any damage (a byte flipped,
    a torn tail, garbage)."""
    import tidemq_speedups

    raw = damaged(b"".join(encode(m) for m in batch), data)
    by_c = tidemq_speedups.decode_messages(raw, MessageExt, "broker-a")
    try:
        by_py = decode_records_py(raw, "broker-a")
    except record.RecordFormatError:
        assert by_c is None
        return
    assert by_c is not None and len(by_c) == len(by_py)
    for c, py in zip(by_c, by_py, strict=True):
        assert c._buf is raw and c._pos == py._pos and c._h == py._h
        for name in FIELDS:
            try:
                expected = getattr(py, name)
            except record.RecordFormatError:  # a flip can leave text that is not UTF-8
                with pytest.raises(record.RecordFormatError):
                    getattr(c, name)
                continue
            assert getattr(c, name) == expected, name


def test_a_read_message_lets_go_of_the_reply_buffer():
    raw = b"".join(encode({"topic": "t", "body": b"b%d" % i, "tags": "", "keys": [],
                           "properties": {}, "traceparent": "", "compressed": False,
                           "queue_id": 0, "queue_offset": i, "physical_offset": 0,
                           "store_timestamp": 1, "reconsume_times": 0}) for i in range(3))
    first, second, _ = decode_records(raw)
    assert first._buf is raw
    assert first.tags == "" and first._buf is raw  # properties read, body not yet
    assert first.body == b"b0" and first._buf is None
    assert second.body == b"b1" and second._buf is raw
    assert len(pickle.dumps(second)) < len(raw) + 200  # pickles its fields, not the reply


def test_eager_construction_keeps_the_dataclass_signature():
    args = ("t", b"x", "tag", ["k"], {"a": "1", "UNIQ_KEY": "U"}, "broker-a", 1, 7, "M" * 32,
            "U", 5, 6, 0)
    message = MessageExt(*args)
    assert (message.topic, message.body, message.queue_offset, message.msg_id) == (
        "t", b"x", 7, "M" * 32)
    assert message.physical_offset == 0 and message.user_properties == {"a": "1"}
    assert message == MessageExt(*args, physical_offset=0) != MessageExt(*args, 1)
    assert repr(message).startswith("MessageExt(topic='t', body=b'x', tags='tag'")
    with pytest.raises(AttributeError):
        message.topic = "other"  # read-only, like the frozen dataclass
    with pytest.raises(TypeError):
        hash(message)  # keys is a list, as before


def test_a_corrupt_reply_is_refused_when_it_arrives():
    raw = bytearray(encode({"topic": "t", "body": b"x" * 40, "tags": "a", "keys": [],
                            "properties": {}, "traceparent": "", "compressed": False,
                            "queue_id": 0, "queue_offset": 0, "physical_offset": 0,
                            "store_timestamp": 1, "reconsume_times": 0}))
    raw[100] ^= 0xFF
    with pytest.raises(record.RecordFormatError, match="CRC"):
        decode_records(bytes(raw))


def test_non_utf8_properties_fail_when_read_not_when_pulled():
    raw = record.encode("t", b"body", properties=b"\xff\x01v\x02")
    (message,) = decode_records(raw)
    assert message.body == b"body" and message.queue_offset == 0
    with pytest.raises(record.RecordFormatError, match="not UTF-8"):
        _ = message.tags


def test_threads_reading_the_same_messages_see_the_eager_values():
    import sys
    import threading

    batch = [{"topic": "t", "body": b"b%d" % i * 50, "tags": f"t{i % 3}", "keys": ["k"],
              "properties": {"n": str(i)}, "traceparent": "", "compressed": i % 2 == 0,
              "queue_id": 1, "queue_offset": i, "physical_offset": i * 100,
              "store_timestamp": 5, "reconsume_times": 0} for i in range(200)]
    raw = b"".join(encode(m) for m in batch)
    eager = [MessageExt.from_record(rec, "b") for rec in record.iter_records(raw)]
    lazy = decode_records(raw, "b")
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: provoke interleavings
    seen: list[list] = []

    def read(order):
        seen.append([tuple(getattr(m, name) == getattr(e, name) for name in order)
                     for m, e in zip(lazy, eager, strict=True)])

    try:
        threads = [threading.Thread(target=read, args=(FIELDS[i:] + FIELDS[:i],))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    assert len(seen) == 8 and all(all(all(row) for row in rows) for rows in seen)
    assert lazy == eager and all(m._buf is None for m in lazy)
