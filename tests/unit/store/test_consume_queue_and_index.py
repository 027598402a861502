"""ConsumeQueue units and the IndexFile, alone and against simple models."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store.consume_queue import ConsumeQueue
from tidemq.broker.store.index import IndexFile, IndexService


def new_queue(directory, units_per_file=10) -> ConsumeQueue:
    queue = ConsumeQueue(directory, "t", 0, units_per_file)
    queue.load()
    return queue


def test_units_span_files_and_reload(tmp_path):
    queue = new_queue(tmp_path)
    for offset in range(25):
        queue.put(offset, offset * 100, 100, offset % 3)
    assert len(list(tmp_path.iterdir())) == 3
    assert queue.read_units(8, 5) == [(800, 100, 2), (900, 100, 0)]  # stops at its file end
    queue.close()
    reloaded = new_queue(tmp_path)
    assert (reloaded.min_offset, reloaded.max_offset) == (0, 25)
    assert reloaded.read_units(20, 10) == [(o * 100, 100, o % 3) for o in range(20, 25)]


def test_rewriting_a_unit_is_idempotent(tmp_path):
    queue = new_queue(tmp_path)
    for _ in range(2):
        for offset in range(5):
            queue.put(offset, offset * 10, 10, 7)
    assert queue.max_offset == 5 and queue.read_units(0, 10)[4] == (40, 10, 7)


def test_truncate_beyond_drops_units_past_the_log(tmp_path):
    queue = new_queue(tmp_path)
    for offset in range(12):
        queue.put(offset, offset * 100, 100, 0)
    assert queue.truncate_beyond(750) == 5
    assert queue.max_offset == 7
    queue.close()
    assert new_queue(tmp_path).max_offset == 7


def test_correct_min_offset_after_log_head_removed(tmp_path):
    queue = new_queue(tmp_path)
    for offset in range(35):
        queue.put(offset, offset * 100, 100, 0)
    queue.correct_min_offset(2250)
    assert queue.min_offset == 23
    assert len(queue.files) == 2, "the file wholly below the log start was deleted"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)),
                min_size=1, max_size=120))
def test_index_matches_a_dictionary_model(tmp_path_factory, puts):
    service = IndexService(tmp_path_factory.mktemp("index"), slots=7, entries=40)
    service.load()
    model: dict[bytes, list[int]] = {}
    for physical, (key, second) in enumerate(puts):
        raw = f"t#{key}".encode()
        service.put([raw], physical, 1_000_000 + second * 1000)
        model.setdefault(raw, []).append(physical)
    for raw, expected in model.items():
        found = service.query(raw, 0, 2**62, 1000)
        assert set(expected) <= set(found)  # hash collisions may add others; callers verify
        assert sorted(found) == sorted(set(found))
    assert len(service.files) == -(-len(puts) // 39)


def test_index_time_range_and_limit(tmp_path):
    index = IndexFile(tmp_path / "0", slots=16, entries=100)
    for i in range(10):
        index.put(b"t#k", i, 1_000_000 + i * 1000)
    assert index.query(b"t#k", 1_003_000, 1_005_000, 100) == [5, 4, 3]
    assert index.query(b"t#k", 0, 2**62, 2) == [9, 8]
    assert index.query(b"t#other", 0, 2**62, 10) == []


def test_index_survives_reopen_and_skips_redispatched(tmp_path):
    service = IndexService(tmp_path, slots=16, entries=100)
    service.load()
    service.put([b"t#k"], 10, 5000)
    service.close()
    reopened = IndexService(tmp_path, slots=16, entries=100)
    reopened.load()
    reopened.resume_after = reopened.end_physical_offset()
    reopened.put([b"t#k"], 10, 5000)     # re-dispatch of an indexed record
    reopened.put([b"t#k"], 20, 6000)
    assert reopened.query(b"t#k", 0, 10**6, 10) == [20, 10]


def test_truncation_below_a_file_start_keeps_the_earlier_file(tmp_path):
    """A crash can leave units past the recovered log in a newer file; dropping them must
    not make the older, partly rewritten file look deletable."""
    queue = new_queue(tmp_path)
    for offset in range(13):
        queue.put(offset, offset * 100, 100, 0)
    assert queue.truncate_beyond(750) == 6
    queue.correct_min_offset(0)
    assert (queue.min_offset, queue.max_offset) == (0, 7)
    assert [u[0] for u in queue.read_units(0, 10)] == [o * 100 for o in range(7)]
    assert len(queue.files) == 1
    queue.close()
    reloaded = new_queue(tmp_path)
    reloaded.correct_min_offset(0)
    assert (reloaded.min_offset, reloaded.max_offset) == (0, 7)
