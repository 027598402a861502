"""kafka-python 3.0.12, unmodified, against gateway-kafka: records round trip byte for byte,
offsets, a consumer group of two members, and interop with the native SDK both ways."""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from tidemq.client import Message, Producer, PullConsumer

pytestmark = pytest.mark.slow

EDGE_RECORDS = [  # (key, value, headers): null / empty keys and values, binary keys, duplicates
    (None, b"no key", []),
    (b"", b"empty key", []),
    (b"k", None, [("h", b"null value")]),
    (b"k", b"", [("h", b"empty value")]),
    (bytes(range(256)), b"binary key", [("dup", b"1"), ("dup", b"2"), ("dup", b"")]),
    (b"big", bytes(i % 251 for i in range(1024 * 1024)), [("size", b"1MiB")]),
    ("ключ".encode(), "значение".encode(), [("utf8", "да".encode())]),
]


def _producer(bootstrap: str, **config) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, max_request_size=4 * 1024 * 1024,
                         request_timeout_ms=15000, **config)


def _read(bootstrap: str, topic: str, partitions: list[int], count: int,
          timeout_s: float = 20.0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_bytes=8 * 1024 * 1024,
                             max_partition_fetch_bytes=4 * 1024 * 1024)
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    found: list = []
    deadline = time.monotonic() + timeout_s
    while len(found) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            found.extend(batch)
    consumer.close()
    return found


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_edge_records_round_trip_byte_for_byte(bootstrap, compression):
    topic = "k-roundtrip"
    producer = _producer(bootstrap, compression_type=compression)
    partition = 0 if compression in (None, "snappy", "zstd") else 1
    before = _end_offsets(bootstrap, topic)[partition]
    sent = [producer.send(topic, key=k, value=v, headers=h, partition=partition)
            for k, v, h in EDGE_RECORDS]
    producer.flush()
    offsets = [f.get(timeout=15).offset for f in sent]
    producer.close()
    assert offsets == list(range(before, before + len(EDGE_RECORDS)))
    got = [r for r in _read(bootstrap, topic, [partition], before + len(EDGE_RECORDS))
           if r.offset >= before]
    assert [(r.key, r.value, r.headers) for r in got] == \
        [(k, v, h) for k, v, h in EDGE_RECORDS]
    assert [r.offset for r in got] == offsets
    assert all(r.timestamp_type == 0 and r.timestamp > 0 for r in got)


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    ends = consumer.end_offsets(partitions)
    consumer.close()
    return {tp.partition: offset for tp, offset in ends.items()}


def test_list_offsets_earliest_and_latest(bootstrap):
    topic = "k-offsets"
    producer = _producer(bootstrap)
    for i in range(5):
        producer.send(topic, value=b"m%d" % i, partition=1)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert consumer.partitions_for_topic(topic) == {0, 1}   # 1 queue on each of 2 groups
    assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
    assert consumer.end_offsets([tp0, tp1]) == {tp0: 0, tp1: 5}
    consumer.assign([tp1])
    consumer.seek_to_end(tp1)
    assert consumer.position(tp1) == 5
    consumer.close()


def test_metadata_names_unknown_topics(bootstrap):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    assert not consumer.partitions_for_topic("k-no-such-topic")   # UNKNOWN_TOPIC_OR_PARTITION
    assert {"k-roundtrip", "k-group"} <= consumer.topics()
    consumer.close()


def test_two_members_share_partitions_and_commit(bootstrap):
    topic, group = "k-group", "k-group-members"   # 2 queues x 2 groups = 4 partitions
    producer = _producer(bootstrap)
    for i in range(40):
        producer.send(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
    producer.flush()
    producer.close()

    seen: dict[str, list] = {"a": [], "b": []}
    assigned: dict[str, set] = {"a": set(), "b": set()}
    stop = threading.Event()

    def member(name: str) -> None:
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=10000, heartbeat_interval_ms=1000)
        try:
            while not stop.is_set():
                for batch in consumer.poll(timeout_ms=300).values():
                    seen[name].extend((r.partition, r.offset) for r in batch)
                    consumer.commit()
                assigned[name] = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(n,), daemon=True) for n in "ab"]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if assigned["a"] and assigned["b"] and \
                len(set(seen["a"]) | set(seen["b"])) >= 40:
            break
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert assigned["a"] and assigned["b"] and not assigned["a"] & assigned["b"]
    assert assigned["a"] | assigned["b"] == {0, 1, 2, 3}
    assert {offset for offset in set(seen["a"]) | set(seen["b"])} == \
        {(p, o) for p in range(4) for o in range(10)}

    # the group's commits: a new member of the group starts where they left off
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in range(4)]
    assert {tp.partition: consumer.committed(tp) for tp in partitions} == \
        dict.fromkeys(range(4), 10)
    consumer.close()


def test_kafka_record_read_by_native_consumer(kafka_cluster, bootstrap):
    topic = "k-interop"
    producer = _producer(bootstrap)
    producer.send(topic, key=b"order-7", value=b"from kafka", headers=[("region", b"eu")],
                  partition=0).get(timeout=15)
    producer.close()
    with PullConsumer(kafka_cluster.namesrv_addrs, consumer_group="k-native-reader") as native:
        mq = sorted(native.fetch_queues(topic))[0]   # partition 0 = the first queue
        messages = native.pull(mq, 0, max_messages=8).messages
    assert [m.body for m in messages] == [b"from kafka"]
    assert messages[0].keys == ["order-7"]
    assert messages[0].properties["KAFKA_KEY"] == "b3JkZXItNw=="
    assert "KAFKA_HEADERS" in messages[0].properties


def test_native_message_read_by_kafka_python(kafka_cluster, bootstrap):
    topic = "k-native"
    with Producer(kafka_cluster.namesrv_addrs) as native:
        result = native.send(Message(topic, b"from tidemq", keys=["n-1"],
                                     properties={"region": "eu"}))
    partition = ["broker-a", "broker-b"].index(result.broker_name)   # one queue on each
    got = _read(bootstrap, topic, [partition], 1)
    assert [(r.key, r.value) for r in got] == [(b"n-1", b"from tidemq")]
    assert ("region", b"eu") in got[0].headers


def test_admin_creates_and_deletes_topics(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("k-created", num_partitions=4, replication_factor=1)])
        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        deadline = time.monotonic() + 30
        while consumer.partitions_for_topic("k-created") != {0, 1, 2, 3}:
            assert time.monotonic() < deadline, "the created topic never showed 4 partitions"
            consumer._client.cluster.request_update()
            consumer.poll(timeout_ms=200)
            time.sleep(0.3)
        consumer.close()
        admin.delete_topics(["k-created"])
    finally:
        admin.close()


def test_offsets_for_times_answers_the_first_record_at_or_after_by_create_time(bootstrap):
    """Kafka's ListOffsets by time: the earliest offset whose (Create)Time is >= the target,
    with that record's timestamp; a target after every record answers none."""
    topic, now = "k-time", int(time.time() * 1000)
    producer = _producer(bootstrap)
    early = producer.send(topic, value=b"early", partition=0, timestamp_ms=now - 2000).get(15)
    late = producer.send(topic, value=b"late", partition=0, timestamp_ms=now).get(15)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = TopicPartition(topic, 0)
    found = consumer.offsets_for_times({tp: now - 2000})[tp]
    assert (found.offset, found.timestamp) == (early.offset, now - 2000)
    # both were stored after now - 1000; the first created at or after it is the late one
    found = consumer.offsets_for_times({tp: now - 1000})[tp]
    assert (found.offset, found.timestamp) == (late.offset, now)
    assert consumer.offsets_for_times({tp: now + 3_600_000})[tp] is None
    consumer.close()


def test_topic_settings_through_create_topics_and_describe_configs(bootstrap):
    """CreateTopics' configs become the topic's settings (docs/topics.md); DescribeConfigs
    answers each with its source; IncrementalAlterConfigs sets and deletes them; a bad one is
    INVALID_CONFIG naming it."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    from kafka.errors import InvalidConfigurationError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("k-settings", num_partitions=2, replication_factor=1,
                                      topic_configs={"retention.ms": "60000",
                                                     "cleanup.policy": "compact"})])
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "k-settings")], config_filter="all")
        entries = next(iter(next(iter(described.values())).values()))
        assert entries["retention.ms"]["value"] == "60000"
        assert entries["cleanup.policy"]["value"] == "compact"
        assert entries["delete.retention.ms"]["value"] == "86400000"
        altered = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, "k-settings",
            configs={"retention.ms": "120000", "cleanup.policy": (AlterConfigOp.DELETE, None)})])
        assert all(not getattr(e, "errno", 0) for by_name in altered.values()
                   for e in by_name.values()), altered
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "k-settings")], config_filter="all")
        entries = next(iter(next(iter(described.values())).values()))
        assert entries["retention.ms"]["value"] == "120000"
        assert entries["cleanup.policy"]["value"] == "delete"     # back to the default
        refused = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, "k-settings", configs={"retention.ms": "soon"})],
            raise_on_unknown=False)
        assert "retention.ms" in str(refused), refused
        with pytest.raises(InvalidConfigurationError, match="retention.ms"):
            admin.create_topics([NewTopic("k-settings-bad", num_partitions=1,
                                          replication_factor=1,
                                          topic_configs={"retention.ms": "soon"})])
        admin.delete_topics(["k-settings"])
    finally:
        admin.close()


def test_a_compacted_topic_keeps_the_latest_value_per_binary_key(bootstrap):
    """cleanup.policy=compact through Kafka: binary keys, a null value as the tombstone; a
    consumer reading from the beginning ends up with the latest value of each live key, at
    its original offset, reading past the gaps (the brokers compact every 10 s)."""
    from tests.support.processes import wait_until

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("k-compacted", num_partitions=1, replication_factor=1,
                                      topic_configs={"cleanup.policy": "compact",
                                                     "delete.retention.ms": "0"})])
    finally:
        admin.close()
    producer = _producer(bootstrap)
    keys = [bytes([0, k, 255]) for k in range(5)]        # not UTF-8: only KAFKA_KEY has them
    sent = {}
    for n in range(50):
        key = keys[n % 5]
        value = None if (n % 5 == 4 and n >= 45) else f"v{n}".encode()
        sent[n] = (key, value, producer.send("k-compacted", key=key, value=value, partition=0))
    producer.flush()
    offsets = {n: future.get(timeout=15).offset for n, (_, _, future) in sent.items()}
    producer.close()
    expected = [(keys[k], f"v{45 + k}".encode(), offsets[45 + k]) for k in range(4)]

    def compacted():
        got = _read(bootstrap, "k-compacted", [0], 50, timeout_s=3)
        return [(r.key, r.value, r.offset) for r in got] == expected
    wait_until(compacted, 90, interval=0.5, message="the topic compacted as Kafka would")


def test_dotted_topic_names_are_served_and_dots_alone_refused(bootstrap):
    """Kafka topic names take `.` (`orders.v1`), and refuse `.` and `..`: so does TideMQ now
    (librdkafka's 0114 names its topic `...cpp`)."""
    from kafka.errors import InvalidTopicError

    topic = "k.dotted.v1"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        for name in (".", ".."):
            with pytest.raises(InvalidTopicError):
                admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    producer = _producer(bootstrap)   # CreateTopics answered once the brokers route it
    sent = producer.send(topic, key=b"k", value=b"dotted", partition=0).get(15)
    producer.close()
    got = _read(bootstrap, topic, [0], 1)
    assert [(r.offset, r.key, r.value) for r in got] == [(sent.offset, b"k", b"dotted")]
