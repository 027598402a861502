"""The wire side of one broker: which port it offers, the connection to it, and whether a call
takes it.

A call goes over the wire when all of these hold, and over gRPC otherwise (same request, same
answer, same errors):
- the call is hot (`table.BROKER_CALLS`) and has a wire number (`wire.methods.BROKER_METHODS`);
- the broker offers a wire port (from its route, else GetBrokerInfo: `ports`);
- the port's TLS matches the process's: a process that trusts a TLS CA speaks TLS to a TLS
  port (verifying the broker as its gRPC channels do), one that trusts none speaks plaintext
  to a plaintext port; a client never downgrades to plaintext;
- `TIDEMQ_WIRE` is not `0`.

Tracing never chooses: a call inside a recording span takes the wire like any other, with
the CLIENT span and the trace context gRPC's instrumentation would have given it
(`tidemq.common.wire.spans`).

A connection that cannot be made, or that was lost, sends the next calls over gRPC and is tried
again after `RETRY_AFTER_S`.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidemq.common import errors
from tidemq.common.auth.signature import signed_metadata
from tidemq.common.channel import ports
from tidemq.common.channel.payload import wire_payload
from tidemq.common.logs import get_logger
from tidemq.common.wire import spans
from tidemq.common.wire.client import CONNECT_TIMEOUT_S, NotSent, WireCall, WireConnection
from tidemq.common.wire.methods import BROKER_METHODS, Method

log = get_logger(__name__)

RETRY_AFTER_S = 5.0  # after a failed connect or a lost connection, gRPC for this long


def wire_disabled() -> bool:
    return os.environ.get("TIDEMQ_WIRE", "1") == "0"


def client_context(security: Any) -> ssl.SSLContext:
    """The TLS context of a wire connection for `security` (a rpc.ClientSecurity): the
    servers verified against its CA, its certificate shown to one that asks (mutual TLS), the
    same files as its gRPC channels (read at each connection, so a rotation applies to the
    next)."""
    context = ssl.create_default_context(cafile=security.ca_file)
    if security.cert_file and security.key_file:
        context.load_cert_chain(security.cert_file, security.key_file)
    return context


class WireLink:
    """`discover(timeout_s)` → the broker's WirePort (default: `ports.port_of`). `security`
    (a rpc.ClientSecurity, or None: plaintext): with a CA, the link speaks TLS to a TLS port
    and verifies the broker as gRPC does (`server_name`, else the host dialled)."""

    def __init__(self, addr: str, *, credentials: Any = None, security: Any = None,
                 discover: Callable[[float], ports.WirePort] | None = None) -> None:
        self.addr = addr
        self._discover = discover or (lambda timeout_s: ports.port_of(addr, timeout_s))
        self._credentials = credentials
        self._security = security if security is not None and security.ca_file else None
        self._off = wire_disabled()
        self._lock = threading.Lock()
        self._connection: WireConnection | None = None
        self._retry_at = 0.0

    def method(self, name: str) -> Method | None:
        """The wire method for this call now, or None: it goes by gRPC."""
        found = BROKER_METHODS.get(name)
        if found is None or self._off:
            return None
        return found

    def connection(self, timeout_s: float) -> WireConnection | None:
        connection = self._connection
        if connection is not None and connection.alive:
            return connection
        if time.monotonic() < self._retry_at:
            return None
        with self._lock:
            connection = self._connection
            if connection is None or not connection.alive:
                connection = self._connection = self._connect(min(timeout_s,
                                                                  CONNECT_TIMEOUT_S))
        return connection

    def _connect(self, timeout_s: float) -> WireConnection | None:
        """A connection to the broker's wire port; a port that fails is forgotten, so the next
        attempt asks again (a broker restarted on other ports)."""
        try:
            offered = self._discover(timeout_s)
            tls = self._security is not None
            if not offered.port or offered.tls != tls:
                # none offered; or a TLS port and no CA to verify it with (gRPC says what to
                # set); or a plaintext port for a client that trusts a CA: never downgrade
                self._retry_at = time.monotonic() + 60 * RETRY_AFTER_S
                if offered.port:
                    log.info("wire port not used: its TLS does not match this client's; calls "
                             "use gRPC", broker=self.addr, port_tls=offered.tls, client_tls=tls)
                return None
            host = self.addr.rpartition(":")[0]
            try:
                connection = WireConnection(
                    f"{host}:{offered.port}", connect_timeout_s=timeout_s,
                    tls=client_context(self._security) if tls else None,
                    tls_server_name=self._security.server_name if tls else "")
            except OSError:
                ports.forget(self.addr)
                raise
            if connection.server_name != self.addr:
                connection.close()
                ports.forget(self.addr)
                raise OSError(f"wire port {connection.addr} is served by "
                              f"{connection.server_name!r}, not by {self.addr}")
            return connection
        except (OSError, errors.TideMQError) as exc:
            log.info("wire transport unavailable; calls use gRPC", broker=self.addr,
                     error=str(exc), retry_in_s=RETRY_AFTER_S)
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            return None

    def _metadata(self, extra: Mapping[str, str] | None) -> Sequence[tuple[str, str]]:
        signed = signed_metadata(self._credentials) if self._credentials else ()
        return [*signed, *extra.items()] if extra else signed

    def start(self, name: str, request: Any, timeout_s: float,
              metadata: Mapping[str, str] | None = None) -> WireCall | None:
        """The call started over the wire, or None when it should go by gRPC (a request
        spliced by the channel is written in its parts)."""
        method = self.method(name)
        if method is None:
            return None
        connection = self.connection(timeout_s)
        if connection is None:
            return None
        entries = self._metadata(metadata)
        span = None
        if spans.client_calls_traced():  # the span and context gRPC's instrumentation makes
            span, entries = spans.start_client_span(method, entries)
        try:
            call = connection.start(method, wire_payload(request), timeout_s, entries)
        except NotSent:  # the connection was found closed: gRPC takes this call, with
            return None  # its own span (this one is never ended, so never exported)
        if span is not None:
            spans.follow(span, call)
        return call

    def call(self, name: str, request: Any, timeout_s: float,
             metadata: Mapping[str, str] | None = None) -> Any:
        """The response over the wire, or None when this call should go by gRPC."""
        started = self.start(name, request, timeout_s, metadata)
        return None if started is None else started.answer(timeout_s)

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.alive

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


_links: dict[tuple[str, Any], WireLink] = {}
_links_lock = threading.Lock()


def link_for(addr: str, security: Any) -> WireLink:
    """The process's WireLink to the broker at `addr` (its gRPC address) for `security`
    (tidemq.common.rpc.ClientSecurity): one connection per broker, shared by every channel."""
    key = (addr, security)
    with _links_lock:
        link = _links.get(key)
        if link is None:
            link = _links[key] = WireLink(addr, credentials=security.credentials,
                                          security=security)
        return link


def close_links() -> None:
    """Close every wire connection of this process (tests; a process that forks)."""
    with _links_lock:
        for link in _links.values():
            link.close()
        _links.clear()
