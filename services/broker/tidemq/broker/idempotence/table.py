"""The idempotent-producer table: for each producer id, the unique ids it stored recently.

Like Kafka's producer state (`ProducerStateManager`), but keyed by the record's own unique id
(UNIQ_KEY) instead of a sequence number, so a client needs no sequence bookkeeping: a replayed
micro-batch carries the same ids. The window is bounded three ways, all settings: entries
older than `window_ms` (by store time), more than `window_messages` per producer (oldest go
first), and more than `max_producers` producers (those with no id left in the window, then
the least recently written). Pure data:
no store, no clock of its own; the caller passes `now_ms`, so it is a tested state machine.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple


class StoredAt(NamedTuple):
    """Where a record was stored: what a duplicate of it is answered with."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp_ms: int


class ProducerTable:
    def __init__(self, *, window_ms: int, window_messages: int, max_producers: int) -> None:
        if window_ms <= 0 or window_messages <= 0 or max_producers <= 0:
            raise ValueError("dedup window, per-producer count and producer count must be > 0")
        self.window_ms = window_ms
        self.window_messages = window_messages
        self.max_producers = max_producers
        # producer id -> unique id -> where; both in write order (oldest first)
        self._producers: OrderedDict[str, OrderedDict[str, StoredAt]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(ids) for ids in self._producers.values())

    def producers(self) -> list[str]:
        return list(self._producers)

    def clear(self) -> None:
        self._producers.clear()

    def lookup(self, producer_id: str, unique_id: str, now_ms: int) -> StoredAt | None:
        """Where this producer stored `unique_id`, if that is still inside the window."""
        ids = self._producers.get(producer_id)
        if ids is None:
            return None
        stored = ids.get(unique_id)
        if stored is None or stored.store_timestamp_ms < now_ms - self.window_ms:
            return None
        return stored

    def record(self, producer_id: str, unique_id: str, stored: StoredAt, now_ms: int) -> None:
        """Remember a stored record. An id already held keeps its first place (the original
        is what duplicates are answered with); one that left the window is replaced."""
        ids = self._producers.get(producer_id)
        if ids is None:
            ids = self._producers[producer_id] = OrderedDict()
        else:
            self._producers.move_to_end(producer_id)
        if stored.store_timestamp_ms >= now_ms - self.window_ms and \
                self.lookup(producer_id, unique_id, now_ms) is None:
            ids.pop(unique_id, None)
            ids[unique_id] = stored
        self._trim(producer_id, ids, now_ms)
        if len(self._producers) > self.max_producers:
            self.expire(now_ms)   # producers whose ids all left the window go first
        while len(self._producers) > self.max_producers:
            self._producers.popitem(last=False)

    def _trim(self, producer_id: str, ids: OrderedDict[str, StoredAt], now_ms: int) -> None:
        horizon = now_ms - self.window_ms
        while ids and (len(ids) > self.window_messages
                       or next(iter(ids.values())).store_timestamp_ms < horizon):
            ids.popitem(last=False)
        if not ids:
            del self._producers[producer_id]

    def expire(self, now_ms: int) -> None:
        """Drop every entry that left the time window (and producers left with none)."""
        for producer_id in list(self._producers):
            self._trim(producer_id, self._producers[producer_id], now_ms)
