"""Sequenced idempotent sends (Kafka's idempotent producer): the state per (producer, queue).

A sequenced batch names a numeric producer id, its epoch and the sequence of its first record;
record i has sequence base + i (wrapping from 2^31 - 1 to 0, as Kafka's do). Per (producer id,
topic, queue) the broker keeps the producer's epoch and its last `BATCHES_KEPT` batches, which
is exactly what Kafka's `ProducerStateManager` keeps, and checks each new batch as Kafka's
`ProducerAppendInfo.checkSequence` does:

* a batch equal to one kept (same epoch, first and last sequence): a **duplicate**, answered
  with where it was stored the first time, stored nothing;
* an older epoch: INVALID_PRODUCER_EPOCH (a fenced producer);
* a newer epoch: must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
* the same epoch: must start right after the last kept batch, else
  OUT_OF_ORDER_SEQUENCE_NUMBER (a gap, or a duplicate older than the kept batches);
* no state for the producer on this queue: sequence 0 starts it; any other sequence is
  UNKNOWN_PRODUCER_ID (the state was evicted, or is older than the log the broker rebuilt
  it from); Kafka clients answer that by resetting the producer (a new id or epoch).

Bounded: at most `max_entries` (producer, queue) entries; when full, the least recently
written entry is evicted (an LRU by last append). Pure data: no store, no clock, no lock.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from typing import NamedTuple

from tidemq.common.errors import PreconditionFailed

BATCHES_KEPT = 5          # Kafka's NUM_BATCHES_TO_RETAIN (= max.in.flight.requests.per.connection)
SEQUENCE_MODULUS = 1 << 31


class SequenceError(PreconditionFailed):
    """A sequenced batch refused; `code` is Kafka's error name."""


class StoredBatch(NamedTuple):
    """One batch a producer stored on a queue: what its duplicate is answered with."""

    first_sequence: int
    last_sequence: int
    first_queue_offset: int
    first_physical_offset: int
    count: int


class Entry:
    """A producer's epoch and its last batches on one queue, packed: four int64 per batch
    (first and last sequence, first queue offset, first physical offset), oldest first, so
    an entry with five batches costs about 530 bytes with its key (100 000 of them ~ 53 MB,
    measured)."""

    __slots__ = ("epoch", "_packed")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self._packed = array("q")

    @property
    def batches(self) -> list[StoredBatch]:
        packed = self._packed
        return [StoredBatch(packed[i], packed[i + 1], packed[i + 2], packed[i + 3],
                            (packed[i + 1] - packed[i]) % SEQUENCE_MODULUS + 1)
                for i in range(0, len(packed), 4)]

    @property
    def last_sequence(self) -> int:
        return self._packed[-3]

    def find(self, first_sequence: int, last: int) -> StoredBatch | None:
        packed = self._packed
        for i in range(0, len(packed), 4):
            if packed[i] == first_sequence and packed[i + 1] == last:
                return StoredBatch(first_sequence, last, packed[i + 2], packed[i + 3],
                                   (last - first_sequence) % SEQUENCE_MODULUS + 1)
        return None

    def add(self, batch: StoredBatch) -> None:
        self._packed.extend(batch[:4])
        if len(self._packed) > 4 * BATCHES_KEPT:
            del self._packed[:4]

    def reset(self, epoch: int) -> None:
        self.epoch = epoch
        del self._packed[:]


def last_sequence(first_sequence: int, count: int) -> int:
    return (first_sequence + count - 1) % SEQUENCE_MODULUS


def _next(sequence: int) -> int:
    return (sequence + 1) % SEQUENCE_MODULUS


Key = tuple[int, str, int]   # (producer id, topic, queue id)


class SequenceTable:
    def __init__(self, max_entries: int) -> None:
        if max_entries <= 0:
            raise ValueError("the sequence table must hold at least one entry")
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, Entry] = OrderedDict()
        self.evicted = 0   # entries dropped for room since start (a metric)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def get(self, key: Key) -> Entry | None:
        return self._entries.get(key)

    def check(self, key: Key, epoch: int, first_sequence: int,
              count: int) -> StoredBatch | None:
        """The batch's original if it is a duplicate; None if it may be appended; raises
        SequenceError (with Kafka's code) if it is refused."""
        if epoch < 0 or first_sequence < 0 or count <= 0 or first_sequence >= SEQUENCE_MODULUS:
            raise SequenceError(f"a sequenced batch needs epoch >= 0, 0 <= sequence < 2^31 and "
                                f"records (epoch {epoch}, sequence {first_sequence})",
                                code="INVALID_RECORD")
        producer_id = key[0]
        entry = self._entries.get(key)
        if entry is None:
            if first_sequence != 0:
                raise SequenceError(
                    f"producer {producer_id} has no state on {key[1]}:{key[2]} (evicted or "
                    f"older than the log the broker rebuilt it from) and sent sequence "
                    f"{first_sequence}, not 0", code="UNKNOWN_PRODUCER_ID")
            return None
        if epoch < entry.epoch:
            raise SequenceError(f"producer {producer_id} epoch {epoch} is fenced: epoch "
                                f"{entry.epoch} wrote since", code="INVALID_PRODUCER_EPOCH")
        last = last_sequence(first_sequence, count)
        if epoch > entry.epoch:
            if first_sequence != 0:
                raise SequenceError(f"producer {producer_id}'s new epoch {epoch} must start at "
                                    f"sequence 0, not {first_sequence}",
                                    code="OUT_OF_ORDER_SEQUENCE_NUMBER")
            return None
        original = entry.find(first_sequence, last)
        if original is not None:
            return original
        expected = _next(entry.last_sequence)
        if first_sequence != expected:
            raise SequenceError(f"producer {producer_id} epoch {epoch} sent sequence "
                                f"{first_sequence} on {key[1]}:{key[2]}, expected {expected}",
                                code="OUT_OF_ORDER_SEQUENCE_NUMBER")
        return None

    def record(self, key: Key, epoch: int, batch: StoredBatch) -> None:
        """Remember an appended batch (after `check` let it through, or from the log)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Entry(epoch)
        else:
            self._entries.move_to_end(key)
        if epoch != entry.epoch:
            entry.reset(epoch)
        entry.add(batch)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self.evicted += 1

    def restore(self, key: Key, epoch: int, batch: StoredBatch) -> None:
        """Replay a batch found in the log (log order): an older epoch than the one kept is
        ignored, as the broker refused such a batch when it came."""
        entry = self._entries.get(key)
        if entry is not None and epoch < entry.epoch:
            return
        self.record(key, epoch, batch)
