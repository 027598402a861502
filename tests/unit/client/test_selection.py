"""Queue selection: round-robin, retry skipping, fault avoidance and ordered selectors."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.client.fault import LatencyFaultTolerance, not_available_duration
from tidemq.client.message import Message, MessageQueue
from tidemq.client.selector import (
    RoundRobinPicker,
    SelectByFunction,
    SelectByHash,
    SelectRandom,
    stable_hash,
)
from tidemq.common.errors import InvalidArgument, ServiceUnavailable

from tests.support.clock import FakeClock


def queues(brokers=("broker-a", "broker-b"), per_broker=4):
    return [MessageQueue("t", b, i) for b in brokers for i in range(per_broker)]


@pytest.mark.parametrize(("latency", "avoid_s"), [
    (0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 30), (999, 30), (1000, 60),
    (2000, 120), (3000, 180), (14999, 180), (15000, 600), (30000, 600),
])
def test_latency_table_matches_the_spec(latency, avoid_s):
    assert not_available_duration(latency) == avoid_s


def test_a_failure_isolates_a_broker_until_its_time_passes_or_it_succeeds():
    clock = FakeClock(1000.0)
    faults = LatencyFaultTolerance(clock)
    faults.update("broker-a", 0, failed=True)
    assert not faults.is_available("broker-a")
    assert faults.is_available("broker-b")
    clock.now += 599
    assert not faults.is_available("broker-a")
    clock.now += 1
    assert faults.is_available("broker-a")
    faults.update("broker-a", 700)
    assert not faults.is_available("broker-a")
    faults.update("broker-a", 5)  # a fast success clears the mark
    assert faults.is_available("broker-a")


def test_round_robin_spreads_evenly_over_every_writable_queue():
    picker = RoundRobinPicker(start=0)
    qs = queues()
    counts = Counter(picker.pick(qs) for _ in range(len(qs) * 25))
    assert set(counts) == set(qs)
    assert set(counts.values()) == {25}


def test_retry_skips_the_broker_that_just_failed():
    picker = RoundRobinPicker(start=0)
    qs = queues()
    for _ in range(20):
        assert picker.pick(qs, last_failed_broker="broker-a").broker_name == "broker-b"


def test_slow_and_breaker_open_brokers_are_avoided_while_another_is_left():
    clock = FakeClock(1000.0)
    faults = LatencyFaultTolerance(clock)
    faults.update("broker-a", 20000)
    picker = RoundRobinPicker(faults, start=0)
    assert {picker.pick(queues()).broker_name for _ in range(16)} == {"broker-b"}
    open_b = RoundRobinPicker(None, lambda name: name == "broker-b", start=0)
    assert {open_b.pick(queues()).broker_name for _ in range(16)} == {"broker-a"}


def test_when_every_broker_is_avoided_the_soonest_available_one_is_tried():
    clock = FakeClock(1000.0)
    faults = LatencyFaultTolerance(clock)
    faults.update("broker-a", 20000)   # 600 s
    faults.update("broker-b", 1200)    # 60 s
    picker = RoundRobinPicker(faults, start=0)
    assert {picker.pick(queues()).broker_name for _ in range(8)} == {"broker-b"}


def test_a_route_without_writable_queues_is_service_unavailable():
    with pytest.raises(ServiceUnavailable):
        RoundRobinPicker().pick([])


@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=30),
       st.integers(0, 1000), st.sampled_from(["", "a", "b", "c"]))
def test_the_picker_always_returns_one_of_the_offered_queues(brokers, start, failed):
    qs = [MessageQueue("t", b, i) for i, b in enumerate(brokers)]
    picked = RoundRobinPicker(LatencyFaultTolerance(), start=start).pick(qs, failed)
    assert picked in qs
    if any(q.broker_name != failed for q in qs):
        assert picked.broker_name != failed


@given(st.one_of(st.text(max_size=40), st.integers(), st.binary(max_size=40)))
def test_hash_selector_maps_the_same_arg_to_the_same_queue(arg):
    qs = queues()
    msg = Message("t", b"x")
    first = SelectByHash().select(qs, msg, arg)
    assert SelectByHash().select(list(qs), msg, arg) == first
    assert first == qs[stable_hash(arg) % len(qs)]


def test_random_and_function_selectors():
    qs = queues()
    import random

    assert SelectRandom(random.Random(7)).select(qs, Message("t", b"x"), None) in qs
    assert SelectByFunction(lambda q, m, arg: q[arg]).select(qs, Message("t", b"x"), 3) == qs[3]
    with pytest.raises(InvalidArgument):
        SelectByFunction(lambda q, m, arg: MessageQueue("t", "nope", 0)).select(
            qs, Message("t", b"x"), None)
