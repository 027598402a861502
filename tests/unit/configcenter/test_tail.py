"""EventTail: watchers at the head read the shared window; those behind it read Redis."""

from __future__ import annotations

import pytest
from tidemq.configcenter.tail import EventTail

from tests.support.processes import wait_until


@pytest.fixture
def tail_of(make_store):
    tails = []

    def start(store, capacity):
        tail = EventTail(store, capacity)
        tail.start()
        tails.append(tail)
        return tail

    yield start
    for tail in tails:
        tail.stop()


def test_head_readers_get_new_events_in_order(store, tail_of):
    store.put("/before", b"0")
    tail = tail_of(store, capacity=100)
    wait_until(lambda: tail._head == 1, timeout=5, message="the tail to start")
    assert tail.read(1, timeout_s=0.05) == []  # nothing new: waits, then returns empty
    for i in range(5):
        store.put(f"/k{i}", str(i).encode())
    events = wait_until(lambda: tail.read(1, timeout_s=1), timeout=5, message="events")
    got = list(events)
    while got[-1].revision < 6:
        got += tail.read(got[-1].revision, timeout_s=1)
    assert [e.revision for e in got] == [2, 3, 4, 5, 6]
    assert [e.revision for e in tail.read(4, timeout_s=0)] == [5, 6]


def test_readers_behind_the_window_fall_back_to_the_log(store, tail_of):
    tail = tail_of(store, capacity=3)
    wait_until(lambda: tail._head == 0, timeout=5, message="the tail to start")
    for i in range(10):
        store.put("/k", str(i).encode())
    wait_until(lambda: tail._head == 10, timeout=5, message="the tail to catch up")
    assert [e.revision for e in tail._window] == [8, 9, 10]
    got, after = [], 0
    while after < 10:
        events = tail.read(after, timeout_s=0)
        got += [e.revision for e in events]
        after = events[-1].revision
    assert got == list(range(1, 11))


def test_a_reader_ahead_of_the_head_waits_instead_of_spinning(store, tail_of):
    tail = tail_of(store, capacity=10)
    wait_until(lambda: tail._head == 0, timeout=5, message="the tail to start")
    assert tail.read(50, timeout_s=0.05) == []
