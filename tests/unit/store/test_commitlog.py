"""CommitLog: stamping, segment roll with blank filler, all-or-nothing batches, tail recovery."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import InvalidBatch, MessageTooLarge
from tidemq.broker.store.commitlog import CommitLog
from tidemq.broker.store.segment import segment_name
from tidemq.common import record

from .helpers import HOST, encode_batch

SEGMENT = 64 * 1024


def new_log(directory, segment_size=SEGMENT, max_message_size=32 * 1024) -> CommitLog:
    log = CommitLog(directory, segment_size, max_message_size)
    log.load()
    log.recover(0)
    return log


def walk(log: CommitLog) -> list[record.Record]:
    """Every record from the log start, following fillers into the next segment."""
    found, offset = [], log.min_offset
    while offset < log.max_offset:
        head = log.read(offset, 8)
        total, magic = record.BLANK_HEADER.unpack(head)
        if magic == record.BLANK_MAGIC:
            assert (offset + total) % log.segment_size == 0, "a filler runs to the segment end"
            offset += total
            continue
        found.append(record.decode(log.read(offset, total)))
        offset += total
    return found


def test_append_stamps_broker_fields_and_crc(tmp_path):
    log = new_log(tmp_path)
    raw, _ = encode_batch("orders", [b"a", b"bb", b"ccc"])
    first, physical = log.append_batch("orders", 3, raw, 3, HOST)
    assert first == 0
    decoded = [record.decode(log.read(p, log.record_size_at(p))) for p in physical]
    assert [r.queue_offset for r in decoded] == [0, 1, 2]
    assert [r.physical_offset for r in decoded] == physical
    assert {r.queue_id for r in decoded} == {3}
    assert all(r.store_timestamp > 0 and r.store_host == HOST for r in decoded)
    second, _ = log.append_batch("orders", 3, encode_batch("orders", [b"d"])[0], 1, HOST)
    assert second == 3


def test_roll_writes_filler_and_continues_in_next_segment(tmp_path):
    log = new_log(tmp_path)
    body = b"x" * 5000
    for _ in range(30):
        log.append_batch("t", 0, encode_batch("t", [body])[0], 1, HOST)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[:3] == [segment_name(0), segment_name(SEGMENT), segment_name(2 * SEGMENT)]
    records = walk(log)
    assert [r.queue_offset for r in records] == list(range(30))
    assert all(r.physical_offset // SEGMENT == (r.physical_offset + r.total_size - 1) // SEGMENT
               for r in records), "no record straddles two segments"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(0, 6000), min_size=1, max_size=12), min_size=1, max_size=25))
def test_random_batches_across_segment_boundaries(tmp_path_factory, batches):
    directory = tmp_path_factory.mktemp("log")
    log = new_log(directory)
    expected = []
    for sizes in batches:
        bodies = [bytes([len(expected) % 251]) * n for n in sizes]
        expected.extend(bodies)
        log.append_batch("t", 1, encode_batch("t", bodies)[0], len(bodies), HOST)
    records = walk(log)
    assert [bytes(r.body) for r in records] == expected
    assert [r.queue_offset for r in records] == list(range(len(expected)))
    log.close()
    reopened = new_log(directory)
    assert reopened.max_offset == log.max_offset
    assert [bytes(r.body) for r in walk(reopened)] == expected
    reopened.close()


@pytest.mark.parametrize(
    ("mangle", "error", "message"),
    [
        (lambda b: b[:-1], InvalidBatch, "total_size"),
        (lambda b: b[:4] + b"\0\0\0\0" + b[8:], InvalidBatch, "magic"),
        (lambda b: b + b"\0" * 20, InvalidBatch, "truncated"),
    ],
)
def test_invalid_batch_appends_nothing(tmp_path, mangle, error, message):
    log = new_log(tmp_path)
    raw, _ = encode_batch("t", [b"one", b"two"])
    with pytest.raises(error, match=message):
        log.append_batch("t", 0, mangle(raw), 2, HOST)
    assert log.max_offset == 0 and log.next_queue_offset("t", 0) == 0


def test_batch_refusals_name_the_problem(tmp_path):
    log = new_log(tmp_path, max_message_size=2000)
    raw, _ = encode_batch("t", [b"a", b"b"])
    with pytest.raises(InvalidBatch, match="record_count"):
        log.append_batch("t", 0, raw, 3, HOST)
    with pytest.raises(InvalidBatch, match="not for topic"):
        log.append_batch("other", 0, raw, 2, HOST)
    with pytest.raises(MessageTooLarge, match="limit is 2000"):
        log.append_batch("t", 0, encode_batch("t", [b"z" * 3000])[0], 1, HOST)
    assert log.max_offset == 0


def test_recovery_truncates_torn_tail_and_zeroes_it(tmp_path):
    log = new_log(tmp_path)
    for _ in range(5):
        log.append_batch("t", 0, encode_batch("t", [b"y" * 300])[0], 1, HOST)
    good_end = log.max_offset
    torn = encode_batch("t", [b"z" * 300])[0][:150]
    log.segments[-1].write(good_end, torn)
    log.close()
    recovered = CommitLog(tmp_path, SEGMENT, 32 * 1024)
    recovered.load()
    report = recovered.recover(0)
    assert report.end_offset == good_end and report.truncated_bytes
    assert recovered.read(good_end, 0) == b"" and len(walk(recovered)) == 5
    assert recovered.segments[-1].mm[good_end:good_end + 150] == bytes(150)


def test_recovery_rejects_unstamped_record_with_valid_crc(tmp_path):
    """A producer's record copied in but never stamped must not survive recovery."""
    log = new_log(tmp_path)
    log.append_batch("t", 0, encode_batch("t", [b"a"])[0], 1, HOST)
    end = log.max_offset
    log.segments[-1].write(end, encode_batch("t", [b"b"])[0])
    log.close()
    recovered = CommitLog(tmp_path, SEGMENT, 32 * 1024)
    recovered.load()
    assert recovered.recover(0).end_offset == end


def test_recovery_removes_segments_after_damage(tmp_path):
    log = new_log(tmp_path)
    for _ in range(30):
        log.append_batch("t", 0, encode_batch("t", [b"x" * 5000])[0], 1, HOST)
    assert len(log.segments) >= 3
    log.segments[0].write(100, b"\xff" * 16)   # damage inside the first segment
    log.close()
    recovered = CommitLog(tmp_path, SEGMENT, 32 * 1024)
    recovered.load()
    report = recovered.recover(0)
    assert report.end_offset == 0 and report.segments_removed >= 2
    assert len(recovered.segments) == 1


@pytest.mark.parametrize("topic", ["../etc", "a/b", "", "x" * 250, "tópico"])
def test_unsafe_topic_names_are_refused(tmp_path, topic):
    log = new_log(tmp_path)
    with pytest.raises(InvalidBatch, match="topic"):
        log.append_batch(topic, 0, b"\0" * 100, 1, HOST)
    assert log.max_offset == 0


def test_queue_id_out_of_range_is_refused(tmp_path):
    log = new_log(tmp_path)
    with pytest.raises(InvalidBatch, match="queue id -1"):
        log.append_batch("t", -1, encode_batch("t", [b"a"])[0], 1, HOST)


def test_prepared_segments_are_used_and_leftovers_removed(tmp_path):
    log = CommitLog(tmp_path, SEGMENT, 32 * 1024, warm_segments=True)
    log.load()
    log.recover(0)
    for _ in range(60):   # five rolls; each claims a prepared or a freshly created segment
        log.append_batch("t", 0, encode_batch("t", [b"w" * 5000])[0], 1, HOST)
    assert [r.queue_offset for r in walk(log)] == list(range(60))
    log.close()
    (tmp_path / ".00000000000009999999.prepare").write_bytes(b"half")
    reopened = CommitLog(tmp_path, SEGMENT, 32 * 1024, warm_segments=True)
    reopened.load()
    assert not (tmp_path / ".00000000000009999999.prepare").exists()
    assert reopened.recover(0).end_offset == log.max_offset
    assert len(walk(reopened)) == 60
    reopened.close()
    assert not list(tmp_path.glob(".*.prepare"))
