"""BrokerChannel: one broker's calls, whatever carries them.

Built on RpcClient (tidemq.common.rpc: deadlines, breaker, retries of idempotent calls), whose
one gRPC step it replaces with the choice: the wire link when the call is hot and the link
can take it (`link`), gRPC otherwise. A call the wire never wrote goes over gRPC in the same
attempt. Either way the caller gets the same response or the same TideMQError, and a started
call is a concurrent.futures.Future that fails with a TideMQError: no transport type leaves
this package.

Client quotas (docs/quotas.md): every call carries the channel's `client_id` in the
`tidemq-client-id` metadata (Kafka's client.id), and an answer's `throttle_time_ms` makes the
channel wait that long before its next Send, Pull or Pop to this broker (Kafka's client mutes
its connection to a throttling broker the same way); other calls (commits, heartbeats) go at
once.

A gateway's call made for one of its clients (inside `tidemq.common.quotas.on_behalf_of`)
carries that end client's identity instead, and its throttle time is kept on the end client
(`EndClient.throttle_ms`), not on the channel: the channel is shared by all of the gateway's
clients, and one client's throttle must not make the others wait (the gateway passes it on,
as Kafka's throttle_time_ms, or waits it out for that client alone).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import grpc
from tidemq.common import errors, rpc
from tidemq.common.channel import metrics
from tidemq.common.channel.link import link_for
from tidemq.common.channel.payload import compose, whole
from tidemq.common.channel.table import BROKER_CALLS, GRPC_ONLY
from tidemq.common.quotas import CLIENT_ID_METADATA, END_CLIENT, EndClient
from tidemq.v1 import broker_pb2_grpc


class _GrpcCall(Future):
    """A grpc.Future seen as a concurrent.futures.Future whose failure is a TideMQError."""

    def __init__(self, inner: grpc.Future) -> None:
        super().__init__()
        self._inner = inner
        inner.add_done_callback(self._settle)

    def _settle(self, inner: grpc.Future) -> None:
        if inner.cancelled():
            super().cancel()
            return
        exc = inner.exception()
        if exc is None:
            self.set_result(inner.result())
        elif isinstance(exc, grpc.RpcError):
            self.set_exception(rpc.with_tls_hint(errors.from_rpc_error(exc)))
        else:
            self.set_exception(exc)

    def cancel(self) -> bool:
        self._inner.cancel()
        return super().cancel()


QUOTA_CALLS = frozenset({"Send", "Pull", "Pop"})  # the calls a broker throttles


def _grpc_metadata(metadata: Mapping[str, str] | None) -> tuple | None:
    return tuple(metadata.items()) if metadata else None


class BrokerChannel(rpc.RpcClient):
    """The calls to the broker at `addr` (its gRPC address).

    >>> channel = BrokerChannel("127.0.0.1:10911")  # doctest: +SKIP
    >>> channel.call("Send", SendRequest(topic="orders", queue_id=0, record_count=n),
    ...              bulk=records)  # doctest: +SKIP

    `guarded=False`: no circuit breaker, for calls that legitimately run to their deadline
    (long polls, a JoinGroup parked in a rebalance). `metadata` on any call: entries carried
    beside the signature by either framing (the hook for trace context)."""

    def __init__(self, addr: str, *, timeout: float = 3.0,
                 breaker: rpc.BreakerSettings | None = None, retries: int = 1,
                 guarded: bool = True, pool: rpc.ChannelPool | None = None) -> None:
        super().__init__(addr, broker_pb2_grpc.BrokerServiceStub, timeout=timeout,
                         breaker=breaker, pool=pool, retries=retries, guarded=guarded)
        self._wire = link_for(addr, rpc.client_security())
        self._identity: dict[str, str] = {}
        self.throttled_until = 0.0  # monotonic: no quota call to this broker before it

    @property
    def client_id(self) -> str:
        return self._identity.get(CLIENT_ID_METADATA, "")

    @client_id.setter
    def client_id(self, value: str) -> None:
        self._identity = {CLIENT_ID_METADATA: value} if value else {}

    def call(self, method: str, request: Any, *, timeout: float | None = None,
             idempotent: bool = False, bulk: bytes | None = None,
             metadata: Mapping[str, str] | None = None) -> Any:
        """The response. `bulk`: the bytes of the method's bulk field (a send's records),
        carried without being copied into `request`."""
        end = END_CLIENT.get()
        if method in QUOTA_CALLS and end is None:
            self._wait_throttle()
        response = super().call(method, self._compose(method, request, bulk), timeout=timeout,
                                idempotent=idempotent, metadata=self._identified(metadata, end))
        self._note_throttle(method, response, end)
        return response

    def start(self, method: str, request: Any, *, timeout: float | None = None,
              bulk: bytes | None = None,
              metadata: Mapping[str, str] | None = None) -> Future:
        """The call as a future: `cancel()` ends it at once (the broker stops a long poll), and
        it ends by its deadline even if nobody waits on it."""
        self._admit()
        future = self._start(method, self._compose(method, request, bulk),
                             timeout or self.timeout,
                             self._identified(metadata, END_CLIENT.get()))
        if self._breaker is not None:
            future.add_done_callback(self._record_outcome)
        return future

    def call_unless(self, method: str, request: Any, *, timeout: float,
                    abandon: Callable[[], bool], check_every_s: float = 0.5,
                    bulk: bytes | None = None,
                    metadata: Mapping[str, str] | None = None) -> Any:
        """One non-idempotent call that is abandoned (ServiceUnavailable) as soon as
        `abandon()` says its answer no longer matters — asked every `check_every_s` while the
        call is outstanding, never for a call answered sooner. A frozen endpoint otherwise holds
        the caller for its whole deadline (a producer whose group elected a new master)."""
        end = END_CLIENT.get()
        if method in QUOTA_CALLS and end is None:
            self._wait_throttle()
        deadline = time.monotonic() + timeout
        self._admit()
        future = self._start(method, self._compose(method, request, bulk), timeout,
                             self._identified(metadata, end))
        while True:
            try:
                result = future.result(
                    timeout=max(0.01, min(check_every_s, deadline - time.monotonic())))
                break
            except TimeoutError:
                if time.monotonic() >= deadline:
                    future.cancel()
                    failure: errors.TideMQError = errors.DeadlineExceeded(
                        f"{method} on {self.addr}: no answer within {timeout:.3g} s")
                elif abandon():
                    future.cancel()
                    raise errors.ServiceUnavailable(
                        f"{method} on {self.addr} abandoned: its answer no longer "
                        "matters") from None
                else:
                    continue
            except errors.TideMQError as exc:
                failure = exc
            self._record(failure)
            raise failure from None
        self._record(None)
        self._note_throttle(method, result, end)
        return result

    # -- client quotas

    def _identified(self, metadata: Mapping[str, str] | None,
                    end: EndClient | None = None) -> Mapping[str, str] | None:
        """The call's metadata with who it is for: the end client a gateway calls for, else
        this channel's own client id."""
        identity = self._identity if end is None else end.metadata
        if not identity:
            return metadata
        return {**metadata, **identity} if metadata else identity

    def _wait_throttle(self) -> None:
        """Wait out the last throttle time this broker answered (a sleep, not a busy loop:
        the broker said how long)."""
        wait = self.throttled_until - time.monotonic()
        if wait > 0:
            metrics.throttled(wait)
            time.sleep(wait)

    def _note_throttle(self, method: str, response: Any, end: EndClient | None) -> None:
        if method in QUOTA_CALLS:
            throttle_ms = getattr(response, "throttle_time_ms", 0)  # stand-ins lack it
            if throttle_ms > 0:
                if end is not None:   # the end client's, not the shared channel's
                    end.note_throttle(throttle_ms)
                    return
                self.throttled_until = max(self.throttled_until,
                                           time.monotonic() + throttle_ms / 1000)

    @property
    def wire_connected(self) -> bool:
        """Whether this broker's wire connection is open (tests, diagnostics)."""
        return self._wire.connected

    # -- the choice

    @staticmethod
    def _compose(method: str, request: Any, bulk: bytes | None) -> Any:
        return compose(request, BROKER_CALLS.get(method, GRPC_ONLY).bulk, bulk)

    def _invoke(self, method: str, request: Any, deadline: float,
                metadata: Mapping[str, str] | None = None) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.DeadlineExceeded(f"deadline passed before calling {method} on {self.addr}")
        if BROKER_CALLS.get(method, GRPC_ONLY).hot:
            started = self._wire.start(method, request, remaining, metadata)
            if started is not None:  # None: this call goes by gRPC
                metrics.counted(method, metrics.WIRE)
                return started.answer(remaining)
        metrics.counted(method, metrics.GRPC)
        return super()._invoke(method, whole(request), deadline, metadata)

    def _start(self, method: str, request: Any, timeout: float,
               metadata: Mapping[str, str] | None) -> Future:
        if BROKER_CALLS.get(method, GRPC_ONLY).hot:
            started = self._wire.start(method, request, timeout, metadata)
            if started is not None:
                metrics.counted(method, metrics.WIRE)
                return started
        metrics.counted(method, metrics.GRPC)
        return _GrpcCall(getattr(self._stub, method).future(
            whole(request), timeout=timeout, metadata=_grpc_metadata(metadata)))

    def _record_outcome(self, future: Future) -> None:
        if future.cancelled():
            return
        failure = future.exception()
        with contextlib.suppress(errors.BreakerOpen):  # the caller sees its own failure
            self._record(failure if isinstance(failure, errors.TideMQError) else None)


class BrokerChannels:
    """A process's channels by broker address, made on first use (one per address)."""

    def __init__(self, *, timeout: float = 3.0, breaker: rpc.BreakerSettings | None = None,
                 guarded: bool = True, retries: int = 1, client_id: str = "") -> None:
        self._options = {"timeout": timeout, "breaker": breaker, "guarded": guarded,
                         "retries": retries}
        self.client_id = client_id  # sent with every call (docs/quotas.md)
        self._lock = threading.Lock()
        self._channels: dict[str, BrokerChannel] = {}

    def get(self, addr: str) -> BrokerChannel:
        with self._lock:
            channel = self._channels.get(addr)
            if channel is None:
                channel = self._channels[addr] = self._make(addr)
                channel.client_id = self.client_id
            return channel

    def _make(self, addr: str) -> BrokerChannel:
        return BrokerChannel(addr, **self._options)

    @staticmethod
    def is_open(addr: str) -> bool:
        """True while the breaker for `addr` is open: route traffic elsewhere."""
        return bool(addr) and rpc.is_endpoint_open(addr)
