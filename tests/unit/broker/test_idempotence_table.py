"""The idempotent-producer table as a hypothesis state machine against a naive model: the
full history of writes, from which the window (time, per-producer count, producer count)
is recomputed on every lookup."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tidemq.broker.idempotence import ProducerTable, StoredAt

WINDOW_MS, WINDOW_MESSAGES, MAX_PRODUCERS = 1000, 4, 3
producers = st.sampled_from(["p0", "p1", "p2", "p3", "p4"])
unique_ids = st.sampled_from([f"u{i}" for i in range(8)])


class Model:
    """Every write in order; what the table must know is derived from it alone."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, StoredAt]] = []  # accepted (first of its id) writes
        self.producer_order: list[str] = []                # last-written order, oldest first

    def record(self, producer, unique_id, stored, now):
        accepted = stored.store_timestamp_ms >= now - WINDOW_MS and \
            self.lookup(producer, unique_id, now) is None
        if producer in self.producer_order or accepted:
            # a write moves its producer to the newest place; a stale write to an unknown
            # producer leaves nothing, so it does not count as one
            if producer in self.producer_order:
                self.producer_order.remove(producer)
            self.producer_order.append(producer)
        if accepted:
            # an id still held keeps its original; one that left the window is new again
            self.writes = [w for w in self.writes if (w[0], w[1]) != (producer, unique_id)]
            self.writes.append((producer, unique_id, stored))
        self._forget(now)

    def _forget(self, now):
        by_producer: dict[str, list] = {}
        for w in self.writes:
            by_producer.setdefault(w[0], []).append(w)
        keep = set()
        for ws in by_producer.values():
            # count window, then the time window from the front (oldest first)
            ws = ws[-WINDOW_MESSAGES:]
            while ws and ws[0][2].store_timestamp_ms < now - WINDOW_MS:
                ws = ws[1:]
            keep.update(id(w) for w in ws)
        self.writes = [w for w in self.writes if id(w) in keep]
        # producers with nothing left in the window go first, then the least recently written
        alive = {w[0] for w in self.writes}
        self.producer_order = [p for p in self.producer_order if p in alive]
        evicted = set(self.producer_order[:-MAX_PRODUCERS])
        self.producer_order = self.producer_order[-MAX_PRODUCERS:]
        self.writes = [w for w in self.writes if w[0] not in evicted]

    def lookup(self, producer, unique_id, now):
        for w in self.writes:
            if (w[0], w[1]) == (producer, unique_id) and \
                    w[2].store_timestamp_ms >= now - WINDOW_MS:
                return w[2]
        return None


class TableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = ProducerTable(window_ms=WINDOW_MS, window_messages=WINDOW_MESSAGES,
                                   max_producers=MAX_PRODUCERS)
        self.model = Model()
        self.now = 10_000
        self.offset = 0

    @rule(producer=producers, unique_id=unique_ids, age=st.sampled_from([0, 0, 0, 500, 2000]))
    def store(self, producer, unique_id, age):
        stored = StoredAt("t", 0, self.offset, self.offset * 100, self.now - age)
        self.offset += 1
        self.table.record(producer, unique_id, stored, self.now)
        self.model.record(producer, unique_id, stored, self.now)

    @rule(step=st.integers(0, 700))
    def time_passes(self, step):
        self.now += step

    @precondition(lambda self: True)
    @rule()
    def expire(self):
        self.table.expire(self.now)

    @rule(producer=producers, unique_id=unique_ids)
    def lookup(self, producer, unique_id):
        assert self.table.lookup(producer, unique_id, self.now) == \
            self.model.lookup(producer, unique_id, self.now)

    @invariant()
    def bounded(self):
        assert len(self.table.producers()) <= MAX_PRODUCERS
        assert len(self.table) <= MAX_PRODUCERS * WINDOW_MESSAGES

    @invariant()
    def agrees_everywhere(self):
        for producer in ["p0", "p1", "p2", "p3", "p4"]:
            for i in range(8):
                assert self.table.lookup(producer, f"u{i}", self.now) == \
                    self.model.lookup(producer, f"u{i}", self.now), (producer, i)


TableMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40,
                                          deadline=None)
test_producer_table = TableMachine.TestCase
