"""Topic deletion in the store: a marker record in the CommitLog empties the topic's consume
queues where it stands, so a topic created again shows none of the old messages and its queue
offsets go on from where they were; the queues stay a pure function of the log: the same after
a clean restart, after a crash that replays the whole log over queues already rebuilt, and after
a rebuild from nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.store import MessageStore
from tidemq.broker.store.checkpoint import AbortMarker, Checkpoint, CheckpointState
from tidemq.broker.store.config import GetStatus, InvalidBatch, NotMaster
from tidemq.broker.store.consume_queue import FLOOR_FILE
from tidemq.broker.store.metadata import MetadataFile
from tidemq.common.system_topics import DELETED_TOPICS_TOPIC

from .helpers import (
    encode_batch,
    forget_derived_state,
    open_store,
    read_all,
    reopened,
    small_config,
)

TOPICS = ("p", "u")
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(TOPICS), st.integers(0, 2),
                  st.lists(st.integers(0, 3000), min_size=1, max_size=6)),
        st.tuples(st.just("delete"), st.sampled_from(TOPICS)),
    ),
    min_size=1, max_size=16,
)


class Model:
    """Per (topic, queue): the first readable offset and the bodies from there."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, int], tuple[int, list[bytes]]] = {}

    def append(self, topic: str, queue_id: int, bodies: list[bytes]) -> int:
        floor, kept = self.queues.get((topic, queue_id), (0, []))
        self.queues[(topic, queue_id)] = (floor, [*kept, *bodies])
        return floor + len(kept)

    def delete(self, topic: str) -> None:
        for (name, queue_id), (floor, kept) in list(self.queues.items()):
            if name == topic:
                self.queues[(name, queue_id)] = (floor + len(kept), [])


def run_plan(store: MessageStore, plan) -> Model:
    model = Model()
    for n, step in enumerate(plan):
        if step[0] == "delete":
            store.delete_topic(step[1])
            model.delete(step[1])
            continue
        _, topic, queue_id, sizes = step
        bodies = [bytes([n % 256]) * size for size in sizes]
        result = store.append_batch(topic, queue_id, encode_batch(topic, bodies)[0], len(bodies))
        assert result.first_queue_offset == model.append(topic, queue_id, bodies)
    assert store.wait_dispatched(10)
    return model


def assert_matches(store: MessageStore, model: Model) -> None:
    for topic in TOPICS:
        assert store.queue_ids(topic) == sorted(q for t, q in model.queues if t == topic)
    for (topic, queue_id), (floor, bodies) in model.queues.items():
        assert (store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)) == (
            floor, floor + len(bodies))
        got = read_all(store, topic, queue_id)
        assert [bytes(r.body) for r in got] == bodies
        assert [r.queue_offset for r in got] == list(range(floor, floor + len(bodies)))
        if floor:  # a read below the floor is told where the topic now starts
            below = store.get_messages(topic, queue_id, 0, max_messages=10, max_bytes=1 << 20)
            assert below.status is GetStatus.OFFSET_TOO_SMALL
            assert below.next_begin_offset == floor


def crash_and_replay_everything(config) -> None:
    """As if the process died with its checkpoint at the log's start: recovery scans and
    re-dispatches the whole CommitLog over the consume queues it finds on disk."""
    Checkpoint(config.data_dir / "checkpoint").write(CheckpointState(0, 0, 0))
    AbortMarker(config.data_dir / "abort").create()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps)
def test_queues_follow_the_log_through_deletions_restarts_and_rebuilds(tmp_path_factory, plan):
    config = small_config(tmp_path_factory.mktemp("store"))
    store = open_store(config)
    model = run_plan(store, plan)
    assert_matches(store, model)
    store.shutdown()

    with reopened(config) as store:  # clean restart
        assert_matches(store, model)
    crash_and_replay_everything(config)
    with reopened(config) as store:
        assert store.startup.abnormal
        assert_matches(store, model)
    forget_derived_state(config)
    with reopened(config) as store:
        assert_matches(store, model)


def test_offsets_go_on_from_the_floor_after_restarts(tmp_path):
    config = small_config(tmp_path)
    store = open_store(config)
    store.append_batch("p", 0, encode_batch("p", [b"old"] * 5)[0], 5)
    store.delete_topic("p")
    store.shutdown()
    store = open_store(config)  # the floor alone, no file: offsets still go on from 5
    assert store.append_batch("p", 0, encode_batch("p", [b"new"] * 2)[0], 2).first_queue_offset == 5
    store.shutdown()
    store = open_store(config)
    try:
        assert store.append_batch("p", 0, encode_batch("p", [b"new"])[0], 1).first_queue_offset == 7
        assert store.wait_dispatched(10)
        assert [bytes(r.body) for r in read_all(store, "p", 0)] == [b"new"] * 3
    finally:
        store.shutdown()


def test_a_crash_between_the_floor_and_the_files_removal_leaves_them_unreadable(tmp_path):
    """The floor is written before the files go: files a crash left behind hold only old units
    (one of them shared with the offsets after the floor), and they stay out of reach."""
    config = small_config(tmp_path, consume_queue_units_per_file=4)
    store = open_store(config)
    store.append_batch("p", 0, encode_batch("p", [b"old"] * 10)[0], 10)  # files 0, 4, 8
    assert store.wait_dispatched(10)
    store.shutdown()
    MetadataFile(config.consumequeue_dir / "p" / "0" / FLOOR_FILE).write(b"10")
    store = open_store(config)
    try:
        assert (store.min_offset("p", 0), store.max_offset("p", 0)) == (10, 10)
        assert store.append_batch("p", 0, encode_batch("p", [b"new"])[0], 1).first_queue_offset == 10
        assert store.wait_dispatched(10)
    finally:
        store.shutdown()
    store = open_store(config)
    try:
        assert [bytes(r.body) for r in read_all(store, "p", 0)] == [b"new"]
        assert sorted(p.name for p in (config.consumequeue_dir / "p" / "0").iterdir()) == [
            "00000000000000000160", FLOOR_FILE]  # the file of offsets 8..11 only
    finally:
        store.shutdown()


def test_a_truncation_that_cuts_the_marker_brings_the_topic_back(tmp_path):
    """A replica whose diverged tail held the marker (the new master never had it) rebuilds
    the topic's queues from the log, as the new master has them."""
    config = small_config(tmp_path)
    store = open_store(config)
    try:
        store.append_batch("p", 0, encode_batch("p", [b"old"] * 5)[0], 5)
        marker = store.delete_topic("p")
        store.append_batch("u", 0, encode_batch("u", [b"u"])[0], 1)
        assert store.wait_dispatched(10) and store.min_offset("p", 0) == 5
        store.become_slave()
        store.truncate_to(marker)
        assert store.wait_dispatched(10)
        assert [bytes(r.body) for r in read_all(store, "p", 0)] == [b"old"] * 5
        assert store.max_offset("u", 0) == 0
        store.become_master(1)
        assert store.append_batch("p", 0, encode_batch("p", [b"new"])[0], 1).first_queue_offset == 5
    finally:
        store.shutdown()
    store = open_store(config)
    try:
        assert [bytes(r.body) for r in read_all(store, "p", 0)] == [b"old"] * 5 + [b"new"]
    finally:
        store.shutdown()


def test_deletions_are_logged_in_their_own_topic_and_its_name_is_refused(tmp_path):
    store = open_store(small_config(tmp_path))
    try:
        store.delete_topic("p")
        store.delete_topic("u")
        assert store.wait_dispatched(10)
        assert [bytes(r.body) for r in read_all(store, DELETED_TOPICS_TOPIC, 0)] == [b"p", b"u"]
        with pytest.raises(InvalidBatch):
            store.delete_topic(DELETED_TOPICS_TOPIC)
    finally:
        store.shutdown()


def test_a_slave_takes_no_deletion(tmp_path):
    store = open_store(small_config(tmp_path))
    try:
        store.become_slave()
        with pytest.raises(NotMaster):
            store.delete_topic("p")
    finally:
        store.shutdown()
