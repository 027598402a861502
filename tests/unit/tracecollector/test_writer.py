"""Group-commit writer: batches reach SQLite, a full queue pushes back instead of growing."""

from __future__ import annotations

import threading

from tidemq.tracecollector.store import SpanStore
from tidemq.tracecollector.writer import SpanWriter

from tests.unit.tracecollector.spans import make_span, new_trace_id


def test_submitted_batches_are_committed_and_counted(tmp_path):
    store = SpanStore(tmp_path)
    stored: list[int] = []
    writer = SpanWriter(store, on_stored=stored.append)
    trace_id = new_trace_id()
    for i in range(20):
        assert writer.submit([make_span(trace_id, name=f"op{i}", start=i)])
    assert writer.flush(timeout=10)
    assert len(store.trace(trace_id)) == 20
    assert sum(stored) == 20
    writer.close()
    assert not writer.submit([make_span(trace_id)])  # closed: refused, not lost silently


class _BlockedStore(SpanStore):
    """A store whose disk is stuck until released (the writer thread waits inside insert)."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()

    def insert(self, spans, now_ns=None):
        self.entered.set()
        self.release.wait(30)
        return super().insert(spans, now_ns)


def test_full_queue_refuses_new_batches_until_the_disk_catches_up(tmp_path):
    store = _BlockedStore(tmp_path)
    writer = SpanWriter(store, max_queued_spans=3)
    trace_id = new_trace_id()
    assert writer.submit([make_span(trace_id)])
    assert store.entered.wait(10)  # first batch taken by the writer, now blocked on "disk"
    assert writer.submit([make_span(trace_id) for _ in range(3)])
    assert not writer.submit([make_span(trace_id)])
    assert writer.queued_spans == 3
    store.release.set()
    assert writer.flush(timeout=10)
    assert writer.submit([make_span(trace_id)])
    writer.close()
    assert len(store.trace(trace_id)) == 5
