"""Consumer-protocol payload codecs and the leader's per-topic assignment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.common.assignors import QueueRef
from tidemq.common.errors import InvalidArgument
from tidemq.common.protocol import (
    assign_subscriptions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

rows = st.lists(
    st.tuples(st.text(min_size=1, max_size=8), st.text(max_size=8), st.integers(0, 2**31)),
    max_size=20,
)


@given(rows)
def test_assignment_round_trips(queues):
    assert decode_assignment(encode_assignment(queues)) == sorted(set(queues))


@given(st.lists(st.text(min_size=1, max_size=10), max_size=10))
def test_subscription_round_trips(topics):
    assert decode_subscription(encode_subscription(topics)) == sorted(set(topics))


@pytest.mark.parametrize(
    "payload",
    [b"\xff", b"[]", b"{}", b'{"topics": [1]}', b'{"topics": [""]}', b"not json"],
)
def test_bad_subscription_is_invalid_argument(payload):
    with pytest.raises(InvalidArgument):
        decode_subscription(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b"{",
        b'{"queues": [["t", "b"]]}',
        b'{"queues": [["t", "b", -1]]}',
        b'{"queues": [["t", "b", true]]}',
        b'{"queues": 3}',
    ],
)
def test_bad_assignment_is_invalid_argument(payload):
    with pytest.raises(InvalidArgument):
        decode_assignment(payload)


def test_empty_assignment_means_no_queues():
    assert decode_assignment(b"") == []


def test_members_only_get_queues_of_topics_they_subscribed_to():
    route = {
        "orders": [QueueRef("broker-a", i) for i in range(4)],
        "audit": [QueueRef("broker-b", 0), QueueRef("broker-b", 1)],
    }
    subscriptions = {"m1": ["orders"], "m2": ["orders", "audit"], "m3": ["missing-topic"]}
    result = assign_subscriptions("averagely", route, subscriptions)
    assert result == {
        "m1": [("orders", "broker-a", 0), ("orders", "broker-a", 1)],
        "m2": [
            ("audit", "broker-b", 0),
            ("audit", "broker-b", 1),
            ("orders", "broker-a", 2),
            ("orders", "broker-a", 3),
        ],
        "m3": [],
    }


def test_sticky_leader_keeps_previous_queues_per_topic():
    route = {"orders": [QueueRef("broker-a", i) for i in range(4)]}
    previous = {"m2": [("orders", "broker-a", 0), ("orders", "broker-a", 1)]}
    result = assign_subscriptions("sticky", route, {"m1": ["orders"], "m2": ["orders"]}, previous)
    assert result["m2"] == [("orders", "broker-a", 0), ("orders", "broker-a", 1)]
