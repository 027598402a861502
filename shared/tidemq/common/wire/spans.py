"""Trace spans for wire calls: the very spans gRPC's OpenTelemetry instrumentation makes, so a
call's trace is the same whichever framing carried it (and tracing never chooses the framing).

- Client: a CLIENT span named `/tidemq.v1.BrokerService/<Method>` with `rpc.system`,
  `rpc.service`, `rpc.method` and `rpc.grpc.status_code` (the gRPC status the call ended
  with), made when this process's gRPC client calls are instrumented
  (tidemq.common.tracing.init_tracing with an endpoint); its context travels in the frame's
  metadata as W3C `traceparent` / `tracestate` (and `baggage`), as gRPC carries it in its
  call metadata.
- Server: a SERVER span of the same name, a child of the context the frame carries, with the
  same attributes plus `net.peer.ip` / `net.peer.port` (and `net.peer.name` on loopback), made
  when the process's grpc.aio server calls are instrumented. It is the current span while
  the handler runs, so the servicer's attributes (a send's queue offset and message ids) land
  on it as they do on gRPC's. `rpc.user_agent` names the framing: `tidemq-wire/1` (gRPC's
  says `grpc-python/…`).

A failed call's span carries the gRPC status number and, for the statuses gRPC's
instrumentation marks as errors, an ERROR status.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from tidemq.common import errors
from tidemq.common.wire.methods import BROKER_SERVICE, Method

USER_AGENT = "tidemq-wire/1"
_SERVICE = BROKER_SERVICE.strip("/")
# gRPC's instrumentation marks these server statuses as errors; the others leave the status
# unset (a refusal or a NOT_FOUND is an answer, not a failure of the server).
_SERVER_ERRORS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL,
                            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS})
_tracer = trace.get_tracer("tidemq.common.wire")


def _instrumented(class_name: str) -> bool:
    """Whether gRPC's instrumentor `class_name` is on in this process (without importing it:
    a process that never instrumented gRPC pays one dictionary look-up)."""
    module = sys.modules.get("opentelemetry.instrumentation.grpc")
    if module is None:
        return False
    instance = getattr(module, class_name)._instance
    if instance is None or not instance.is_instrumented_by_opentelemetry:
        return False
    from opentelemetry.instrumentation.utils import is_instrumentation_enabled

    return is_instrumentation_enabled()


def client_calls_traced() -> bool:
    return _instrumented("GrpcInstrumentorClient")


def server_calls_traced() -> bool:
    return _instrumented("GrpcAioInstrumentorServer")


def _attributes(method: Method) -> dict[str, Any]:
    return {"rpc.system": "grpc", "rpc.grpc.status_code": grpc.StatusCode.OK.value[0],
            "rpc.method": method.name, "rpc.service": _SERVICE}


# -- client


def start_client_span(method: Method, metadata: Sequence[tuple[str, str]],
                      ) -> tuple[trace.Span, list[tuple[str, str]]]:
    """The call's CLIENT span (a child of the current span) and `metadata` with its context
    added. The caller ends it with `end_with` once the call is answered (`follow`)."""
    span = _tracer.start_span(method.full_name, kind=SpanKind.CLIENT,
                              attributes=_attributes(method))
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return span, [*metadata, *carrier.items()]


def end_with(span: trace.Span, failure: BaseException | None,
             status: grpc.StatusCode | None = None) -> None:
    """End the CLIENT span of a call that ended with `failure` (None: answered)."""
    if failure is not None or status is not None:
        if status is None:
            status = (failure.grpc_status if isinstance(failure, errors.TideMQError)
                      else grpc.StatusCode.UNKNOWN)
        span.set_attribute("rpc.grpc.status_code", status.value[0])
        span.set_status(Status(StatusCode.ERROR, f"{type(failure).__name__}: {failure}"
                               if failure is not None else None))
    span.end()


def follow(span: trace.Span, call: Future) -> None:
    """End `span` when `call` ends (on the thread that answers it: no hand-off)."""
    def ended(done: Future) -> None:
        if done.cancelled():  # the caller stopped waiting (or its deadline passed)
            end_with(span, None, grpc.StatusCode.CANCELLED)
            return
        end_with(span, done.exception())

    Future.add_done_callback(call, ended)  # not WireCall's, which hops to a callback thread


# -- server


def _peer_attributes(peer: str) -> dict[str, Any]:
    """`ipv4:127.0.0.1:5000` → net.peer.ip/port (and name on loopback), as gRPC's server spans."""
    try:
        ip, port = peer.split(",")[0].split(":", 1)[1].rsplit(":", 1)
    except (IndexError, ValueError):
        return {}
    ip = unquote(ip)
    found: dict[str, Any] = {"net.peer.ip": ip, "net.peer.port": port}
    if ip in ("[::1]", "127.0.0.1"):
        found["net.peer.name"] = "localhost"
    return found


@contextmanager
def server_span(method: Method, metadata: Sequence[tuple[str, str]],
                peer: str) -> Iterator[trace.Span]:
    """The SERVER span of a wire call, current while the block runs, a child of the trace
    context in the frame's metadata (a root span when it carries none)."""
    carrier: Mapping[str, str] = dict(metadata)
    token = otel_context.attach(propagate.extract(carrier)) if "traceparent" in carrier \
        else None
    try:
        attributes = _attributes(method)
        attributes["rpc.user_agent"] = USER_AGENT
        attributes.update(_peer_attributes(peer))
        with _tracer.start_as_current_span(method.full_name, kind=SpanKind.SERVER,
                                           attributes=attributes,
                                           set_status_on_exception=False) as span:
            yield span
    finally:
        if token is not None:
            otel_context.detach(token)


def answered_with(span: trace.Span, failure: errors.TideMQError) -> None:
    """What gRPC's instrumentation records when a handler aborts with `failure`'s status."""
    status = failure.grpc_status
    span.set_attribute("rpc.grpc.status_code", status.value[0])
    if status in _SERVER_ERRORS:
        span.set_status(Status(StatusCode.ERROR, f"{status}:{failure.message}"))
