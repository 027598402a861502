"""OffsetCommit's metadata string: stored with the offset on the queue's broker and answered
by OffsetFetch, across client libraries, on a partition of each broker group (the topic has
one queue on each); a string longer than Kafka's offset.metadata.max.bytes (4096, counted as
Kafka counts: UTF-16 units) is refused OFFSET_METADATA_TOO_LARGE and changes nothing; a commit
without one clears it.

confluent-kafka sends a metadata string with its C terminator (its length + 1, as against
Kafka): kafka-python reads it back with the NUL, and 4095 characters are its longest."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka.errors import OffsetMetadataTooLargeError
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KpPartition

pytestmark = pytest.mark.slow

TOPIC, GROUP = "k-meta", "k-meta-group"


def _committed(consumer: Consumer) -> list[tuple[int, str | None]]:
    answer = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                timeout=20)
    assert not any(tp.error for tp in answer), answer
    return [(tp.offset, tp.metadata) for tp in answer]


def test_metadata_round_trips_across_libraries_and_is_bounded(bootstrap):
    confluent = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                          "enable.auto.commit": False})
    longest = "x" * 4095   # + confluent-kafka's NUL: 4096
    confluent.commit(offsets=[TopicPartition(TOPIC, 0, 5, metadata="cöde-5"),
                              TopicPartition(TOPIC, 1, 7, metadata=longest)],
                     asynchronous=False)
    assert _committed(confluent) == [(5, "cöde-5"), (7, longest)]

    # one past the bound: refused, the offset and its string stay what they were
    with pytest.raises(KafkaException) as refused:
        confluent.commit(offsets=[TopicPartition(TOPIC, 0, 9, metadata=longest + "y")],
                         asynchronous=False)
    assert refused.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
    assert _committed(confluent)[0] == (5, "cöde-5")

    # kafka-python reads what librdkafka committed (its NUL included), and commits its own
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    parts = [KpPartition(TOPIC, 0), KpPartition(TOPIC, 1)]
    assert [tuple(kp.committed(tp, metadata=True)[:2]) for tp in parts] == \
        [(5, "cöde-5\0"), (7, longest + "\0")]
    kp.commit({parts[0]: OffsetAndMetadata(6, "é" * 4096, -1),   # Kafka counts characters
               parts[1]: OffsetAndMetadata(8, "", -1)})          # no metadata: none kept
    with pytest.raises(OffsetMetadataTooLargeError):
        kp.commit({parts[1]: OffsetAndMetadata(9, "y" * 4097, -1)})
    assert tuple(kp.committed(parts[0], metadata=True)[:2]) == (6, "é" * 4096)
    assert tuple(kp.committed(parts[1], metadata=True)[:2]) == (8, "")
    kp.close()
    # Only partition 1 is read back through confluent-kafka: it takes a metadata string as a C
    # string, so one without its NUL (kafka-python's "é" * 4096 on partition 0) is read past
    # its end into whatever memory follows (a UnicodeDecodeError at byte 8192, once in CI).
    (answer,) = confluent.committed([TopicPartition(TOPIC, 1)], timeout=20)
    assert (answer.error, answer.offset, answer.metadata) == (None, 8, None)   # its ""
    confluent.close()
