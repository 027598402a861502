"""Builders shared by the store tests."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st
from tidemq.broker.store import MessageStore, StoreConfig
from tidemq.common import record

HOST = record.pack_host("127.0.0.1", 10911)


def small_config(data_dir: Path, **overrides) -> StoreConfig:
    settings = dict(
        data_dir=data_dir, segment_size=64 * 1024, consume_queue_units_per_file=50,
        index_slots=64, index_entries=400, flush_interval_ms=50, checkpoint_interval_ms=100,
    )
    settings.update(overrides)
    return StoreConfig(**settings)


def encode_batch(topic: str, bodies: list[bytes], tags: str = "", keys: list[str] | None = None):
    """Concatenated producer records plus their unique ids."""
    raws, ids = [], []
    for i, body in enumerate(bodies):
        message = record.OutgoingMessage(
            topic, body, tags=tags, keys=[f"{k}" for k in (keys or [])] or [f"key-{i}"]
        )
        raw, uid = record.encode_message(message)
        raws.append(raw)
        ids.append(uid)
    return b"".join(raws), ids


def forget_derived_state(config: StoreConfig) -> None:
    """Delete the consume queues, the index and the checkpoint: the next start rebuilds them
    from the CommitLog alone."""
    shutil.rmtree(config.consumequeue_dir)
    shutil.rmtree(config.index_dir)
    (config.data_dir / "checkpoint").unlink()


def open_store(config: StoreConfig) -> MessageStore:
    """A started store whose retention sees an empty disk: the host's own disk use must not
    delete segments in a unit test (tests of retention by disk use set their own ratio)."""
    store = MessageStore(config, store_host=HOST)
    store.retention.used_ratio = lambda _path: 0.0
    store.start()
    return store


@contextlib.contextmanager
def reopened(config: StoreConfig) -> Iterator[MessageStore]:
    """The store started again on `config`'s files, shut down after the block (failed or not)."""
    store = open_store(config)
    try:
        yield store
    finally:
        store.shutdown()


def read_all(store: MessageStore, topic: str, queue_id: int) -> list[record.Record]:
    out, offset = [], store.min_offset(topic, queue_id)
    while offset < store.max_offset(topic, queue_id):
        result = store.get_messages(topic, queue_id, offset, max_messages=1000, max_bytes=1 << 30)
        out.extend(record.iter_records(result.records))
        assert result.next_begin_offset > offset
        offset = result.next_begin_offset
    return out


# Property lists as producers lay them out (TAGS, optional KEYS, UNIQ_KEY) or in any other
# order, with look-alike names, duplicates and empty values.
PROPERTY_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "MY_UNIQ_KEY", "KEYSX", "a"]
_values = st.text(alphabet="ab z", max_size=6)
property_lists = st.one_of(
    st.tuples(_values, st.one_of(st.none(), _values), _values).map(
        lambda t: [("TAGS", t[0])] + ([("KEYS", t[1])] if t[1] is not None else [])
        + [("UNIQ_KEY", t[2])]),
    st.lists(st.tuples(st.sampled_from(PROPERTY_NAMES), _values), max_size=6),
)


class DiskGates:
    """A faked disk operation: call i waits for gate i to open, then fails (EIO) if told to.
    The disk is outside the system; everything around it stays real."""

    def __init__(self, gates: int, failing: set[int] = frozenset()) -> None:
        self.gates = [threading.Event() for _ in range(gates)]
        self.entered = [threading.Event() for _ in range(gates)]
        self.failing = failing
        self.calls = 0

    def enter(self) -> None:
        call, self.calls = self.calls, self.calls + 1
        if call < len(self.gates):
            self.entered[call].set()
            assert self.gates[call].wait(30)
        if call in self.failing:
            raise OSError(errno.EIO, "Input/output error")

    def open_all(self) -> None:
        for gate in self.gates:
            gate.set()


class GatedSync(DiskGates):
    """The disk of a store's PySyncers: a gated fdatasync (set before the first append)."""

    def __init__(self, store, gates: int, failing: set[int] = frozenset()) -> None:
        super().__init__(gates, failing)
        from tidemq.broker.store.syncer import PySyncer
        store.syncer_factory = lambda fd: PySyncer(fd, fdatasync=self)

    def __call__(self, fd: int) -> None:
        self.enter()
        os.fdatasync(fd)
