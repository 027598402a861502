"""Client quotas on the broker (docs/quotas.md): charge each Send, Pull and Pop to its caller's
rate buckets, answer the throttle time, and hold the requests of a caller that did not wait.

As Kafka does since KIP-219: the answer carries `throttle_time_ms` and a well-behaved client
(the SDK) waits that long before its next request to this broker; a client that does not is
held by the broker — its request waits here (an asyncio sleep: no thread, no other caller
waits) until its debt is paid, then runs. Concurrent requests reserve on arrival, so many
in-flight calls from one entity queue behind each other: accepted bytes over any window T are
at most rate × (T + burst_s) plus one request. A hold that would outlast the call's deadline
is refused with THROTTLED (nothing reserved, nothing done) instead of timing out.

The table comes from the config center (tidemq.configclient.quotas.QuotaFollower) and is
swapped in one assignment; a broker with no quotas pays one truth test per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from tidemq.common.errors import Throttled
from tidemq.common.quotas import (
    FETCH,
    PRODUCE,
    REQUEST,
    UNITS,
    Buckets,
    Limit,
    QuotaTable,
    RateBucket,
    current_caller,
    shown,
)

LABELS = ["quota", "entity"]
CHARGED = Counter("tidemq_broker_quota_charged_total",
                  "Bytes (producer_byte_rate, consumer_byte_rate) or requests (request_rate) "
                  "charged to a quota entity (user:<name> or client:<id>)", LABELS)
THROTTLE = Counter("tidemq_broker_quota_throttle_seconds_total",
                   "Throttle time answered to a quota entity (throttle_time_ms, summed)", LABELS)
THROTTLED_ANSWERS = Counter("tidemq_broker_quota_throttled_total",
                            "Answers that carried a throttle time > 0, by quota entity", LABELS)
HELD = Counter("tidemq_broker_quota_held_seconds_total",
               "Time the broker held requests of a quota entity that sent before its throttle "
               "time was over (a client ignoring the throttle)", LABELS)
REFUSED = Counter("tidemq_broker_quota_refused_total",
                  "Requests refused THROTTLED: the hold would have outlasted their deadline",
                  LABELS)
DEADLINE_MARGIN_S = 0.25  # a hold ends this long before the caller's deadline, or is refused
# An entity idle this long loses its bucket and its metric series (Kafka expires its quota
# sensors after an hour too): short-lived client ids under a default quota must not grow the
# broker's memory and its /metrics page without bound.
IDLE_EXPIRY_S = 3600.0
EXPIRY_CHECK_S = 60.0
COUNTERS = (CHARGED, THROTTLE, THROTTLED_ANSWERS, HELD, REFUSED)

_children: dict[tuple[Counter, str, str], Any] = {}  # labels() takes a lock and builds a key


def _count(counter: Counter, limit: Limit, amount: float = 1) -> None:
    key = (counter, limit.quota, limit.entity)
    child = _children.get(key)
    if child is None:
        if len(_children) > 40_000:   # many short-lived client ids: start over
            _children.clear()
        child = _children[key] = counter.labels(limit.quota, limit.entity)
    child.inc(amount)


def _first(pair: tuple[float, Limit]) -> float:
    return pair[0]


@dataclass(slots=True)
class Admission:
    """The buckets one admitted request was charged to (answer its throttle time from them)."""

    charged: list[tuple[Limit, RateBucket]]


class QuotaEnforcer:
    def __init__(self, burst_s: float = 1.0) -> None:
        self.table = QuotaTable()
        self.buckets = Buckets(burst_s)
        self._next_expiry = time.monotonic() + EXPIRY_CHECK_S
        _THROTTLED_NOW.enforcer = self

    async def admit(self, byte_quota: str, cost: int, deadline: float | None,
                    method: str = "") -> Admission | None:
        """Charge one request (and `cost` bytes to `byte_quota`, if known before it runs) to
        the caller; hold it while the caller owes. None: no quota applies to the caller."""
        table = self.table
        if not table:
            return None
        caller = current_caller()
        limits = table.limits(caller.user, caller.client_id)
        if not limits:
            return None
        charged = []
        for quota in (byte_quota, REQUEST):
            limit = limits.get(quota)
            if limit is not None:
                charged.append((limit, self.buckets.bucket(limit)))
        if not charged:
            return None
        now = time.monotonic()
        if now >= self._next_expiry:
            self.expire_idle(now)
        hold, holder = max(((bucket.wait(now), limit) for limit, bucket in charged), key=_first)
        if hold > 0 and deadline is not None and now + hold > deadline - DEADLINE_MARGIN_S:
            _count(REFUSED, holder)
            raise Throttled(
                f"{holder.entity} is over its {holder.quota} quota of {shown(holder.rate)} "
                f"{UNITS[holder.quota]} ({holder.source}): {method or 'the request'} would "
                f"wait {hold * 1000:.0f} ms, past its deadline; retry after that",
                retry_after_s=hold)
        for limit, bucket in charged:
            units = cost if limit.quota == byte_quota else 1
            if units:
                bucket.reserve(units, now)
                _count(CHARGED, limit, units)
        if hold > 0:
            _count(HELD, holder, hold)
            await asyncio.sleep(hold)
        return Admission(charged)

    def charge(self, admission: Admission | None, byte_quota: str, cost: int) -> None:
        """Charge bytes known only after the request ran (a pull's answer)."""
        if admission is None or not cost:
            return
        now = time.monotonic()
        for limit, bucket in admission.charged:
            if limit.quota == byte_quota:
                bucket.reserve(cost, now)
                _count(CHARGED, limit, cost)

    def throttle_ms(self, admission: Admission | None) -> int:
        """The throttle time to answer: until the caller's most indebted bucket allows its
        next request."""
        if admission is None:
            return 0
        now = time.monotonic()
        wait, limit = max(((bucket.wait(now), limit) for limit, bucket in admission.charged),
                          key=_first)
        if wait <= 0:
            return 0
        _count(THROTTLE, limit, wait)
        _count(THROTTLED_ANSWERS, limit)
        return math.ceil(wait * 1000)


    def expire_idle(self, now: float, idle_s: float = IDLE_EXPIRY_S) -> int:
        """Forget the buckets and metric series of entities idle for `idle_s`; how many."""
        self._next_expiry = now + EXPIRY_CHECK_S
        expired = self.buckets.expire(now - idle_s)
        for quota, entity in expired:
            for counter in COUNTERS:
                _children.pop((counter, quota, entity), None)
                with contextlib.suppress(KeyError):   # never counted there
                    counter.remove(quota, entity)
        return len(expired)


class _ThrottledNow(Collector):
    """tidemq_broker_quota_throttled_seconds, read from the buckets at each scrape."""

    enforcer: QuotaEnforcer | None = None

    def collect(self):
        family = GaugeMetricFamily(
            "tidemq_broker_quota_throttled_seconds", "Seconds a quota entity still owes "
            "beyond its burst (> 0: it is throttled now)", labels=LABELS)
        if self.enforcer is not None:
            for quota, entity, owed in self.enforcer.buckets.throttled():
                family.add_metric([quota, entity], owed)
        yield family


_THROTTLED_NOW = _ThrottledNow()
REGISTRY.register(_THROTTLED_NOW)

__all__ = ["FETCH", "PRODUCE", "Admission", "QuotaEnforcer"]
