"""LogAppendTime per topic: a topic created through CreateTopics with
message.timestamp.type=LogAppendTime answers produces with their store time and reads with it
(timestamp type 1), whatever CreateTime the producer gave, and ListOffsets by time finds them
by it; DescribeConfigs shows the setting;
a setting the gateway does not serve is INVALID_CONFIG, naming it."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import InvalidConfigurationError

pytestmark = pytest.mark.slow

TOPIC = "k-log-append-time"
OLD_CREATE_TIME = 1_000_000   # 1970: far from any store time


def test_a_log_append_time_topic_stamps_records_with_their_store_time(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=40000)
    try:
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                      topic_configs={"message.timestamp.type": "LogAppendTime"})])
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        assert "LogAppendTime" in repr(described)
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("k-bad-config", num_partitions=1, replication_factor=1,
                                          topic_configs={"segment.bytes": "1048576"})])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("k-bad-config", num_partitions=1, replication_factor=1,
                                          topic_configs={"message.timestamp.type": "Now"})])
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    before_ms = int(time.time() * 1000)
    sent = producer.send(TOPIC, key=b"k", value=b"v", timestamp_ms=OLD_CREATE_TIME).get(15)
    producer.close()
    assert sent.timestamp != OLD_CREATE_TIME
    assert sent.timestamp >= before_ms - 60_000   # the broker's clock, not the producer's

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    got = []
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    consumer.close()
    (record,) = got
    assert (record.key, record.value, record.timestamp_type, record.timestamp) == \
        (b"k", b"v", 1, sent.timestamp)

    # ListOffsets by time on it answers from the brokers' time index, with the store time
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    for target in (OLD_CREATE_TIME, sent.timestamp):
        found = consumer.offsets_for_times({tp: target})[tp]
        assert (found.offset, found.timestamp) == (sent.offset, sent.timestamp)
    assert consumer.offsets_for_times({tp: sent.timestamp + 1})[tp] is None
    consumer.close()
