"""A broker's scheduling parts over one real store, driven by a test clock (no network): what
the scheduled-delivery tests share."""

from __future__ import annotations

import asyncio
import time

from tidemq.broker.long_poll import PullRequestHoldService
from tidemq.broker.messaging import Messaging
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.schedule import Deliverer, ScheduleService, TimingWheel
from tidemq.broker.store import MessageStore, MetadataFile, StoreConfig
from tidemq.broker.system_topics import SystemTopics
from tidemq.broker.topic_table import TopicConfig, TopicTable
from tidemq.client.encoding import BatchEncoder
from tidemq.client.message import Message
from tidemq.common import delays, record

TOPIC = "orders"
LEVELS = delays.parse_delay_levels(delays.DEFAULT_DELAY_LEVELS)


class Clock:
    """The time the test was set up plus an offset the test moves forward: the timer reads
    only this clock, so what is due when is exact (store timestamps are not looked at)."""

    def __init__(self) -> None:
        self.base = time.time()
        self.offset = 0.0

    def __call__(self) -> float:
        return self.base + self.offset

    def ms(self) -> int:
        return int(self() * 1000)


class Scheduled:
    """A broker's scheduling parts over one store, as app.py wires them."""

    def __init__(self, tmp_path, clock: Clock) -> None:
        self.dir, self.clock = tmp_path, clock
        self.store = MessageStore(StoreConfig(data_dir=tmp_path / "store", segment_size=8 << 20,
                                              max_message_size=4096, index_slots=64,
                                              index_entries=256))
        self.store.start()
        self.holds = PullRequestHoldService()
        self.table = TopicTable(MetadataFile(tmp_path / "topics.json"))
        self.table.apply([TopicConfig(TOPIC, 2)], [], 1)
        self.messaging = Messaging(self.store, self.table, self.holds, long_poll_max_ms=0,
                                   max_pull_messages=32, max_pull_bytes=1 << 20)
        versions = iter(range(2, 1 << 30))
        self.topics = SystemTopics(self.messaging, lambda name, queues: self.table.apply(
            [TopicConfig(name, queues)], [], next(versions)), wait_s=1)
        self.wheel = TimingWheel()
        self.schedule = ScheduleService(self.messaging, self.topics, self.wheel,
                                        level_ms=LEVELS, max_delay_ms=delays.DEFAULT_MAX_DELAY_MS,
                                        clock=clock)
        self.offsets = ConsumerOffsetManager(MetadataFile(tmp_path / "offsets.json"))
        self.deliverer = self.new_deliverer()
        self.loop = asyncio.new_event_loop()

    def new_deliverer(self) -> Deliverer:
        return Deliverer(self.messaging, self.offsets, self.wheel, clock=self.clock)

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def send(self, *messages: Message, queue_id: int = 0):
        encoder = BatchEncoder(max_message_size=4096, compression="none",
                               compress_threshold=1 << 20, born_host=b"\0" * 8)
        raw, _, scheduled = encoder.encode_marked(messages)
        assert scheduled == any(m.delay_level or m.deliver_at_ms for m in messages)
        return self.run(self.schedule.send(TOPIC, queue_id, raw, len(messages)))

    def tick(self) -> int:
        return self.run(self.deliverer.tick())

    def real(self, queue_id: int = 0) -> list[record.Record]:
        assert self.store.wait_dispatched(5)
        got = self.store.get_messages(TOPIC, queue_id, 0, 10_000, 64 << 20)
        return list(record.iter_records(got.records)) if got.records else []

    def close(self) -> None:
        self.loop.close()
        self.holds.shutdown()
        self.store.shutdown()
