"""A broker without a network: its store, topic table, long-poll holds and Messaging over one
directory, wired as app.py wires them, minus gRPC and the config center. The unit tests of
the broker's services (retries, the timer, pop, transactions, idempotent sends, metrics) build
theirs on it."""

from __future__ import annotations

import itertools
from pathlib import Path

from tidemq.broker.long_poll import PullRequestHoldService
from tidemq.broker.messaging import Messaging
from tidemq.broker.store import MessageStore, MetadataFile, StoreConfig
from tidemq.broker.system_topics import SystemTopics
from tidemq.broker.topic_table import TopicConfig, TopicTable


class LocalBroker:
    """`topics` are served from the start; `define` adds one as the config center and the
    TopicManager would (what `system_topics()` uses), recording it in `defined`. `close()`
    stops the holds and the store; a new LocalBroker on the same directory is a restart."""

    def __init__(self, directory: Path, topics: list[TopicConfig], *,
                 segment_size: int = 1 << 20, max_message_size: int | None = 4096,
                 index_slots: int = 64, index_entries: int = 256, long_poll_max_ms: int = 0,
                 wake_long_polls: bool = False, slave: bool = False) -> None:
        self.dir = Path(directory)
        limit = {} if max_message_size is None else {"max_message_size": max_message_size}
        self.store = MessageStore(StoreConfig(
            data_dir=self.dir / "store", segment_size=segment_size, index_slots=index_slots,
            index_entries=index_entries, **limit))
        self.store.start()
        if slave:
            self.store.become_slave()
        self.holds = PullRequestHoldService()
        if wake_long_polls:
            self.store.add_arrival_listener(self.holds.notify_arrival)
        self.table = TopicTable(MetadataFile(self.dir / "topics.json"))
        self._versions = itertools.count(1)
        self.table.apply(topics, [], next(self._versions))
        self.messaging = Messaging(self.store, self.table, self.holds,
                                   long_poll_max_ms=long_poll_max_ms, max_pull_messages=32,
                                   max_pull_bytes=1 << 20)
        self.defined: list[tuple[str, int]] = []

    def define(self, name: str, queues: int) -> None:
        self.defined.append((name, queues))
        self.table.apply([TopicConfig(name, queues)], [], next(self._versions))

    def system_topics(self) -> SystemTopics:
        return SystemTopics(self.messaging, self.define, wait_s=1)

    def close(self) -> None:
        self.holds.shutdown()
        self.store.shutdown()


class SlowSlave:
    """A SYNC replication gate on `store` waiting for one slave (id 1) that acknowledges
    nothing until `catch_up()`: appends time out FLUSH_SLAVE_TIMEOUT after `timeout_ms`."""

    def __init__(self, store: MessageStore, timeout_ms: int = 300) -> None:
        from tidemq.broker.store.ha.gate import ReplicationGate
        from tidemq.broker.store.ha.in_sync import InSyncTracker

        self.store = store
        self.tracker = InSyncTracker(0, {0, 1}, lag_max_ms=10_000, min_in_sync=2)
        self.gate = ReplicationGate(self.tracker, store.commitlog_max_offset,
                                    timeout_ms=timeout_ms)
        store.set_replication_gate(self.gate)

    def catch_up(self) -> None:
        """The slave now holds everything written."""
        end = self.store.commitlog_max_offset()
        self.tracker.on_ack(1, end, end, now_ms=0)
        self.gate.on_progress()

    def close(self) -> None:
        self.store.set_replication_gate(None)
