"""Client quotas: validation with precise sentences, Kafka's precedence, and the GCRA bucket's
bound on accepted work however requests arrive (docs/quotas.md)."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.quotas import QuotaEnforcer
from tidemq.common import errors
from tidemq.common.quotas import (
    CALLER,
    CLIENT,
    DEFAULT,
    FETCH,
    PRODUCE,
    REQUEST,
    USER,
    Buckets,
    Caller,
    Limit,
    QuotaEntry,
    QuotaError,
    QuotaTable,
    RateBucket,
    check_quota_write,
    check_value,
    parse_assignment,
)


@pytest.mark.parametrize(("quota", "value", "says"), [
    ("producer_byte_rate", 0, "from 1 to"),
    ("producer_byte_rate", -5, "from 1 to"),
    ("producer_byte_rate", 1.5, "whole number"),
    ("consumer_byte_rate", "fast", "must be a number of bytes/s, not 'fast'"),
    ("consumer_byte_rate", float("inf"), "finite"),
    ("request_rate", 0, "> 0"),
    ("request_rate", True, "must be a number"),
    ("producer_rate", 10, "unknown quota 'producer_rate': known are producer_byte_rate"),
])
def test_bad_values_are_refused_with_a_sentence_naming_them(quota, value, says):
    with pytest.raises(QuotaError) as refused:
        check_value(quota, value)
    assert says in str(refused.value)


def test_assignments_and_entries_round_trip():
    assert parse_assignment("producer_byte_rate=1_048_576") == (PRODUCE, 1048576.0)
    assert parse_assignment("request_rate=2.5") == (REQUEST, 2.5)
    with pytest.raises(QuotaError, match="not name=value"):
        parse_assignment("producer_byte_rate")
    entry = QuotaEntry(CLIENT, "svc", {PRODUCE: 1024.0, REQUEST: 2.5})
    assert QuotaEntry.from_key(entry.key, entry.to_json()) == entry
    assert entry.key == "/tidemq/quotas/clients/svc"


def test_the_config_center_refuses_bad_entries_before_writing():
    check_quota_write("/tidemq/topics/x", b"anything")  # not a quota key: not looked at
    check_quota_write("/tidemq/quotas/users/alice", b'{"producer_byte_rate": 1024}')
    for key, value, says in [
        ("/tidemq/quotas/users/alice", b'{"producer_byte_rate": 0}', "from 1 to"),
        ("/tidemq/quotas/users/alice", b"[1]", "JSON object"),
        ("/tidemq/quotas/users/alice", b"{", "not JSON"),
        ("/tidemq/quotas/groups/g", b"{}", "is not a quota key"),
        ("/tidemq/quotas/users/a/b", b"{}", "without '/'"),
    ]:
        with pytest.raises(errors.InvalidArgument) as refused:
            check_quota_write(key, value)
        assert refused.value.code == "INVALID_QUOTA" and says in str(refused.value), key


def test_precedence_is_kafkas_per_quota_and_defaults_apply_per_entity():
    table = QuotaTable([
        QuotaEntry(USER, "alice", {PRODUCE: 100.0}),
        QuotaEntry(USER, DEFAULT, {PRODUCE: 200.0, FETCH: 300.0}),
        QuotaEntry(CLIENT, "svc", {PRODUCE: 400.0, REQUEST: 5.0}),
        QuotaEntry(CLIENT, DEFAULT, {FETCH: 600.0}),
    ])
    alice = table.limits("alice", "svc")
    assert alice[PRODUCE] == Limit(PRODUCE, 100.0, "user:alice", "user:alice")
    assert alice[FETCH] == Limit(FETCH, 300.0, "user:alice", f"user:{DEFAULT}")
    assert alice[REQUEST] == Limit(REQUEST, 5.0, "client:svc", "client:svc")
    anonymous = table.limits("", "other")
    assert set(anonymous) == {FETCH}
    assert anonymous[FETCH].entity == "client:other"  # the default's bucket is its own
    assert QuotaTable().limits("bob", "x") == {}


def test_a_bucket_lets_the_burst_through_then_paces_at_its_rate():
    bucket = RateBucket(rate=1000.0, burst_s=1.0)
    now = 100.0
    for _ in range(10):  # 1000 bytes of burst: 10 requests of 100 pass at once
        assert bucket.wait(now) == 0
        bucket.reserve(100, now)
    bucket.reserve(100, now)
    assert bucket.wait(now) == pytest.approx(0.1)  # the 11th made the next one wait


@settings(max_examples=200, deadline=None)
@given(costs=st.lists(st.integers(1, 5000), min_size=1, max_size=200),
       gaps=st.lists(st.floats(0, 0.5), min_size=200, max_size=200))
def test_work_started_over_any_stretch_stays_within_rate_plus_burst(costs, gaps):
    """Whatever the arrival pattern, a request starting at its wait's end: work started in
    [0, t] is at most rate × t + burst + one request."""
    rate, burst_s = 10_000.0, 1.0
    bucket = RateBucket(rate, burst_s)
    now = started = 0.0
    total = 0
    for cost, gap in zip(costs, gaps, strict=False):
        now += gap
        start = now + bucket.wait(now)   # the broker holds it till then
        bucket.reserve(cost, now)
        started = max(started, start)
        total += cost
        assert total <= rate * started + rate * burst_s + cost + 1e-6


def test_buckets_follow_a_live_rate_change():
    buckets = Buckets(burst_s=1.0, clock=lambda: 0.0)
    bucket = buckets.bucket(Limit(PRODUCE, 100.0, "client:a", "client:a"))
    assert buckets.bucket(Limit(PRODUCE, 50.0, "client:a", "client:a")) is bucket
    assert bucket.rate == 50.0


def test_the_enforcer_holds_reserves_refuses_past_the_deadline_and_answers_throttle():
    enforcer = QuotaEnforcer(burst_s=0.1)
    enforcer.table = QuotaTable([QuotaEntry(CLIENT, "svc", {PRODUCE: 10_000.0})])

    async def scenario():
        CALLER.set(Caller("", "svc"))
        began = time.monotonic()
        first = await enforcer.admit(PRODUCE, 5_000, None)   # 0.5 s of debt, 0.1 s burst
        throttle = enforcer.throttle_ms(first)
        # 400 ms less the time the two calls took (a loaded machine may take more than 50)
        took_ms = (time.monotonic() - began) * 1000
        assert 400 - took_ms - 1 <= throttle <= 400
        with pytest.raises(errors.Throttled) as refused:  # would be held past its deadline
            await enforcer.admit(PRODUCE, 100, time.monotonic() + 0.1)
        assert refused.value.code == "THROTTLED" and "client:svc" in str(refused.value)
        assert "producer_byte_rate quota of 10000 bytes/s" in str(refused.value)
        CALLER.set(Caller("", "free"))
        assert await enforcer.admit(PRODUCE, 10**9, None) is None  # no quota: not charged

    asyncio.run(scenario())


def test_idle_entities_lose_their_bucket_and_metric_series():
    from prometheus_client import REGISTRY

    enforcer = QuotaEnforcer(burst_s=0.1)
    enforcer.table = QuotaTable([QuotaEntry(CLIENT, DEFAULT, {PRODUCE: 1_000_000.0})])

    def series(entity: str) -> float | None:
        return REGISTRY.get_sample_value("tidemq_broker_quota_charged_total",
                                         {"quota": PRODUCE, "entity": entity})

    async def charge(client_id: str):
        CALLER.set(Caller("", client_id))
        await enforcer.admit(PRODUCE, 100, None)

    asyncio.run(charge("short-lived-1"))
    asyncio.run(charge("short-lived-2"))
    assert series("client:short-lived-1") == 100
    now = time.monotonic()
    assert enforcer.expire_idle(now, idle_s=3600) == 0   # recent: kept
    assert enforcer.expire_idle(now + 7200, idle_s=3600) == 2
    assert series("client:short-lived-1") is None and series("client:short-lived-2") is None
    asyncio.run(charge("short-lived-1"))   # comes back: counted afresh
    assert series("client:short-lived-1") == 100
