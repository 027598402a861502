"""A master sends a consumer that reads far behind to an in-sync slave, and the slave sends it
back once it has caught up (RocketMQ's suggestWhichBrokerId), with every message read once,
in order. The distance is shrunk to 64 KiB so a few hundred KiB of messages show both moves."""

from __future__ import annotations

from tidemq.broker.registration import SLAVE, registered_id
from tidemq.client import Message, Producer, PullConsumer
from tidemq.client.message import MessageQueue

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    start_group,
    wait_in_sync,
)

BEHIND = 64 * 1024


class RecordingConsumer(PullConsumer):
    """Records which replica (registered broker id, None = master) each pull went to."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sources: list[int | None] = []

    def pull(self, mq, offset, max_messages=32, **kwargs):
        self.sources.append(self.read_from.get(mq))
        return super().pull(mq, offset, max_messages, **kwargs)


def test_far_behind_reads_go_to_a_slave_and_come_back(cluster):
    group = start_group(cluster, extra=["--slave-read-behind-bytes", str(BEHIND)])
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    slave_ids = {registered_id(replica, SLAVE) for replica in range(3) if replica != master}
    mq = MessageQueue(TOPIC, GROUP, 0)
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        sent = [producer.send_batch([Message(TOPIC, f"{n:05d}".encode() * 200)
                                     for n in range(i, i + 16)], queue=mq)
                for i in range(0, 400, 16)]
    expected = [r.unique_id for batch in sent for r in batch]
    consumer = RecordingConsumer(cluster.namesrv_addrs, consumer_group="late-reader")
    wait_in_sync(cluster, {0, 1, 2})   # every slave has every byte before the reads start
    read, offset = [], 0
    while offset < len(expected):
        result = consumer.pull(mq, offset, max_messages=16)
        read += [m.unique_id for m in result.messages]
        offset = result.next_offset
    assert read == expected
    assert consumer.sources[0] is None                       # the first pull: the master
    slaves = {s for s in consumer.sources if s is not None}
    assert slaves and slaves <= slave_ids                     # then an in-sync slave ...
    assert mq not in consumer.read_from                       # ... then the master again
