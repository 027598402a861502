"""gRPC client plumbing: pooled channels, a deadline on every call, a breaker per endpoint.

gRPC only: calls to a broker go through the broker channel (tidemq.common.channel), which
builds on RpcClient and alone chooses between gRPC and the wire protocol.

Why a breaker per endpoint: when a broker dies, callers should fail in microseconds instead of
each waiting for a connect timeout, and producers should steer traffic elsewhere
(`is_endpoint_open`). Only transport failures (UNAVAILABLE, DEADLINE_EXCEEDED) count against
the breaker; an application answer such as TOPIC_NOT_EXIST proves the endpoint is healthy.
Retries happen only for calls the caller declares idempotent, and never past the deadline.

Security (docs/security.md): channels use TLS when a CA file is configured and sign every call
(RocketMQ 5's HMAC, tidemq.common.auth.signature) when credentials are; both come from
`configure_client_security` (a service's settings) or else the TIDEMQ_ACCESS_KEY,
TIDEMQ_SECRET_KEY and TIDEMQ_TLS_CA_FILE environment variables (SDK and CLI).

pybreaker is imported with the first breaker, not with this module: where redis-py is installed
(the gateway and config center need it) pybreaker imports it for its Redis-backed storage, and
redis-py's package imports its asyncio client: 0.25-0.4 s of CPU from cached bytecode (about
1 s compiling) that a process which only serves, and never calls another (a name server
without a config center, a trace collector), should not pay for the option lists and security
settings it takes from here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import grpc
from tidemq.common import errors, tls
from tidemq.common.auth.signature import Credentials, signed_metadata

if TYPE_CHECKING:
    import pybreaker

GRPC_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # Fail fast on a dead endpoint rather than waiting out long reconnect backoffs.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    # Large pull replies in one HTTP/2 frame instead of 16 KiB ones: fewer frames to build
    # and parse per reply, which end-to-end consumption feels (docs/architecture.md).
    ("grpc.http2.max_frame_size", 1 << 20),
]

# What a server accepts of its clients' keepalive pings: at least as often as GRPC_OPTIONS sends
# them. gRPC's default (one ping per 5 min without data, two strikes) answers a client that pings
# every 30 s over a quiet long poll with GOAWAY "too_many_pings": its calls fail
# SERVICE_UNAVAILABLE. (Clients ping only while a call is open, the default.)
# Pings closer together than that still happen (gRPC's own BDP pings, timers that fire late
# on a loaded host): a CI run saw a topic creation through the gateway fail "Too many pings".
# The clients are this system's own, so a ping is never a reason to end their connection.
SERVER_GRPC_OPTIONS = [
    *GRPC_OPTIONS,
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),  # 0: no GOAWAY for pings, however many
]


@dataclass(frozen=True)
class BreakerSettings:
    fail_max: int = 5            # consecutive transport failures that open the breaker
    reset_timeout_s: float = 10  # how long it stays open before a trial call
    redis_url: str = ""          # share state across worker processes fronting one endpoint
    redis_password: str = field(default="", repr=False)  # AUTH (from a file, never the URL)
    redis_ca_file: str = ""      # verifies a rediss:// server's certificate


@dataclass(frozen=True)
class ClientSecurity:
    """How this process's channels authenticate: sign with `credentials`, verify servers
    against `ca_file` (PEM; '' = plaintext). `server_name` overrides the name checked in
    server certificates (when addresses are IPs the certificates do not list). `cert_file` /
    `key_file`: the certificate shown to servers that require one (mutual TLS)."""

    credentials: Credentials | None = None
    ca_file: str = ""
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def from_env(cls) -> ClientSecurity:
        access_key = os.environ.get("TIDEMQ_ACCESS_KEY", "")
        secret_key = os.environ.get("TIDEMQ_SECRET_KEY", "")
        return cls(Credentials(access_key, secret_key) if access_key and secret_key else None,
                   os.environ.get("TIDEMQ_TLS_CA_FILE", ""),
                   os.environ.get("TIDEMQ_TLS_SERVER_NAME", ""),
                   os.environ.get("TIDEMQ_TLS_CERT_FILE", ""),
                   os.environ.get("TIDEMQ_TLS_KEY_FILE", ""))

    @classmethod
    def of_service(cls, settings) -> ClientSecurity | None:
        """A service's own channels (a ServiceSettings): its credentials and CA, and its own
        certificate for servers that require one; None when it has neither key nor CA."""
        credentials = Credentials(settings.access_key, settings.secret_key)
        if not (credentials or settings.tls_ca_file):
            return None
        return cls(credentials or None, settings.tls_ca_file, settings.tls_server_name,
                   settings.tls_cert_file, settings.tls_key_file)


_security: ClientSecurity | None = None


def client_security() -> ClientSecurity:
    global _security
    if _security is None:
        _security = ClientSecurity.from_env()
    return _security


def configure_client_security(security: ClientSecurity) -> None:
    """Use `security` for every channel opened from now on. Clients made before keep their
    channels (pooled per address and security), so nothing in flight breaks."""
    global _security
    _security = security


class _Signer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the `authorization` / `x-mq-date-time` metadata to every call."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def _signed(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        metadata = [*(details.metadata or ()), *signed_metadata(self._credentials)]
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else \
            _CallDetails(details.method, details.timeout, metadata, details.credentials,
                         details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._signed(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._signed(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._signed(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._signed(details), request_iterator)


@dataclass(frozen=True)
class _CallDetails(grpc.ClientCallDetails):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


def open_channel(addr: str, security: ClientSecurity | None = None,
                 options: list | None = None) -> grpc.Channel:
    """A channel to `addr` with this process's TLS and signing (or `security`'s)."""
    security = security or client_security()
    options = list(options if options is not None else GRPC_OPTIONS)
    if security.ca_file:
        if security.server_name:
            options.append(("grpc.ssl_target_name_override", security.server_name))
        channel = grpc.secure_channel(addr, tls.channel_credentials(
            security.ca_file, security.cert_file, security.key_file), options)
    else:
        channel = grpc.insecure_channel(addr, options=options)
    if security.credentials:
        channel = grpc.intercept_channel(channel, _Signer(security.credentials))
    return channel


def with_tls_hint(exc: errors.TideMQError) -> errors.TideMQError:
    """A plaintext client against a TLS endpoint, or a client without a certificate against one
    that requires it (mutual TLS), sees only "Socket closed"; a TLS client against a plaintext
    one a handshake failure: say which setting is probably wrong."""
    if not isinstance(exc, errors.ServiceUnavailable):
        return exc
    text = exc.message.lower()
    if "socket closed" in text:
        exc.message += ("; if the endpoint serves TLS, give this client its CA "
                        "(TIDEMQ_TLS_CA_FILE or the tls_ca_file setting), and if it requires "
                        "client certificates one its CA signed (TIDEMQ_TLS_CERT_FILE and "
                        "TIDEMQ_TLS_KEY_FILE, or tls_cert_file and tls_key_file)")
    elif "ssl" in text or "handshake" in text or "certificate" in text:
        exc.message += ("; the TLS handshake failed: is the endpoint plaintext, or its "
                        "certificate not signed by the CA in tls_ca_file?")
    exc.args = (exc.message,)
    return exc


class ChannelPool:
    """One channel per address, shared by every stub in the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[tuple[str, ClientSecurity], grpc.Channel] = {}

    def get(self, addr: str) -> grpc.Channel:
        key = (addr, client_security())
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                channel = open_channel(addr, key[1])
                self._channels[key] = channel
            return channel

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()


default_pool = ChannelPool()

_breakers: dict[str, pybreaker.CircuitBreaker] = {}
_breakers_lock = threading.Lock()
_retuned: dict[str, float] = {}  # thresholds set by retune_breakers: win over BreakerSettings


def _is_not_transport_failure(exc: BaseException) -> bool:
    return not isinstance(exc, errors.ServiceUnavailable | errors.DeadlineExceeded)


def breaker_for(addr: str, settings: BreakerSettings) -> pybreaker.CircuitBreaker:
    import pybreaker

    with _breakers_lock:
        breaker = _breakers.get(addr)
        if breaker is None:
            storage = None
            if settings.redis_url:
                from tidemq.common import redisconn  # redis-py: the gateway ships it

                storage = pybreaker.CircuitRedisStorage(
                    pybreaker.STATE_CLOSED,
                    redisconn.connect(settings.redis_url, socket_timeout=1.0,
                                      **redisconn.auth_options(settings.redis_password,
                                                               settings.redis_ca_file)),
                    namespace=f"tidemq:breaker:{addr}",
                )
            kwargs: dict[str, Any] = {"state_storage": storage} if storage else {}
            breaker = pybreaker.CircuitBreaker(
                fail_max=int(_retuned.get("fail_max", settings.fail_max)),
                reset_timeout=_retuned.get("reset_timeout", settings.reset_timeout_s),
                exclude=[_is_not_transport_failure],
                name=addr,
                **kwargs,
            )
            _breakers[addr] = breaker
        return breaker


def retune_breakers(*, fail_max: int | None = None,
                    reset_timeout_s: float | None = None) -> int:
    """New thresholds for every breaker of this process, existing and future (a service
    applying dynamic settings without a restart). Returns how many existing breakers changed.
    An open breaker keeps its opening time; the new reset timeout counts from it."""
    with _breakers_lock:
        if fail_max is not None:
            _retuned["fail_max"] = fail_max
        if reset_timeout_s is not None:
            _retuned["reset_timeout"] = reset_timeout_s
        for breaker in _breakers.values():
            if fail_max is not None:
                breaker.fail_max = fail_max
            if reset_timeout_s is not None:
                breaker.reset_timeout = reset_timeout_s
        return len(_breakers)


def is_endpoint_open(addr: str) -> bool:
    """True while the endpoint's breaker is open (callers should route around it)."""
    breaker = _breakers.get(addr)
    if breaker is None:
        return False
    import pybreaker  # imported already: the breaker is one

    return breaker.current_state == pybreaker.STATE_OPEN


def forgive_endpoint(addr: str) -> bool:
    """Close the endpoint's breaker: a registry has just named it the live master of its group
    (a replica promoted, a broker restarted), which is better evidence than failures from
    before. Without this a broker that comes back as master within the reset timeout would be
    refused for the rest of it. True if the breaker was open."""
    breaker = _breakers.get(addr)
    if breaker is None:
        return False
    import pybreaker  # imported already: the breaker is one

    if breaker.current_state == pybreaker.STATE_CLOSED:
        return False
    breaker.close()
    return True


def _succeed() -> None:
    return None


def _fail_with(exc: BaseException) -> None:
    raise exc


class RpcClient:
    """A stub for one endpoint with deadlines, breaker and safe retries.

    >>> client = RpcClient("127.0.0.1:9876", NameServerServiceStub)
    >>> route = client.call("GetRouteInfo", GetRouteInfoRequest(topic="orders"), idempotent=True)
    """

    def __init__(
        self,
        addr: str,
        stub_class: type,
        *,
        timeout: float = 3.0,
        breaker: BreakerSettings | None = None,
        pool: ChannelPool | None = None,
        retries: int = 2,
        guarded: bool = True,
    ) -> None:
        """`guarded=False`: no circuit breaker (calls that legitimately run to their deadline,
        such as long polls and JoinGroups parked in a rebalance, are not failures)."""
        self.addr = addr
        self.timeout = timeout
        self.retries = retries
        self._stub = stub_class((pool or default_pool).get(addr))
        self._breaker = breaker_for(addr, breaker or BreakerSettings()) if guarded else None

    def call(self, method: str, request: Any, *, timeout: float | None = None,
             idempotent: bool = False, metadata: Mapping[str, str] | None = None) -> Any:
        """`metadata`: call metadata besides the signature (trace context, for one)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            self._admit()
            try:
                result = self._invoke(method, request, deadline, metadata)
            except errors.TideMQError as exc:
                self._record(exc)
                remaining = deadline - time.monotonic()
                if (not isinstance(exc, errors.ServiceUnavailable) or attempt + 1 >= attempts
                        or remaining <= 0.05):
                    raise
                time.sleep(min(0.05 * 2**attempt, remaining / 2))
                continue
            self._record(None)
            return result
        raise AssertionError("unreachable")

    # The RPC itself runs outside the breaker: pybreaker's `call` holds the breaker's lock for
    # the whole guarded call, which would serialise every call to one endpoint (a held long
    # poll would block the send that should wake it). So admission and outcome are two short
    # steps, and the outcome is replayed through `breaker.call` to drive its state machine.

    def _admit(self) -> None:
        import pybreaker  # imported already, by breaker_for (a dictionary look-up)

        if self._breaker is None or self._breaker.current_state != pybreaker.STATE_OPEN:
            return
        opened_at = self._breaker._state_storage.opened_at  # no public accessor in pybreaker
        if opened_at and datetime.now(UTC) < opened_at + timedelta(
                seconds=self._breaker.reset_timeout):
            raise self._open_error()

    def _record(self, failure: errors.TideMQError | None) -> None:
        import pybreaker  # imported already, by breaker_for (a dictionary look-up)

        if self._breaker is None:
            return
        try:
            if failure is None:
                self._breaker.call(_succeed)
            else:
                self._breaker.call(_fail_with, failure)
        except pybreaker.CircuitBreakerError:
            if failure is not None:  # this failure tripped (or met) an open breaker
                raise self._open_error() from None
        except errors.TideMQError:
            pass  # pybreaker re-raises the replayed failure; the caller raises the original

    def _open_error(self) -> errors.BreakerOpen:
        return errors.BreakerOpen(
            f"circuit breaker for {self.addr} is open after repeated failures; "
            f"calls fail fast for up to {self._breaker.reset_timeout:g} s"
        )

    def _invoke(self, method: str, request: Any, deadline: float,
                metadata: Mapping[str, str] | None = None) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.DeadlineExceeded(f"deadline passed before calling {method} on {self.addr}")
        try:
            return getattr(self._stub, method)(
                request, timeout=remaining, metadata=tuple(metadata.items()) if metadata else None)
        except grpc.RpcError as exc:
            raise with_tls_hint(errors.from_rpc_error(exc)) from None

    def stream(self, method: str, request: Any, *, timeout: float | None = None):
        """Server-streaming call (no breaker accounting: streams are long-lived by design)."""
        return getattr(self._stub, method)(request, timeout=timeout)
