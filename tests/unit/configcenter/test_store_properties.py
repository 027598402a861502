"""Property test: the Redis store behaves like a plain dict with a revision counter.

Hypothesis drives random puts, compare-and-sets and deletes; after every step the store must
agree with the model, revisions must be gap-free, and a range at any earlier revision must
return exactly the model's snapshot at that revision.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.common.errors import InvalidArgument, NotFound
from tidemq.configcenter.model import RevisionCompacted
from tidemq.configcenter.store import ConfigStore

from tests.support.processes import start_redis

KEYS = st.sampled_from(["/s/a", "/s/b", "/s/c/d", "/t"])
SMALL_KEYS = st.sampled_from(["/h/x", "/h/y"])
VALUES = st.binary(max_size=16)
_namespace = itertools.count()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = start_redis(tmp_path_factory.mktemp("redis-prop"))
    yield server.url
    server.kill()


def test_store_matches_a_dict_model(redis_url):
    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = ConfigStore(redis_url, namespace=f"prop{next(_namespace)}",
                                     history_limit=1000)
            self.model: dict[str, tuple[bytes, int]] = {}  # key -> (value, mod revision)
            self.snapshots = [dict(self.model)]  # index = revision
            self.revision = 0

        def _wrote(self, revision: int) -> None:
            assert revision == self.revision + 1, "revisions must be gap-free"
            self.revision = revision
            self.snapshots.append(dict(self.model))

        @rule(key=KEYS, value=VALUES)
        def put(self, key, value):
            result = self.store.put(key, value)
            self.model[key] = (value, result.revision)
            self._wrote(result.revision)

        @rule(key=KEYS, value=VALUES, stale=st.booleans())
        def compare_and_set(self, key, value, stale):
            current = self.model.get(key, (b"", 0))[1]
            expected = current + 1 if stale else current
            result = self.store.put(key, value, expected_mod_revision=expected)
            assert result.succeeded is (not stale)
            if stale:
                assert result.current_mod_revision == current
                assert result.revision == self.revision
            else:
                self.model[key] = (value, result.revision)
                self._wrote(result.revision)

        @rule(key=KEYS)
        def delete(self, key):
            result = self.store.delete(key)
            assert result.deleted is (key in self.model)
            if result.deleted:
                del self.model[key]
                self._wrote(result.revision)

        @precondition(lambda self: self.revision > 0)
        @rule(data=st.data())
        def range_in_the_past(self, data):
            at = data.draw(st.integers(1, self.revision))
            kvs = self.store.range("/s/", revision=at).kvs
            expected = {k: v for k, v in self.snapshots[at].items() if k.startswith("/s/")}
            assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == expected

        @invariant()
        def agrees_with_model(self):
            kvs = self.store.range("").kvs
            assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == self.model
            assert self.store.revision() == self.revision

        def teardown(self):
            self.store.close()

    StoreMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30,
                                              deadline=None)
    StoreMachine.TestCase().runTest()


@settings(max_examples=30, deadline=None)
@given(writes=st.integers(1, 60), chunks=st.lists(st.integers(1, 7), min_size=1, max_size=40),
       start=st.integers(0, 30))
def test_resuming_from_the_last_seen_revision_yields_each_event_once(redis_url, writes, chunks,
                                                                     start):
    """Reading the log in arbitrary pieces, each resumed after the last revision seen, gives
    exactly the contiguous sequence of revisions: what a reconnecting watcher relies on."""
    store = ConfigStore(redis_url, namespace=f"resume{next(_namespace)}")
    try:
        for i in range(writes):
            if i % 5 == 4:
                store.delete(f"/k{i % 3}")
            else:
                store.put(f"/k{i % 3}", str(i).encode())
        total = store.revision()
        after, seen = min(start, total), []
        for size in itertools.cycle(chunks):
            events = store.read_events(after, block_ms=0, count=size)
            if not events:
                break
            seen += [event.revision for event in events]
            after = events[-1].revision
        assert seen == list(range(min(start, total) + 1, total + 1))
    finally:
        store.close()


def test_range_and_rollback_at_a_revision_are_right_or_compacted(redis_url):
    """With a tiny per-key history, keys deleted and created again: a range or rollback at a
    past revision answers the model's value, or REVISION_COMPACTED exactly when the retained
    history no longer reaches that revision (never a wrong "absent")."""
    limit = 3

    class HistoryMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = ConfigStore(redis_url, namespace=f"hist{next(_namespace)}",
                                     history_limit=limit)
            self.model: dict[str, tuple[bytes, int]] = {}
            self.changes: dict[str, list[int]] = {}  # key -> revisions of all its changes
            self.snapshots = [dict(self.model)]
            self.revision = 0

        def _wrote(self, key: str, revision: int) -> None:
            assert revision == self.revision + 1
            self.revision = revision
            self.changes.setdefault(key, []).append(revision)
            self.snapshots.append(dict(self.model))

        def _reaches(self, key: str, at: int) -> bool:
            """Whether the key's retained history still decides its state at `at`."""
            changes = self.changes.get(key, [])
            retained = changes[-limit:]
            return len(changes) <= limit or any(rev <= at for rev in retained)

        @rule(key=SMALL_KEYS, value=VALUES)
        def put(self, key, value):
            result = self.store.put(key, value)
            self.model[key] = (value, result.revision)
            self._wrote(key, result.revision)

        @rule(key=SMALL_KEYS)
        def delete(self, key):
            result = self.store.delete(key)
            if result.deleted:
                del self.model[key]
                self._wrote(key, result.revision)

        @precondition(lambda self: self.revision > 0)
        @rule(data=st.data())
        def range_in_the_past(self, data):
            at = data.draw(st.integers(1, self.revision))
            if all(self._reaches(key, at) for key in self.changes):
                kvs = self.store.range("/h/", revision=at).kvs
                assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == self.snapshots[at]
            else:
                with pytest.raises(RevisionCompacted):
                    self.store.range("/h/", revision=at)

        @precondition(lambda self: self.revision > 0)
        @rule(key=SMALL_KEYS, data=st.data())
        def rollback(self, key, data):
            at = data.draw(st.integers(1, self.revision + 2))
            if at > self.revision:
                with pytest.raises(InvalidArgument, match="future"):
                    self.store.rollback(key, at)
            elif not self._reaches(key, at):
                with pytest.raises(RevisionCompacted):
                    self.store.rollback(key, at)
            elif key not in self.snapshots[at]:
                with pytest.raises(NotFound):
                    self.store.rollback(key, at)
            else:
                result = self.store.rollback(key, at)
                self.model[key] = (self.snapshots[at][key][0], result.revision)
                self._wrote(key, result.revision)

        @invariant()
        def agrees_with_model(self):
            kvs = self.store.range("").kvs
            assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == self.model

        def teardown(self):
            self.store.close()

    HistoryMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                                deadline=None)
    HistoryMachine.TestCase().runTest()


def test_range_of_a_recreated_key_past_its_trimmed_history_is_compacted(redis_url):
    """The audit's case: /x held 1 at revision 4, was deleted, created again and rewritten
    until its history lost revision 4; answering [] would be wrong."""
    store = ConfigStore(redis_url, namespace=f"recreated{next(_namespace)}", history_limit=3)
    try:
        for value in (b"a", b"b", b"c"):
            store.put("/y", value)  # 1..3
        store.put("/x", b"1")  # 4
        store.delete("/x")  # 5
        for value in (b"2", b"3", b"4"):
            store.put("/x", value)  # 6..8: history is now PUT v1 @6, v2 @7, v3 @8
        with pytest.raises(RevisionCompacted):
            store.range("/x", revision=4)
        with pytest.raises(RevisionCompacted):
            store.rollback("/x", 4)
        assert [kv.value for kv in store.range("/x", revision=6).kvs] == [b"2"]
    finally:
        store.close()
