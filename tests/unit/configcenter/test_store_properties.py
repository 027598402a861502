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
from tidemq.configcenter.store import ConfigStore

from tests.support.processes import start_redis

KEYS = st.sampled_from(["/s/a", "/s/b", "/s/c/d", "/t"])
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
