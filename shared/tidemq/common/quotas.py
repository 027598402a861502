"""Client quotas: what they are, where they live, who they apply to, and the rate buckets.

Kafka's client quotas (KIP-13, KIP-55, KIP-124), for TideMQ's two identities of a caller: the
ACL user who signed the call (docs/security.md) and the client id the SDK sends in the
`tidemq-client-id` call metadata (Kafka's `client.id`). Three quotas:

| TideMQ name          | unit       | Kafka's name           |
|----------------------|------------|------------------------|
| `producer_byte_rate` | bytes/s    | `producer_byte_rate`   |
| `consumer_byte_rate` | bytes/s    | `consumer_byte_rate`   |
| `request_rate`       | requests/s | `request_percentage` (a share of handler-thread time; an
  asyncio broker has no per-request thread time to measure, so TideMQ counts requests)   |

They are stored in the config center as JSON, one key per entity, like the ACL
(tidemq.common.auth.acl): `/tidemq/quotas/users/<user>`, `/tidemq/quotas/clients/<client id>`,
with `<default>` as the name of the default of each kind (Kafka's `<default>`). A default
applies to each user (or client id) on its own: every client without an override gets its own
bucket of the default rate, not one bucket shared by all.

Which entity's quota applies, per quota (Kafka's precedence without the user+client pairs):
the signed user's own, the user default (signed calls only), the client id's own, the client
id default. So a quota given to a user follows every client that user runs.

Enforcement is a rate bucket per (quota, entity) — GCRA, a token bucket written as "the time
the entity's debt is paid": each request reserves its cost on arrival, so concurrent requests
queue behind each other instead of all passing on one look at a full bucket. `burst_s`
seconds of the rate may be spent at once. Costs are per request (bytes of a batch, one per
call), never per message.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

QUOTAS_PREFIX = "/tidemq/quotas/"
USERS_PREFIX = QUOTAS_PREFIX + "users/"
CLIENTS_PREFIX = QUOTAS_PREFIX + "clients/"
DEFAULT = "<default>"   # Kafka's name for the default entity of a kind
USER, CLIENT = "user", "client"
PREFIX_BY_KIND = {USER: USERS_PREFIX, CLIENT: CLIENTS_PREFIX}

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_rate"
QUOTA_NAMES = (PRODUCE, FETCH, REQUEST)
UNITS = {PRODUCE: "bytes/s", FETCH: "bytes/s", REQUEST: "requests/s"}
MAX_BYTE_RATE = 1 << 40       # 1 TiB/s: beyond any link; a bigger number is a typo
MAX_REQUEST_RATE = 1_000_000.0
MAX_NAME = 255

CLIENT_ID_METADATA = "tidemq-client-id"   # the call metadata carrying the client id
# A gateway's call made for one of its own clients: whose user it is charged to (the client id
# goes in CLIENT_ID_METADATA as any client's does). `user:<access key>`, or `anonymous` for an
# end client the gateway did not authenticate. Honoured only from a caller signed with the
# `forward-identity` grant (docs/quotas.md, "Clients of a gateway").
ON_BEHALF_OF_METADATA = "tidemq-on-behalf-of"
ANONYMOUS_END_USER = "anonymous"
FORWARD_IDENTITY = "forward-identity"     # the grant: ADMIN on cluster:forward-identity


class QuotaError(ValueError):
    """A quota name, value or entity that cannot be stored, with a sentence naming it."""


# -- validation --------------------------------------------------------------------------

def check_entity(kind: str, name: str) -> str:
    if kind not in PREFIX_BY_KIND:
        raise QuotaError(f"unknown quota entity kind {kind!r}: use 'user' or 'client'")
    if not name or "/" in name or name != name.strip() or len(name) > MAX_NAME:
        raise QuotaError(f"{kind} name {name!r} cannot hold a quota: it must be 1..{MAX_NAME} "
                         "characters without '/' or surrounding spaces (or <default>)")
    return name


def check_value(quota: str, value: object) -> float:
    """`value` as the number `quota` stores; QuotaError says what is wrong with it."""
    if quota not in QUOTA_NAMES:
        raise QuotaError(f"unknown quota {quota!r}: known are {', '.join(QUOTA_NAMES)}")
    if isinstance(value, bool):
        raise QuotaError(f"{quota} must be a number of {UNITS[quota]}, not {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip().replace("_", ""))
        except ValueError:
            raise QuotaError(f"{quota} must be a number of {UNITS[quota]}, not "
                             f"{value!r}") from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise QuotaError(f"{quota} must be a finite number of {UNITS[quota]}, not {value!r}")
    if quota == REQUEST:
        if not 0 < value <= MAX_REQUEST_RATE:
            raise QuotaError(f"{quota} must be > 0 and <= {MAX_REQUEST_RATE:g} requests/s, "
                             f"not {value:g}")
        return float(value)
    if value != int(value) or not 1 <= value <= MAX_BYTE_RATE:
        raise QuotaError(f"{quota} must be a whole number of bytes/s from 1 to "
                         f"{MAX_BYTE_RATE} (1 TiB/s), not {value:g}")
    return float(int(value))


def parse_assignment(text: str) -> tuple[str, float]:
    """`name=value` as the CLI takes it (`producer_byte_rate=1048576`)."""
    name, sep, value = text.partition("=")
    if not sep:
        raise QuotaError(f"{text!r} is not name=value (e.g. producer_byte_rate=1048576)")
    return name.strip(), check_value(name.strip(), value)


@dataclass(frozen=True)
class QuotaEntry:
    """The quotas one entity has (only the ones set)."""

    kind: str
    name: str
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return PREFIX_BY_KIND[self.kind] + self.name

    def to_json(self) -> bytes:
        return json.dumps({q: _plain(v) for q, v in sorted(self.values.items())}).encode()

    @classmethod
    def from_key(cls, key: str, value: bytes) -> QuotaEntry:
        for kind, prefix in PREFIX_BY_KIND.items():
            if key.startswith(prefix):
                name = check_entity(kind, key[len(prefix):])
                break
        else:
            raise QuotaError(f"{key!r} is not a quota key ({USERS_PREFIX}<user> or "
                             f"{CLIENTS_PREFIX}<client id>)")
        try:
            document = json.loads(value)
        except ValueError as exc:
            raise QuotaError(f"{key}: not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise QuotaError(f"{key}: a JSON object of quotas is expected")
        return cls(kind, name, {q: check_value(q, v) for q, v in document.items()})


def check_quota_write(key: str, value: bytes) -> None:
    """Refuse, before it is written, a quota entry no broker would take (the config center's
    Put): InvalidArgument, code INVALID_QUOTA. Keys outside /tidemq/quotas/ are not looked at."""
    if not key.startswith(QUOTAS_PREFIX):
        return
    from tidemq.common.errors import InvalidArgument

    try:
        QuotaEntry.from_key(key, value)
    except QuotaError as exc:
        raise InvalidArgument(f"{exc}; nothing was written", code="INVALID_QUOTA") from None


def _plain(value: float) -> int | float:
    return int(value) if value == int(value) else value


def shown(value: float) -> str:
    """A quota value as people read it: 1048576, 2.5 (never 1.04858e+06)."""
    return str(_plain(value))


# -- resolution ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Limit:
    """One quota that applies to a caller: its rate and the entity whose bucket it fills
    (`user:alice`, `client:orders-svc`), and the stored entity it came from."""

    quota: str
    rate: float
    entity: str
    source: str


class QuotaTable:
    """All quotas, read from the config center; `limits` answers for one caller."""

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        self.entries = {(e.kind, e.name): e for e in entries}
        self._resolved: dict[tuple[str, str], dict[str, Limit]] = {}

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def from_entries(cls, kvs: Mapping[str, bytes]) -> tuple[QuotaTable, list[str]]:
        entries, problems = [], []
        for key, value in kvs.items():
            try:
                entries.append(QuotaEntry.from_key(key, value))
            except QuotaError as exc:
                problems.append(str(exc))
        return cls(entries), problems

    def limits(self, user: str, client_id: str) -> dict[str, Limit]:
        """{quota: Limit} for a call signed by `user` ('' = unsigned) from `client_id`."""
        cached = self._resolved.get((user, client_id))
        if cached is not None:
            return cached
        candidates = []
        if user:
            candidates += [(USER, user, user), (USER, DEFAULT, user)]
        candidates += [(CLIENT, client_id, client_id), (CLIENT, DEFAULT, client_id)]
        found: dict[str, Limit] = {}
        for kind, stored, concrete in candidates:
            entry = self.entries.get((kind, stored))
            if entry is None:
                continue
            for quota, rate in entry.values.items():
                if quota not in found:
                    found[quota] = Limit(quota, rate, f"{kind}:{concrete}", f"{kind}:{stored}")
        if len(self._resolved) > 10_000:   # many short-lived client ids: start over
            self._resolved.clear()
        self._resolved[(user, client_id)] = found
        return found


# -- the caller of the current call -------------------------------------------------------

@dataclass(frozen=True)
class Caller:
    user: str = ""        # the ACL user who signed the call, '' when unsigned
    client_id: str = ""


ANONYMOUS = Caller()
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("tidemq_caller",
                                                               default=ANONYMOUS)


def current_caller() -> Caller:
    """Who made the call being served (set by the call pipeline, tidemq.common.pipeline)."""
    return CALLER.get()


def end_user_of(on_behalf_of: str) -> str:
    """The user a `tidemq-on-behalf-of` value names ('' for `anonymous`); ValueError with a
    sentence for any other text."""
    if on_behalf_of == ANONYMOUS_END_USER:
        return ""
    kind, sep, name = on_behalf_of.partition(":")
    if kind != USER or not sep or not name:
        raise ValueError(f"{ON_BEHALF_OF_METADATA} must be 'user:<access key>' or "
                         f"'{ANONYMOUS_END_USER}', not {on_behalf_of[:64]!r}")
    return name


# -- a gateway's end client ---------------------------------------------------------------

# printable ASCII but '%': what a gRPC metadata value may hold, '%' kept for the escapes
_METADATA_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "%")


def metadata_client_id(client_id: str) -> str:
    """An end client's id as call metadata can carry it: printable ASCII as it is, other
    characters (and '%') percent-encoded (a Kafka client.id may be any string), at most
    MAX_NAME characters (the longest name that can hold a quota of its own)."""
    if client_id.isascii() and client_id.isprintable() and "%" not in client_id:
        return client_id[:MAX_NAME]
    return quote(client_id, safe=_METADATA_SAFE)[:MAX_NAME]


class EndClient:
    """The client of a gateway that a broker call is made for (its Kafka client.id and SASL
    user, its RocketMQ client id and ACL user): the call is charged to its quotas, not the
    gateway's, and the broker's throttle time is kept here for the gateway to pass on or wait
    out instead of muting the gateway's shared channel (tidemq.common.channel.broker)."""

    __slots__ = ("_lock", "client_id", "metadata", "throttle_ms", "user")

    def __init__(self, client_id: str, user: str = "") -> None:
        self.client_id = metadata_client_id(client_id)
        self.user = user            # '' : the gateway did not authenticate it
        self.throttle_ms = 0        # the longest throttle time a broker answered its calls
        self._lock = threading.Lock()
        self.metadata = {ON_BEHALF_OF_METADATA: f"{USER}:{user}" if user
                         else ANONYMOUS_END_USER}
        if self.client_id:
            self.metadata[CLIENT_ID_METADATA] = self.client_id

    @property
    def key(self) -> tuple[str, str]:
        """Who the broker charges: (user, client id)."""
        return self.user, self.client_id

    def note_throttle(self, throttle_ms: int) -> None:
        with self._lock:   # the partitions of one Kafka request are sent from several threads
            self.throttle_ms = max(self.throttle_ms, throttle_ms)

    def __repr__(self) -> str:
        return f"EndClient(client_id={self.client_id!r}, user={self.user!r})"


END_CLIENT: contextvars.ContextVar[EndClient | None] = contextvars.ContextVar(
    "tidemq_end_client", default=None)


@contextlib.contextmanager
def on_behalf_of(client_id: str, user: str = "") -> Iterator[EndClient]:
    """Broker calls made inside (in this context, and in contexts copied from it: a thread
    pool run through `contextvars.copy_context()`) are made for this end client.

    >>> with on_behalf_of("orders-svc", user="alice") as end:  # doctest: +SKIP
    ...     producer.send_batch(messages, queue=mq)
    ...     end.throttle_ms     # what to answer the end client (Kafka's throttle_time_ms)
    """
    end = EndClient(client_id, user)
    token = END_CLIENT.set(end)
    try:
        yield end
    finally:
        END_CLIENT.reset(token)


# -- rate buckets --------------------------------------------------------------------------

class RateBucket:
    """GCRA: `ready_at` is when the entity's reserved work is paid for at `rate`; a request
    may start once `ready_at - burst_s` has passed."""

    __slots__ = ("burst_s", "rate", "ready_at")

    def __init__(self, rate: float, burst_s: float) -> None:
        self.rate = rate
        self.burst_s = burst_s
        self.ready_at = 0.0

    def wait(self, now: float) -> float:
        """Seconds until a request may start (0: now)."""
        return max(0.0, self.ready_at - self.burst_s - now)

    def reserve(self, cost: float, now: float) -> None:
        self.ready_at = max(self.ready_at, now) + cost / self.rate


class Buckets:
    """The rate buckets of every (quota, entity) with a limit, made on first use."""

    def __init__(self, burst_s: float = 1.0, clock=time.monotonic) -> None:
        self.burst_s = burst_s
        self.clock = clock
        self._buckets: dict[tuple[str, str], RateBucket] = {}

    def bucket(self, limit: Limit) -> RateBucket:
        key = (limit.quota, limit.entity)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 10_000:
                self._prune()
            bucket = self._buckets[key] = RateBucket(limit.rate, self.burst_s)
        elif bucket.rate != limit.rate:   # changed live: the debt already owed stays owed
            bucket.rate = limit.rate
        return bucket

    def _prune(self) -> None:
        self.expire(self.clock())

    def expire(self, before: float) -> list[tuple[str, str]]:
        """Drop the buckets whose debt was paid before `before` (monotonic): an entity
        that comes back starts with a full burst, as it would have anyway. The keys dropped."""
        expired = [k for k, b in list(self._buckets.items()) if b.ready_at < before]
        for key in expired:
            self._buckets.pop(key, None)
        return expired

    def throttled(self) -> list[tuple[str, str, float]]:
        """(quota, entity, seconds still owed beyond the burst) of every throttled entity."""
        now = self.clock()
        return sorted((quota, entity, b.wait(now))
                      for (quota, entity), b in list(self._buckets.items()) if b.wait(now) > 0)
