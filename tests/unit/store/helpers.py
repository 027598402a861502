"""Builders shared by the store tests."""

from __future__ import annotations

from pathlib import Path

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


def open_store(config: StoreConfig) -> MessageStore:
    store = MessageStore(config, store_host=HOST)
    store.start()
    return store


def read_all(store: MessageStore, topic: str, queue_id: int) -> list[record.Record]:
    out, offset = [], store.min_offset(topic, queue_id)
    while offset < store.max_offset(topic, queue_id):
        result = store.get_messages(topic, queue_id, offset, max_messages=1000, max_bytes=1 << 30)
        out.extend(record.iter_records(result.records))
        assert result.next_begin_offset > offset
        offset = result.next_begin_offset
    return out
