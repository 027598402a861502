"""record.retarget: the one function that moves a stored record to another topic/queue."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tidemq.common import record

names = st.text(alphabet="ABCDEFGHIJ_", min_size=1, max_size=8)
values = st.text(alphabet=st.characters(blacklist_characters="\x01\x02",
                                        blacklist_categories=("Cs",)), max_size=12)
topics = st.text(alphabet="abcXYZ019_%-|", min_size=1, max_size=40)


@given(body=st.binary(max_size=1024), props=st.dictionaries(names, values, max_size=4),
       new_topic=topics, queue_id=st.integers(0, 1023), times=st.integers(0, 64),
       sys_flag=st.sampled_from([0, record.SYS_FLAG_COMPRESSED]),
       set_props=st.dictionaries(names, values, max_size=3),
       keep_props=st.dictionaries(names, values, max_size=3))
def test_retarget_moves_the_record_and_keeps_its_bytes(body, props, new_topic, queue_id, times,
                                                       sys_flag, set_props, keep_props):
    stored = record.encode("orders", body, properties=record.encode_properties(props),
                           queue_id=3, queue_offset=77, physical_offset=4096,
                           sys_flag=sys_flag, born_timestamp=1234, reconsume_times=2,
                           store_timestamp=999, store_host=record.pack_host("127.0.0.1", 9))
    moved = record.retarget(stored, new_topic, queue_id=queue_id, reconsume_times=times,
                            set_properties=set_props, keep_properties=keep_props)
    out = record.decode(moved)  # the CRC is checked here
    assert out.topic == new_topic and out.queue_id == queue_id
    assert bytes(out.body) == body and out.sys_flag == sys_flag
    assert out.reconsume_times == times and out.born_timestamp == 1234
    assert (out.queue_offset, out.physical_offset, out.store_timestamp) == (0, 0, 0)
    assert out.store_host == b"\0" * 8
    expected = {**keep_props, **props, **set_props}
    assert out.properties == expected


def test_retarget_keeps_reconsume_times_unless_told():
    stored = record.encode("a", b"x", reconsume_times=5)
    assert record.decode(record.retarget(stored, "b")).reconsume_times == 5


@given(body=st.binary(max_size=256), times=st.integers(0, 2**31 - 1))
def test_with_reconsume_times_changes_only_the_count(body, times):
    stored = record.encode("o", body, queue_offset=9, physical_offset=77, reconsume_times=0)
    copy = record.with_reconsume_times(stored, times)
    out = record.decode(copy)  # CRC recomputed
    assert out.reconsume_times == times and bytes(out.body) == body
    assert copy[:record.OFF_RECONSUME_TIMES][record.CRC_START:] == \
        stored[:record.OFF_RECONSUME_TIMES][record.CRC_START:]


@given(body=st.binary(max_size=128), compressed=st.booleans(),
       before=st.sampled_from([record.TRANSACTION_NOT_TYPE, record.TRANSACTION_PREPARED_TYPE]),
       after=st.sampled_from([record.TRANSACTION_PREPARED_TYPE, record.TRANSACTION_COMMIT_TYPE,
                              record.TRANSACTION_ROLLBACK_TYPE]))
def test_retarget_replaces_only_the_transaction_bits(body, compressed, before, after):
    flag = (record.SYS_FLAG_COMPRESSED if compressed else 0) | before
    stored = record.encode("orders", body, sys_flag=flag)
    out = record.decode(record.retarget(stored, "half", transaction_type=after))
    assert out.sys_flag & record.TRANSACTION_TYPE_MASK == after
    assert out.sys_flag & record.SYS_FLAG_COMPRESSED == flag & record.SYS_FLAG_COMPRESSED
    assert bytes(out.body) == body


@given(props=st.dictionaries(names, values, max_size=5), set_props=st.dictionaries(
    names, values, max_size=3), drop=st.lists(names, max_size=3),
    sys_flag=st.integers(0, 0x1F), clear=st.sampled_from([0, record.SYS_FLAG_SCHEDULED]))
def test_retarget_drops_properties_and_clears_flags(props, set_props, drop, sys_flag, clear):
    """What scheduled delivery does on the way out (and, with new names only, on the way in:
    appended without decoding — the decoded result is the same)."""
    stored = record.encode("orders", b"body", properties=record.encode_properties(props),
                           sys_flag=sys_flag)
    moved = record.decode(record.retarget(stored, "t", set_properties=set_props,
                                          drop_properties=drop, clear_sys_flags=clear))
    expected = {**props, **set_props}
    for name in drop:
        expected.pop(name, None)
    assert moved.properties == expected and moved.sys_flag == sys_flag & ~clear
    assert bytes(moved.body) == b"body"


@given(props=st.dictionaries(names, values, max_size=6), name=names)
def test_property_at_reads_one_property_as_properties_at_does(props, name):
    stored = record.encode("orders", b"body", properties=record.encode_properties(props))
    header = record.checked_header(memoryview(stored), 0)
    assert record.property_at(stored, 0, header, name) == props.get(name)
