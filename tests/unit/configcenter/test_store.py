"""ConfigStore against a real etcd: revisions, CAS, ranges, history, watches, bad input.

The module shares one etcd member; each test has its own key namespace and counts revisions
from where the store stood when it began (etcd's revisions are global)."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument, NotFound, PayloadTooLarge
from tidemq.configcenter.model import MAX_KEY_BYTES, MAX_VALUE_BYTES, EventType, RevisionCompacted


def _watched(store, prefix, start, until):
    return [e for batch in store.watch(prefix, start, until=until) for e in batch.events]


def test_every_write_gets_the_next_revision(store):
    base = store.revision()
    assert store.put("/a", b"1").revision == base + 1
    assert store.put("/b", b"2").revision == base + 2
    assert store.put("/a", b"3").revision == base + 3
    assert store.delete("/b").revision == base + 4
    kv, revision = store.get("/a")
    assert revision == base + 4
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version) == (
        "/a", b"3", base + 1, base + 3, 2)
    assert store.get("/b") == (None, base + 4)


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
    assert len(store.range("").kvs) == 5  # the namespace keeps other tests' keys out


def test_several_prefixes_are_read_in_one_snapshot(store):
    store.put("/x/1", b"a")
    written = store.put("/y/1", b"b")
    x, y = store.range_many(["/x/", "/y/"])
    assert ([kv.value for kv in x.kvs], [kv.value for kv in y.kvs]) == ([b"a"], [b"b"])
    assert x.revision == y.revision == written.revision


def test_range_at_an_older_revision(store):
    base = store.revision()
    store.put("/p/a", b"a1")  # +1
    store.put("/p/b", b"b1")  # +2
    store.put("/p/a", b"a2")  # +3
    store.delete("/p/b")  # +4
    store.put("/p/c", b"c1")  # +5
    assert {kv.key: kv.value for kv in store.range("/p/", revision=base + 2).kvs} == {
        "/p/a": b"a1", "/p/b": b"b1"}
    assert {kv.key: kv.value for kv in store.range("/p/", revision=base + 4).kvs} == {
        "/p/a": b"a2"}
    assert store.range("/p/", revision=base + 2).revision == base + 2
    with pytest.raises(InvalidArgument, match="future"):
        store.range("/p/", revision=base + 99)


def test_compacted_revisions_are_reported(store, shared_etcd):
    base = store.revision()
    for i in range(12):
        store.put("/k", str(i).encode())
    shared_etcd.compact(base + 8)
    assert store.compact_revision() == base + 8
    with pytest.raises(RevisionCompacted) as info:
        next(store.watch("/k", base + 2))
    assert info.value.compact_revision == base + 8
    with pytest.raises(RevisionCompacted):
        store.range("/k", revision=base + 3)
    with pytest.raises(RevisionCompacted):
        store.rollback("/k", base + 3)
    assert [e.revision for e in _watched(store, "/k", base + 8, base + 12)] == [
        base + 8, base + 9, base + 10, base + 11, base + 12]


def test_a_watch_sees_every_change_under_its_prefix_in_revision_order(store):
    base = store.revision()
    store.put("/w/a", b"1")
    store.put("/other", b"x")
    store.put("/w/b", b"2")
    store.delete("/w/a")
    events = _watched(store, "/w/", base + 1, base + 4)
    assert [(e.type, e.kv.key, e.revision) for e in events] == [
        (EventType.PUT, "/w/a", base + 1), (EventType.PUT, "/w/b", base + 3),
        (EventType.DELETE, "/w/a", base + 4)]
    assert [e.revision for e in _watched(store, "/w/", base + 2, base + 4)] == [base + 3,
                                                                                base + 4]


def test_a_quiet_watch_reports_the_revision_it_covers(make_store):
    store = make_store(progress_interval_s=0.1)
    now = store.put("/q/a", b"1").revision
    store.put("/elsewhere", b"2")  # a change the watch does not match still moves it on
    for batch in store.watch("/q/", now + 1):
        assert not batch.events
        if batch.revision >= now + 1:
            break
    assert batch.revision == now + 1


def test_history_and_rollback(store):
    first = store.put("/cfg/flush", b"async")
    store.put("/cfg/flush", b"sync")
    deleted = store.delete("/cfg/flush")
    store.put("/cfg/flush", b"batch")
    history = store.history("/cfg/flush")
    assert [(e.type, e.kv.value) for e in history] == [
        (EventType.PUT, b"async"), (EventType.PUT, b"sync"), (EventType.DELETE, b""),
        (EventType.PUT, b"batch")]
    assert [e.kv.value for e in store.history("/cfg/flush", limit=2)] == [b"", b"batch"]
    assert store.history("/cfg/flushed") == []  # another key with the same beginning
    restored = store.rollback("/cfg/flush", first.revision)
    assert restored.succeeded and store.get("/cfg/flush")[0].value == b"async"
    with pytest.raises(NotFound, match=f"no value at revision {deleted.revision}"):
        store.rollback("/cfg/flush", deleted.revision)
    with pytest.raises(NotFound, match="no value"):
        store.rollback("/cfg/never", first.revision)


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
        (lambda s: s.rollback("/k", s.revision() + 5), InvalidArgument, "in the future"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(store, call, error, text):
    before = store.revision()
    with pytest.raises(error, match=text):
        call(store)
    assert store.revision() == before


def test_a_value_of_exactly_one_mebibyte_is_accepted(store):
    value = bytes(range(256)) * (MAX_VALUE_BYTES // 256)
    store.put("/big", value)
    assert store.get("/big")[0].value == value


def test_range_at_the_current_revision_is_the_current_state(store):
    store.put("/p/a", b"1")
    now = store.put("/p/b", b"2").revision
    result = store.range("/p/", revision=now)
    assert ([kv.value for kv in result.kvs], result.revision) == ([b"1", b"2"], now)


def test_a_transaction_writes_all_or_nothing_on_its_compares(store):
    from tidemq.configcenter.store import TxnCompare

    claim = store.put("/election", b"me")
    group = store.put("/group", b"epoch 1")
    fenced = [TxnCompare("/election", "create", claim.revision),
              TxnCompare("/group", "mod", group.revision)]
    done = store.txn(fenced, [("/group", b"epoch 2", 0), ("/audit", b"1", 0)], ["/gone"])
    assert done.succeeded and store.get("/group")[0].mod_revision == done.revision
    assert store.get("/audit")[0].mod_revision == done.revision  # one revision for every write
    store.delete("/election")
    store.put("/election", b"another")  # a new claim: another create revision
    refused = store.txn([TxnCompare("/election", "create", claim.revision)],
                        [("/group", b"epoch 3", 0)], [])
    assert not refused.succeeded and store.revision() == refused.revision
    assert [kv.key for kv in refused.compared] == ["/election"]
    assert store.get("/group")[0].value == b"epoch 2"
    with pytest.raises(InvalidArgument, match="at least one compare"):
        store.txn([], [("/group", b"x", 0)], [])
    with pytest.raises(InvalidArgument, match="each key once"):
        store.txn(fenced, [("/group", b"x", 0)], ["/group"])
    with pytest.raises(InvalidArgument, match="mod or create"):
        store.txn([TxnCompare("/group", "value", 1)], [("/group", b"x", 0)], [])
