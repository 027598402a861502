"""Property: whatever batches are appended, each queue reads back exactly its model, before and
after a clean restart and after rebuilding consume queues and index from the CommitLog."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.common import record

from .helpers import (
    encode_batch,
    forget_derived_state,
    open_store,
    read_all,
    reopened,
    small_config,
)

batches = st.lists(
    st.tuples(st.integers(0, 2), st.lists(st.integers(0, 4000), min_size=1, max_size=8),
              st.sampled_from(["", "red", "blue"])),
    min_size=1, max_size=20,
)


def assert_matches(store, model):
    for queue_id, expected in model.items():
        got = read_all(store, "p", queue_id)
        assert [bytes(r.body) for r in got] == [body for body, _ in expected]
        assert [r.tags for r in got] == [tags for _, tags in expected]
        assert [r.queue_offset for r in got] == list(range(len(expected)))
        red = store.get_messages("p", queue_id, 0, max_messages=10_000, max_bytes=1 << 30,
                                 tag_hashes=frozenset({record.tag_hash("red")}))
        assert [bytes(r.body) for r in record.iter_records(red.records)] == [
            body for body, tags in expected if tags == "red"
        ]


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches)
def test_queues_read_back_their_model_across_restart_and_rebuild(tmp_path_factory, plan):
    config = small_config(tmp_path_factory.mktemp("store"))
    store = open_store(config)
    model: dict[int, list[tuple[bytes, str]]] = {}
    for n, (queue_id, sizes, tags) in enumerate(plan):
        bodies = [bytes([n % 256]) * size for size in sizes]
        store.append_batch("p", queue_id, encode_batch("p", bodies, tags=tags)[0], len(bodies))
        model.setdefault(queue_id, []).extend((body, tags) for body in bodies)
    assert store.wait_dispatched(10)
    assert_matches(store, model)
    store.shutdown()

    with reopened(config) as store:
        assert_matches(store, model)
    forget_derived_state(config)
    with reopened(config) as store:
        assert store.startup.abnormal
        assert_matches(store, model)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.integers(0, 3000), min_size=1, max_size=30), st.booleans()),
                min_size=1, max_size=8), st.data())
def test_unfiltered_fast_path_answers_like_the_general_path(tmp_path_factory, plan, data):
    """Batches of queue p, some followed by another queue's record (a break in p's run in the
    CommitLog): the fast path's slices per run answer exactly like the general path."""
    # One segment and one CQ file hold it all, so the fast path is the one answering.
    store = open_store(small_config(tmp_path_factory.mktemp("store"), segment_size=4 << 20,
                                    consume_queue_units_per_file=1000))
    try:
        total = 0
        for sizes, gap in plan:
            bodies = [b"f" * size for size in sizes]
            store.append_batch("p", 0, encode_batch("p", bodies, tags="x")[0], len(bodies))
            total += len(bodies)
            if gap:
                store.append_batch("q", 0, encode_batch("q", [b"gap"])[0], 1)
        assert store.wait_dispatched(10)
        everything = frozenset({record.tag_hash("x")})
        for _ in range(5):
            offset = data.draw(st.integers(0, total))
            max_messages = data.draw(st.integers(1, 250))
            max_bytes = data.draw(st.integers(1, 400_000))
            fast = store.get_messages("p", 0, offset, max_messages, max_bytes)
            general = store.get_messages("p", 0, offset, max_messages, max_bytes, everything)
            assert fast == general
    finally:
        store.shutdown()
