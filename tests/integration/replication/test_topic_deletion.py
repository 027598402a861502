"""A topic deleted in the config center, on a 3-replica group of real processes: the master's
marker reaches every slave, each replica's queues drop the old messages at the same offset,
and after the master is SIGKILLed the promoted slave goes on with the topic created again from
where the old offsets ended, with none of the old messages readable."""

from __future__ import annotations

from tidemq.client import Message, Producer, PullConsumer
from tidemq.client.message import MessageQueue
from tidemq.client.routes import NameServerClient
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.topics import TopicDefinitions
from tidemq.v1 import broker_pb2

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    broker_call,
    start_group,
    wait_in_sync,
)
from tests.support.cluster import create_topic_in_config_center, wait_for_route
from tests.support.processes import wait_until


def _unrouted(cluster) -> bool:
    try:
        for ns in cluster.namesrvs:
            NameServerClient(ns.addr).route(TOPIC)
    except errors.TopicNotExist:
        return True
    return False


def _queue_bounds(addr: str) -> tuple[int, int]:
    queues = broker_call(addr, "GetQueueOffsets",
                         broker_pb2.GetQueueOffsetsRequest(topic=TOPIC)).queues
    return next((q.min_offset, q.max_offset) for q in queues if q.queue_id == 0)


def test_a_deleted_topic_is_gone_on_every_replica_and_after_a_failover(cluster):
    group = start_group(cluster)
    wait_in_sync(cluster, {0, 1, 2})
    mq = MessageQueue(TOPIC, GROUP, 0)
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        producer.send_batch([Message(TOPIC, f"old-{n}".encode()) for n in range(10)], queue=mq)

    with ConfigClient(cluster.config_center.addr) as config:
        TopicDefinitions(config).delete(TOPIC)
    wait_until(lambda: _unrouted(cluster), 30, message="the deleted topic unrouted")
    create_topic_in_config_center(cluster, TOPIC, 2)
    wait_for_route(cluster, TOPIC, 1)
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        sent = producer.send_batch([Message(TOPIC, b"new-0"), Message(TOPIC, b"new-1")],
                                   queue=mq)
    assert [r.queue_offset for r in sent] == [10, 11]  # offsets go on from the old end

    wait_in_sync(cluster, {0, 1, 2})
    for replica in group.replicas:
        wait_until(lambda addr=replica.addr: _queue_bounds(addr) == (10, 12), 20,
                   message=f"replica {replica.addr} holds only the new messages")

    old_master = group.wait_master()
    group.replicas[old_master].kill()
    alive = tuple(r for r in range(3) if r != old_master)
    new_master = group.wait_master(alive, timeout=30)
    assert new_master != old_master
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        def sent_to_the_new_master():
            try:
                return producer.send_batch([Message(TOPIC, b"new-2")], queue=mq)[0]
            except errors.TideMQError:  # routes still name the killed master
                return None
        after = wait_until(sent_to_the_new_master, 30, interval=0.2,
                           message="a send to the new master")
    assert after.queue_offset == 12

    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="after-deletion")
    first = consumer.pull(mq, 0)  # from the old topic's start: told where the topic starts
    assert first.next_offset == 10 and not first.messages
    read, offset = [], 10
    while offset < 13:
        result = consumer.pull(mq, offset)
        read += [m.body for m in result.messages]
        offset = result.next_offset
    assert read == [b"new-0", b"new-1", b"new-2"]
