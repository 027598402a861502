"""The Kafka consumer protocol decoder against kafka-python's own classes as the oracle."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from tidemq.client.kafka_assignment import decode_assignment, decode_subscription

topics = st.text(min_size=1, max_size=20)
partitions = st.lists(st.integers(0, 2**31 - 1), max_size=8)
topic_partitions = st.dictionaries(topics, partitions, max_size=5)
user_data = st.none() | st.binary(max_size=64)
versions = st.integers(0, 3)


@settings(max_examples=200, deadline=None)
@given(versions, topic_partitions, user_data)
def test_assignment_round_trip(version, assigned, data):
    raw = ConsumerProtocolAssignment(version=version, assigned_partitions=list(assigned.items()),
                                     user_data=data).encode()
    decoded = decode_assignment(raw)
    assert decoded is not None
    assert decoded.version == version
    assert decoded.partitions == assigned
    assert decoded.user_data_len == (None if data is None else len(data))


@settings(max_examples=200, deadline=None)
@given(versions, st.lists(topics, max_size=6), user_data, topic_partitions,
       st.integers(-1, 2**31 - 1), st.none() | st.text(max_size=10))
def test_subscription_round_trip(version, subscribed, data, owned, generation, rack):
    raw = ConsumerProtocolSubscription(
        version=version, topics=subscribed, user_data=data,
        owned_partitions=list(owned.items()), generation_id=generation,
        rack_id=rack).encode()
    decoded = decode_subscription(raw)
    assert decoded is not None
    assert decoded.version == version
    assert decoded.topics == subscribed
    assert decoded.user_data_len == (None if data is None else len(data))
    assert decoded.owned_partitions == (owned if version >= 1 else {})
    assert decoded.generation_id == (generation if version >= 2 else -1)
    assert decoded.rack_id == (rack if version >= 3 else None)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(raw):
    for decode in (decode_assignment, decode_subscription):
        decoded = decode(raw)
        assert decoded is None or decoded.version >= 0


@settings(max_examples=200, deadline=None)
@given(versions, topic_partitions, st.data())
def test_truncated_assignment_is_none(version, assigned, data):
    raw = ConsumerProtocolAssignment(version=version, assigned_partitions=list(assigned.items()),
                                     user_data=b"ud").encode()
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert decode_assignment(raw[:cut]) is None


def test_garbage_counts_and_lengths_are_none():
    assert decode_assignment(b"") is None
    assert decode_assignment(b"\xff\xff") is None                       # negative version
    assert decode_assignment(b"\x00\x00\x7f\xff\xff\xff") is None       # 2**31-1 topics
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe") is None  # not UTF-8
    assert decode_subscription(b"\x00\x01\xff\xff\xff\xfe") is None     # negative count
