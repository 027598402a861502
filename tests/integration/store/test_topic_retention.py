"""Retention per topic with real processes (docs/storage.md, "Retention per topic"): two topics
on one broker, one keeping its records 3 s (the acceptance's 60 s is the same mechanism, only
slower to wait for), one 10 min. Once the short one's retention passed, its messages are gone
to every reader — pull, pop, the HTTP gateway, the Spark source's reads — while the long one's, in the same CommitLog
segment, are all still there."""

from __future__ import annotations

import pytest
import requests
from tidemq.client import Message, MessageQueue, Producer, PullConsumer, SimpleConsumer
from tidemq.client.admin import Admin

from tests.support.cluster import BROKER_TEST_FLAGS, running_cluster
from tests.support.processes import wait_until

SHORT, LONG = "RetentionShort", "RetentionLong"
COUNT = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("topic-retention"), broker_names=()) as cluster:
        cluster.brokers["broker-a"] = cluster.start("tidemq.broker", [
            "--cluster-name", "TestCluster", "--broker-name", "broker-a", "--broker-id", "0",
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, *BROKER_TEST_FLAGS,
            "--retention-check-interval-ms", "200"])
        cluster.start_gateway(workers=1)
        yield cluster


def _pull(consumer: PullConsumer, topic: str):
    return consumer.pull(MessageQueue(topic, "broker-a", 0), 0, max_messages=COUNT)


@pytest.fixture(scope="module")
def expired(cluster):
    """SHORT and LONG written side by side; returns once SHORT's records expired."""
    with Admin(cluster.namesrv_addrs, config_center=cluster.config_center.addr) as admin:
        admin.create_topic(SHORT, 1, config={"retention.ms": 3000})
        admin.create_topic(LONG, 1, config={"retention.ms": 600_000})
    with Producer(cluster.namesrv_addrs) as producer:
        for i in range(COUNT):   # interleaved: both topics' records share the segment
            producer.send(Message(SHORT, f"short-{i}".encode()))
            producer.send(Message(LONG, f"long-{i}".encode()))
    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="retention-reader")
    try:
        wait_until(lambda: consumer.queue_offsets(SHORT, "broker-a")[0] == (COUNT, COUNT),
                   60, interval=0.2, message="the short topic's records to expire")
        yield consumer
    finally:
        consumer.close()


def test_short_retention_topic_expires_to_every_reader_while_the_long_one_stays(
        cluster, expired):
    consumer = expired
    gone = _pull(consumer, SHORT)
    assert gone.messages == [] and gone.next_offset == COUNT and gone.min_offset == COUNT
    kept = _pull(consumer, LONG)
    assert [m.body for m in kept.messages] == [f"long-{i}".encode() for i in range(COUNT)]

    popper = SimpleConsumer(cluster.namesrv_addrs, "retention-popper", SHORT, timeout=10)
    assert popper.receive(32) == []
    long_popper = SimpleConsumer(cluster.namesrv_addrs, "retention-popper", LONG, timeout=10)
    popped = wait_until(lambda: long_popper.receive(32), 30, interval=0.2,
                        message="a pop of the long topic")
    assert {m.message.body for m in popped} <= {f"long-{i}".encode() for i in range(COUNT)}

    url = f"{cluster.gateway_url}/v1/topics/{{}}/queues/broker-a/0/messages?offset=0&max=32"
    short_http = requests.get(url.format(SHORT), timeout=30).json()
    assert short_http["messages"] == [] and short_http["min_offset"] == COUNT, short_http
    long_http = requests.get(url.format(LONG), timeout=30).json()
    assert len(long_http["messages"]) == COUNT and long_http["min_offset"] == 0, long_http

    described = requests.get(f"{cluster.gateway_url}/v1/topics/{SHORT}", timeout=30).json()
    assert described["queues"][0]["min_offset"] == COUNT
    assert described["config"]["retention.ms"] == {"value": 3000, "source": "topic"}


def test_the_spark_sources_reads_see_the_expiry(cluster, expired):
    """What the Spark source's partitions run (tidemq.analytics.brokers): a range planned
    over the expired records fails as Kafka's source does, or is skipped with
    failOnDataLoss=false; the long topic's range reads whole."""
    brokers = pytest.importorskip("tidemq.analytics.brokers")
    from tidemq.common import errors, record

    addrs = [cluster.brokers["broker-a"].addr]
    with pytest.raises(errors.PreconditionFailed, match="failOnDataLoss"):
        list(brokers.pull_range(addrs, SHORT, 0, 0, COUNT, max_messages=32, timeout=10))
    assert list(brokers.pull_range(addrs, SHORT, 0, 0, COUNT, max_messages=32, timeout=10,
                                   fail_on_data_loss=False)) == []
    spark_long = [r for chunk in brokers.pull_range(addrs, LONG, 0, 0, COUNT,
                                                    max_messages=32, timeout=10)
                  for r in record.iter_records(chunk)]
    assert len(spark_long) == COUNT


def test_retention_changed_live_applies_at_the_next_run(cluster):
    topic = "RetentionAltered"
    with Admin(cluster.namesrv_addrs, config_center=cluster.config_center.addr) as admin:
        admin.create_topic(topic, 1)
        with Producer(cluster.namesrv_addrs) as producer:
            for i in range(5):
                producer.send(Message(topic, f"m-{i}".encode()))
        consumer = PullConsumer(cluster.namesrv_addrs, consumer_group="retention-altered")
        try:
            assert consumer.queue_offsets(topic, "broker-a")[0] == (0, 5)
            admin.alter_topic(topic, {"retention.bytes": 1})    # keeps no whole record
            wait_until(lambda: consumer.queue_offsets(topic, "broker-a")[0] == (5, 5), 60,
                       interval=0.2, message="retention.bytes to apply once altered")
        finally:
            consumer.close()
