"""Producer and PullConsumer against real name servers and brokers (two broker groups)."""

from __future__ import annotations

import time
from concurrent.futures import wait

import pytest
from tidemq.client import (
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
    SelectByHash,
    SendStatus,
)
from tidemq.common import record
from tidemq.common.errors import TopicNotExist

from tests.support.cluster import (
    create_topic_in_config_center,
    wait_for_route,
)
from tests.support.processes import wait_until

TOPIC = "ClientTopic"


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The shared two-broker cluster (tests/conftest.py): the topic and group are this
    module's own."""
    create_topic_in_config_center(shared_cluster, TOPIC, 4)
    wait_for_route(shared_cluster, TOPIC, 2)
    return shared_cluster


@pytest.fixture(scope="module")
def producer(cluster):
    with Producer(cluster.namesrv_addrs, compress_threshold=1024) as p:
        yield p


@pytest.fixture(scope="module")
def consumer(cluster):
    with PullConsumer(cluster.namesrv_addrs, consumer_group="it-group") as c:
        yield c


def pull_exactly(consumer: PullConsumer, mq: MessageQueue, offset: int, count: int):
    """Acknowledged messages become pullable once the broker's dispatcher indexed them
    (asynchronously, docs/storage.md): poll until all `count` are there."""
    collected = []

    def more():
        result = consumer.pull(mq, offset + len(collected), count - len(collected))
        collected.extend(result.messages)
        return len(collected) >= count

    wait_until(more, 15, interval=0.02, message=f"{count} messages at {mq}:{offset}")
    return collected


def read_all(consumer: PullConsumer, mq: MessageQueue, start: int = 0):
    messages, offset = [], start
    while True:
        result = consumer.pull(mq, offset, 64)
        if result.status != PullStatus.FOUND:
            return messages
        messages.extend(result.messages)
        offset = result.next_offset


def test_sent_messages_come_back_with_their_fields(producer, consumer):
    result = producer.send(Message(TOPIC, b"x" * 5000, tags="big", keys=["k-1"],
                                   properties={"origin": "it"}))
    assert result.status == SendStatus.SEND_OK and len(result.msg_id) == 32
    mq = MessageQueue(TOPIC, result.broker_name, result.queue_id)
    (message,) = pull_exactly(consumer, mq, result.queue_offset, 1)
    assert message.body == b"x" * 5000  # compressed on the wire, transparently restored
    assert message.tags == "big" and message.keys == ["k-1"]
    assert message.user_properties == {"origin": "it"}
    assert message.unique_id == result.unique_id and message.msg_id == result.msg_id
    assert message.queue_offset == result.queue_offset and message.store_timestamp > 0
    assert result.store_timestamp == message.store_timestamp   # the Send reply says it


def test_batch_is_one_queue_with_contiguous_offsets(producer, consumer):
    mq = consumer.fetch_queues(TOPIC)[1]
    results = producer.send_batch([Message(TOPIC, f"b{i}".encode()) for i in range(10)], queue=mq)
    assert {(r.broker_name, r.queue_id) for r in results} == {(mq.broker_name, mq.queue_id)}
    first = results[0].queue_offset
    assert [r.queue_offset for r in results] == list(range(first, first + 10))
    bodies = [m.body for m in pull_exactly(consumer, mq, first, 10)]
    assert bodies == [f"b{i}".encode() for i in range(10)]


def test_round_robin_uses_both_broker_groups(producer):
    results = [producer.send(Message(TOPIC, b"rr")) for _ in range(16)]
    assert {r.broker_name for r in results} == {"broker-a", "broker-b"}
    assert len({(r.broker_name, r.queue_id) for r in results}) == 8


def test_selector_keeps_one_key_in_one_queue_in_order(producer, consumer):
    results = [producer.send(Message(TOPIC, f"order-42:{i}".encode()),
                             selector=SelectByHash(), arg="order-42") for i in range(12)]
    assert len({(r.broker_name, r.queue_id) for r in results}) == 1
    offsets = [r.queue_offset for r in results]
    assert offsets == sorted(offsets) and len(set(offsets)) == 12
    mq = MessageQueue(TOPIC, results[0].broker_name, results[0].queue_id)
    span = pull_exactly(consumer, mq, offsets[0], offsets[-1] - offsets[0] + 1)
    mine = [m.body for m in span if m.body.startswith(b"order-42:")]
    assert mine == [f"order-42:{i}".encode() for i in range(12)]


def test_async_and_oneway_sends(producer, consumer):
    callbacks = []
    futures = [producer.send_async(Message(TOPIC, f"async-{i}".encode()),
                                   callback=callbacks.append) for i in range(20)]
    done, _ = wait(futures, timeout=30)
    assert len(done) == 20 and all(f.result().status == SendStatus.SEND_OK for f in futures)
    wait_until(lambda: len(callbacks) == 20, 10, message="every async callback")
    producer.send_oneway(Message(TOPIC, b"oneway-marker"))

    def oneway_stored():
        return any(m.body == b"oneway-marker" for mq in consumer.fetch_queues(TOPIC)
                   for m in read_all(consumer, mq))

    wait_until(oneway_stored, 15, interval=0.1, message="the oneway message to be readable")


def test_offsets_commit_and_timestamp_lookup(producer, consumer):
    mq = consumer.fetch_queues(TOPIC)[0]
    before = int(time.time() * 1000) - 60_000
    (sent,) = producer.send_batch([Message(TOPIC, b"ts")], queue=mq)
    assert consumer.offset_for_timestamp(mq, before) == 0
    # with the found message's store time; past every message: the end, no time
    (first,) = pull_exactly(consumer, mq, 0, 1)
    assert consumer.search_timestamp(mq, before) == (0, first.store_timestamp)
    assert consumer.search_timestamp(mq, sent.store_timestamp + 60_000) == \
        (sent.queue_offset + 1, 0)
    assert consumer.committed(MessageQueue(TOPIC, mq.broker_name, 3)) in (None, 0)
    consumer.commit(mq, 1, metadata="batch-7")
    assert consumer.committed(mq) == 1
    assert consumer.committed_with_metadata(mq) == (1, "batch-7")
    assert consumer.queue_offsets(TOPIC, mq.broker_name)[mq.queue_id][1] >= 1


def test_unknown_topic_is_topic_not_exist(producer, consumer):
    with pytest.raises(TopicNotExist) as info:
        producer.send(Message("NoSuchTopic", b"x"))
    assert "NoSuchTopic" in info.value.message and info.value.code == "TOPIC_NOT_EXIST"
    with pytest.raises(TopicNotExist):
        consumer.fetch_queues("NoSuchTopic")


def test_a_dead_name_server_is_failed_over(cluster):
    addrs = "127.0.0.1:1;" + cluster.namesrv_addrs  # the first one never answers
    with Producer(addrs) as p:
        for _ in range(3):
            assert p.send(Message(TOPIC, b"via-second-namesrv")).status == SendStatus.SEND_OK


def test_pull_keeps_only_exact_tags_when_tag_hashes_collide(producer, consumer):
    """The broker filters by tag hash; these two tags share one (CRC32), so the client must
    drop the one not asked for."""
    wanted, twin = "tag29685295", "tag32060020"
    assert record.tag_hash(wanted) == record.tag_hash(twin)
    mq = MessageQueue(TOPIC, "broker-a", 3)
    sent = producer.send_batch([Message(TOPIC, f"t-{i}".encode(), tags=(wanted, twin)[i % 2])
                                for i in range(6)], queue=mq)
    start, end = sent[0].queue_offset, sent[-1].queue_offset + 1
    bodies, offset = [], start

    def read_to_end():
        nonlocal offset
        result = consumer.pull(mq, offset, 32, tag_expression=wanted)
        bodies.extend(m.body for m in result.messages)
        offset = max(offset, result.next_offset)
        return offset >= end

    wait_until(read_to_end, 15, interval=0.02, message="the tagged batch read to its end")
    assert bodies == [b"t-0", b"t-2", b"t-4"]
