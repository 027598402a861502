"""Client quotas at the HTTP gateway (docs/quotas.md): the same quotas as the brokers', read
live from the config center, charged per HTTP caller and answered `429 Too Many Requests`
with `Retry-After` (an HTTP client cannot be sent a throttle time to wait out, nor be held
without holding one of the worker's threads).

The caller is the signed user (when auth is on) and the `X-TideMQ-Client-Id` header, else the
peer's IP address as its client id; precedence as on the brokers (tidemq.common.quotas). A
produce (`POST /v1/topics/{t}/messages`) is charged its body's bytes to producer_byte_rate,
a fetch or pop its answer's bytes to consumer_byte_rate, every API request one to
request_rate.

Counts live in Redis (the `limits` library's sliding-window counter, over WINDOW_S seconds:
the rate × WINDOW_S may be spent in any window), so every gunicorn worker — and every gateway
on that Redis — charges the same counters. Without `--redis-url` each worker counts alone
(the limit then applies per worker). Redis failing never refuses a request: the check is
skipped and counted (tidemq_gateway_quota_unchecked_total), as the breakers fail open.
"""

from __future__ import annotations

import math

from flask import Flask, Response, g, request
from limits import RateLimitItemPerSecond
from limits.errors import StorageError
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter
from prometheus_client import Counter
from tidemq.common import errors, redisconn
from tidemq.common.logs import get_logger
from tidemq.common.quotas import FETCH, PRODUCE, REQUEST, UNITS, Limit, QuotaTable, shown

log = get_logger(__name__)

WINDOW_S = 10            # Kafka measures over 11 one-second samples; one 10 s sliding window here
CLIENT_ID_HEADER = "X-TideMQ-Client-Id"
USER = "tidemq_user"     # flask.g: the authenticated user's access key (auth.py)
# Labelled by the stored entry a limit came from (`client:<default>` for every caller under the
# default), not the caller: callers without a client id are counted by IP address, and a
# worker's multiprocess metrics cannot drop a series, so per-caller series would grow forever.
LABELS = ["quota", "source"]
THROTTLED = Counter("tidemq_gateway_quota_throttled_total",
                    "Requests answered 429 because the caller is over a quota", LABELS)
CHARGED = Counter("tidemq_gateway_quota_charged_total",
                  "Bytes or requests charged to a quota entity at the HTTP gateway", LABELS)
UNCHECKED = Counter("tidemq_gateway_quota_unchecked_total",
                    "Requests let through unchecked because the quota store (Redis) failed")


def storage_for(redis_url: str, password: str = "", ca_file: str = "") -> Storage:
    if not redis_url:
        return MemoryStorage()
    client = redisconn.connect(redis_url, socket_timeout=1.0,
                               **redisconn.auth_options(password, ca_file))
    return RedisStorage("redis://", connection_pool=client.connection_pool,
                        key_prefix="tidemq-quota", wrap_exceptions=True)


def kind_of(method: str, rule: str) -> str | None:
    """The byte quota a route charges: producer_byte_rate, consumer_byte_rate or None."""
    if rule.endswith("/messages") and rule.startswith("/v1/topics/"):
        return PRODUCE if method == "POST" else FETCH
    if rule.endswith("/pop"):
        return FETCH
    return None


class HttpQuotas:
    def __init__(self, storage: Storage) -> None:
        self.table = QuotaTable()   # replaced whole by the follower (backend.py)
        self.limiter = SlidingWindowCounterRateLimiter(storage)

    def limits(self, user: str, client_id: str) -> dict[str, Limit]:
        table = self.table
        return table.limits(user, client_id) if table else {}

    def admit(self, limits: dict[str, Limit], byte_quota: str | None, cost: int) -> None:
        """Charge one request (and `cost` bytes to a produce); Throttled when over."""
        for quota, units in ((REQUEST, 1), (byte_quota, cost)):
            limit = limits.get(quota) if quota else None
            if limit is None:
                continue
            if quota == FETCH:   # a fetch's bytes are charged after: refuse only when spent
                if self._remaining(limit) <= 0:
                    self._refuse(limit, 1)
                continue
            if units and not self._hit(limit, units):
                self._refuse(limit, units)

    def charge(self, limits: dict[str, Limit], quota: str, cost: int) -> None:
        """Charge bytes known once answered (a fetch): as much as is left when over."""
        limit = limits.get(quota)
        if limit is None or cost <= 0:
            return
        if not self._hit(limit, cost):
            remaining = self._remaining(limit)
            if remaining > 0:
                self._hit(limit, remaining)

    # -- the limiter

    @staticmethod
    def _item(limit: Limit) -> RateLimitItemPerSecond:
        return RateLimitItemPerSecond(max(1, int(limit.rate * WINDOW_S)), WINDOW_S)

    def _hit(self, limit: Limit, cost: int) -> bool:
        item = self._item(limit)
        try:
            # more than a whole window's worth is charged as a whole window
            hit = self.limiter.hit(item, limit.quota, limit.entity, cost=min(cost, item.amount))
        except StorageError as exc:
            UNCHECKED.inc()
            log.warning("quota store failed: request let through", error=str(exc.storage_error))
            return True
        if hit:
            CHARGED.labels(limit.quota, limit.source).inc(cost)
        return hit

    def _remaining(self, limit: Limit) -> int:
        try:
            return self.limiter.get_window_stats(self._item(limit), limit.quota,
                                                 limit.entity).remaining
        except StorageError:
            UNCHECKED.inc()
            return 1

    def _refuse(self, limit: Limit, cost: int) -> None:
        THROTTLED.labels(limit.quota, limit.source).inc()
        item = self._item(limit)
        remaining = max(0, self._remaining(limit))
        wait_s = min(WINDOW_S, max(1, math.ceil((min(cost, item.amount) - remaining)
                                                / limit.rate)))
        raise errors.Throttled(
            f"{limit.entity} is over its {limit.quota} quota of {shown(limit.rate)} "
            f"{UNITS[limit.quota]} ({limit.source}, over {WINDOW_S} s windows): retry after "
            f"{wait_s} s", retry_after_s=wait_s)


def install(app: Flask, quotas: HttpQuotas) -> None:
    """Charge API requests before their view runs and fetches after; after the auth hook."""

    @app.before_request
    def admit() -> None:
        rule = request.url_rule.rule if request.url_rule is not None else ""
        if not rule.startswith("/v1/"):
            return
        limits = quotas.limits(g.get(USER, ""), request.headers.get(CLIENT_ID_HEADER)
                               or request.remote_addr or "")
        if not limits:
            return
        g.tidemq_quota_limits = limits
        byte_quota = kind_of(request.method, rule)
        cost = (request.content_length or 0) if byte_quota == PRODUCE else 0
        quotas.admit(limits, byte_quota, cost)

    @app.after_request
    def charge_fetch(response: Response) -> Response:
        limits = g.get("tidemq_quota_limits")
        if (limits and response.status_code == 200 and request.url_rule is not None
                and kind_of(request.method, request.url_rule.rule) == FETCH):
            quotas.charge(limits, FETCH, response.calculate_content_length() or 0)
        return response
