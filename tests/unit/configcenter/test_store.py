"""ConfigStore against a real Redis: revisions, CAS, ranges, history, events, bad input."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument, NotFound, PayloadTooLarge
from tidemq.configcenter.model import MAX_KEY_BYTES, MAX_VALUE_BYTES, EventType, RevisionCompacted


def test_every_write_gets_the_next_revision(store):
    assert store.revision() == 0
    assert store.put("/a", b"1").revision == 1
    assert store.put("/b", b"2").revision == 2
    assert store.put("/a", b"3").revision == 3
    assert store.delete("/b").revision == 4
    kv, revision = store.get("/a")
    assert revision == 4
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"3", 1, 3, 2)
    assert store.get("/b") == (None, 4)


def test_compare_and_set_answers_the_current_revision_on_mismatch(store):
    created = store.put("/k", b"v1", expected_mod_revision=0)
    assert created.succeeded and created.prev_kv is None
    assert not store.put("/k", b"again", expected_mod_revision=0).succeeded
    stale = store.put("/k", b"v2", expected_mod_revision=created.revision + 5)
    assert (stale.succeeded, stale.current_mod_revision) == (False, created.revision)
    assert store.revision() == created.revision  # a failed compare writes nothing
    updated = store.put("/k", b"v2", expected_mod_revision=created.revision)
    assert updated.succeeded and updated.prev_kv.value == b"v1"
    assert not store.delete("/k", expected_mod_revision=created.revision).succeeded
    deleted = store.delete("/k", expected_mod_revision=updated.revision)
    assert deleted.succeeded and deleted.deleted
    missing = store.delete("/k")
    assert missing.succeeded and not missing.deleted and missing.revision == deleted.revision


def test_range_by_prefix_in_key_order_with_limit(store):
    for name in ("c", "a", "b"):
        store.put(f"/tidemq/topics/{name}", name.encode())
    store.put("/tidemq/topicsx", b"not a child")
    store.put("/tidemq/groups/g", b"g")
    result = store.range("/tidemq/topics/")
    assert [kv.key for kv in result.kvs] == [f"/tidemq/topics/{n}" for n in "abc"]
    assert [kv.key for kv in store.range("/tidemq/topics/", limit=2).kvs][-1] == "/tidemq/topics/b"
    assert len(store.range("").kvs) == 5


def test_range_at_an_older_revision(store):
    store.put("/p/a", b"a1")  # 1
    store.put("/p/b", b"b1")  # 2
    store.put("/p/a", b"a2")  # 3
    store.delete("/p/b")  # 4
    store.put("/p/c", b"c1")  # 5
    assert {kv.key: kv.value for kv in store.range("/p/", revision=2).kvs} == {
        "/p/a": b"a1", "/p/b": b"b1"}
    assert {kv.key: kv.value for kv in store.range("/p/", revision=4).kvs} == {"/p/a": b"a2"}
    assert store.range("/p/", revision=2).revision == 2
    with pytest.raises(InvalidArgument, match="future"):
        store.range("/p/", revision=99)


def test_compacted_revisions_are_reported(make_store):
    store = make_store(retention=5)
    for i in range(12):
        store.put("/k", str(i).encode())
    assert store.compact_revision() == 8
    with pytest.raises(RevisionCompacted) as info:
        store.read_events(2, block_ms=0)
    assert info.value.compact_revision == 8
    with pytest.raises(RevisionCompacted):
        store.range("/k", revision=3)
    assert [e.revision for e in store.read_events(7, block_ms=0)] == [8, 9, 10, 11, 12]


def test_events_come_in_revision_order(store):
    store.put("/w/a", b"1")
    store.put("/w/b", b"2")
    store.delete("/w/a")
    events = store.read_events(0, block_ms=0)
    assert [(e.type, e.kv.key, e.revision) for e in events] == [
        (EventType.PUT, "/w/a", 1), (EventType.PUT, "/w/b", 2), (EventType.DELETE, "/w/a", 3)]
    assert store.read_events(3, block_ms=0) == []
    assert [e.revision for e in store.read_events(1, block_ms=0)] == [2, 3]


def test_history_and_rollback(store):
    first = store.put("/cfg/flush", b"async")
    store.put("/cfg/flush", b"sync")
    store.delete("/cfg/flush")
    store.put("/cfg/flush", b"batch")
    history = store.history("/cfg/flush")
    assert [(e.type, e.kv.value) for e in history] == [
        (EventType.PUT, b"async"), (EventType.PUT, b"sync"), (EventType.DELETE, b""),
        (EventType.PUT, b"batch")]
    assert [e.kv.value for e in store.history("/cfg/flush", limit=2)] == [b"", b"batch"]
    restored = store.rollback("/cfg/flush", first.revision)
    assert restored.succeeded and store.get("/cfg/flush")[0].value == b"async"
    with pytest.raises(NotFound, match="no value at revision 3"):
        store.rollback("/cfg/flush", 3)
    with pytest.raises(NotFound, match="no history"):
        store.rollback("/cfg/never", 1)


def test_history_is_bounded_per_key(make_store):
    store = make_store(history_limit=3)
    for i in range(6):
        store.put("/h", str(i).encode())
    assert [e.kv.value for e in store.history("/h")] == [b"3", b"4", b"5"]
    with pytest.raises(RevisionCompacted):
        store.rollback("/h", 1)


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda s: s.put("", b"x"), InvalidArgument, "must not be empty"),
        (lambda s: s.put("/" + "k" * MAX_KEY_BYTES, b"x"), InvalidArgument, "limit is 1024"),
        (lambda s: s.put("/bad\nkey", b"x"), InvalidArgument, "control character"),
        (lambda s: s.put("/k", b"x" * (MAX_VALUE_BYTES + 1)), PayloadTooLarge, "1 MiB"),
        (lambda s: s.put("/k", b"x", expected_mod_revision=-1), InvalidArgument, "non-negative"),
        (lambda s: s.range("/k", revision=-3), InvalidArgument, "non-negative"),
        (lambda s: s.get(""), InvalidArgument, "must not be empty"),
        (lambda s: s.lease_grant(0), InvalidArgument, "TTL"),
        (lambda s: s.rollback("/k", 0), InvalidArgument, "revision >= 1"),
        (lambda s: s.rollback("/k", 5), InvalidArgument, "in the future"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(store, call, error, text):
    with pytest.raises(error, match=text):
        call(store)
    assert store.revision() == 0


def test_a_value_of_exactly_one_mebibyte_is_accepted(store):
    value = bytes(range(256)) * (MAX_VALUE_BYTES // 256)
    store.put("/big", value)
    assert store.get("/big")[0].value == value


def test_range_at_the_current_revision_is_the_current_state(store):
    store.put("/p/a", b"1")
    store.put("/p/b", b"2")
    result = store.range("/p/", revision=2)
    assert ([kv.value for kv in result.kvs], result.revision) == ([b"1", b"2"], 2)


def test_persistence_reports_the_append_only_settings(store):
    assert store.persistence()["appendonly"] == "yes"  # the test Redis runs append-only
