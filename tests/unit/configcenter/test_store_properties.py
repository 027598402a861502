"""Property tests: the etcd-backed store behaves like a plain dict with a revision counter.

Hypothesis drives random puts, compare-and-sets, deletes and rollbacks; after every step the
store must agree with the model, revisions must be gap-free, and a range at any earlier
revision must return exactly the model's snapshot then — or REVISION_COMPACTED once etcd has
compacted that revision, never a wrong answer. Watches read in arbitrary pieces, each resumed
after the last revision seen, yield every change exactly once.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.common.errors import InvalidArgument, NotFound
from tidemq.configcenter.etcd import EtcdTarget
from tidemq.configcenter.model import RevisionCompacted
from tidemq.configcenter.store import ConfigStore

from tests.support.etcd import start_etcd

KEYS = st.sampled_from(["/s/a", "/s/b", "/s/c/d", "/t"])
VALUES = st.binary(max_size=16)
_namespace = itertools.count()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    cluster = start_etcd(tmp_path_factory.mktemp("etcd-prop"))
    yield cluster
    cluster.kill()


def test_store_matches_a_dict_model(etcd):
    target = EtcdTarget.parse(etcd.endpoints)

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = ConfigStore(target, namespace=f"/prop{next(_namespace)}")
            self.revision = self.store.revision()
            self.model: dict[str, tuple[bytes, int]] = {}  # key -> (value, mod revision)
            self.snapshots = {self.revision: dict(self.model)}
            self.compacted = 0

        def _wrote(self, revision: int) -> None:
            assert revision == self.revision + 1, "revisions must be gap-free"
            self.revision = revision
            self.snapshots[revision] = dict(self.model)

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

        @precondition(lambda self: len(self.snapshots) > 2)
        @rule(data=st.data())
        def compact(self, data):
            at = data.draw(st.sampled_from(sorted(self.snapshots)[1:]))
            if at > self.compacted:
                etcd.compact(at)
                self.compacted = at

        @rule(data=st.data())
        def range_in_the_past(self, data):
            at = data.draw(st.sampled_from(sorted(self.snapshots)))
            if at < self.compacted:
                with pytest.raises(RevisionCompacted):
                    self.store.range("/s/", revision=at)
                return
            kvs = self.store.range("/s/", revision=at).kvs
            expected = {k: v for k, v in self.snapshots[at].items() if k.startswith("/s/")}
            assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == expected

        @rule(key=KEYS, data=st.data())
        def rollback(self, key, data):
            at = data.draw(st.sampled_from([*sorted(self.snapshots), self.revision + 2]))
            if at > self.store.revision():
                with pytest.raises(InvalidArgument, match="future"):
                    self.store.rollback(key, at)
            elif at < self.compacted:
                with pytest.raises(RevisionCompacted):
                    self.store.rollback(key, at)
            elif key not in self.snapshots[at]:
                with pytest.raises(NotFound):
                    self.store.rollback(key, at)
            else:
                result = self.store.rollback(key, at)
                self.model[key] = (self.snapshots[at][key][0], result.revision)
                self._wrote(result.revision)

        @invariant()
        def agrees_with_model(self):
            kvs = self.store.range("").kvs
            assert {kv.key: (kv.value, kv.mod_revision) for kv in kvs} == self.model
            assert self.store.revision() == self.revision

        def teardown(self):
            self.store.close()

    StoreMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=25,
                                              deadline=None)
    StoreMachine.TestCase().runTest()


@settings(max_examples=20, deadline=None)
@given(writes=st.integers(1, 40), chunks=st.lists(st.integers(1, 7), min_size=1, max_size=20),
       start=st.integers(0, 30))
def test_resuming_from_the_last_seen_revision_yields_each_event_once(etcd, writes, chunks,
                                                                     start):
    """A watch read in arbitrary pieces, each resumed after the last revision seen, gives
    exactly the contiguous sequence of revisions: what a reconnecting watcher relies on."""
    store = ConfigStore(EtcdTarget.parse(etcd.endpoints), namespace=f"/resume{next(_namespace)}")
    try:
        base = store.revision()
        for i in range(writes):
            if i % 5 == 4:
                store.delete(f"/k{i % 3}")
            else:
                store.put(f"/k{i % 3}", str(i).encode())
        total = store.revision()
        after = base + min(start, total - base)
        seen: list[int] = []
        for size in itertools.cycle(chunks):
            if after >= total:
                break
            for batch in store.watch("", after + 1, until=total):
                seen += [event.revision for event in batch.events]
                if len(batch.events) and len(seen) >= size:
                    break
            after = seen[-1] if seen else total
        expected = [r for r in range(base + min(start, total - base) + 1, total + 1)]
        assert seen == expected
    finally:
        store.close()
