"""A broker's scheduling parts over one real store, driven by a test clock (no network): what
the scheduled-delivery tests share."""

from __future__ import annotations

import asyncio

from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.schedule import Deliverer, ScheduleService, TimingWheel
from tidemq.broker.store import MetadataFile
from tidemq.broker.topic_table import TopicConfig
from tidemq.client.encoding import BatchEncoder
from tidemq.client.message import Message
from tidemq.common import delays, record

from tests.support.clock import FakeClock
from tests.support.local_broker import LocalBroker

TOPIC = "orders"
LEVELS = delays.parse_delay_levels(delays.DEFAULT_DELAY_LEVELS)


class Scheduled:
    """A broker's scheduling parts over one store, as app.py wires them."""

    def __init__(self, tmp_path, clock: FakeClock) -> None:
        self.dir, self.clock = tmp_path, clock
        self.broker = LocalBroker(tmp_path, [TopicConfig(TOPIC, 2)], segment_size=8 << 20)
        self.store, self.messaging = self.broker.store, self.broker.messaging
        self.topics = self.broker.system_topics()
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
        self.broker.close()
