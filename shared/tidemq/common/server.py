"""The process shell every gRPC service runs in.

It owns what each service would otherwise repeat: logging and tracing setup, the gRPC server
with TideMQError → status mapping, grpc.health.v1, Prometheus /metrics, the ready file that
tests and supervisors poll, and graceful SIGTERM handling (stop accepting, drain in-flight
calls, then run the service's own stop callbacks: flush, unregister, remove abort markers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any, Protocol

import grpc
import prometheus_client
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tidemq.common import errors, rpc, tls
from tidemq.common.aio_server import AsyncioGrpcServer
from tidemq.common.auth.guard import AclSource, AuthGuard, StaticAcl
from tidemq.common.auth.signature import Credentials
from tidemq.common.logs import configure_logging, get_logger
from tidemq.common.pipeline import CallPipeline, admitted
from tidemq.common.rpc import SERVER_GRPC_OPTIONS
from tidemq.common.settings import ServiceSettings
from tidemq.common.stopsignal import StopSignal
from tidemq.common.tracing import init_tracing, shutdown_tracing

log = get_logger(__name__)


def _abort(context: grpc.ServicerContext, exc: errors.TideMQError) -> None:
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    context.abort(exc.grpc_status, exc.message)


def _answered(exc: BaseException, context: grpc.ServicerContext) -> bool:
    """The handler aborted the call itself (grpc raises a plain Exception after abort)."""
    return isinstance(exc, grpc.RpcError) or context.code() is not None


class PipelineInterceptor(grpc.ServerInterceptor):
    """Every call of the threaded server through the call pipeline (tidemq.common.pipeline):
    servicers raise TideMQError; callers see its gRPC status plus the `tidemq-code`."""

    def __init__(self, pipeline: CallPipeline) -> None:
        self.pipeline = pipeline

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        pipeline = self.pipeline
        method, metadata = handler_call_details.method, handler_call_details.invocation_metadata
        if handler.unary_unary:
            behavior = handler.unary_unary

            def unary(request: Any, context: grpc.ServicerContext) -> Any:
                try:
                    return pipeline.run(method, metadata, context, request, behavior, _answered)
                except errors.TideMQError as exc:
                    _abort(context, exc)
            return handler._replace(unary_unary=unary)
        if handler.unary_stream:
            streaming = handler.unary_stream

            def stream(request: Any, context: grpc.ServicerContext) -> Any:
                try:
                    yield from pipeline.run_stream(method, metadata, context, request, streaming)
                except errors.TideMQError as exc:
                    _abort(context, exc)
            return handler._replace(unary_stream=stream)
        kind = "stream_unary" if handler.stream_unary else "stream_stream"
        return handler._replace(**{kind: admitted(pipeline, method, metadata, kind,
                                                  getattr(handler, kind), _abort)})


class ThreadedGrpcServer:
    """The threaded gRPC server and its health service, with the same small interface as
    tidemq.common.aio_server.AsyncioGrpcServer, so ServiceRuntime drives either alike."""

    def __init__(self, name: str, *, max_workers: int, options: list,
                 pipeline: CallPipeline) -> None:
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name),
            interceptors=[PipelineInterceptor(pipeline)], options=options)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)

    def add_insecure_port(self, address: str) -> int:
        return self.server.add_insecure_port(address)

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self.server.add_secure_port(address, credentials)

    def start(self) -> None:
        self.server.start()

    def set_serving(self, services: list[str]) -> None:
        for service in services:
            self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace_s).wait()


def write_json_atomically(path: str | Path, payload: dict[str, Any]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, target)


class AclFollowing(Protocol):
    """Keeps an ACL holder's `table` current for a ServiceRuntime (each service passes the
    config client's, tidemq.configclient.acl.follow_acl): called once serving, with the
    runtime's name and holder; returns what stops the following."""

    def __call__(self, service: str, holder: AclSource) -> Callable[[], None]: ...


class ServiceRuntime:
    """Run one gRPC service: `add` servicers, `start`, then `run_until_signal`.

    `aio=True` serves on grpc.aio (see tidemq.common.aio_server): the servicer's `async def`
    handlers run on the event loop, its plain ones on `max_workers` threads.

    Security comes from the settings every service shares (docs/security.md): `auth_enabled`
    puts every call but health checks through an AuthGuard whose ACL is `acl` as given, or
    else kept current by `follow_acl` (the service passes the config center's follower: this
    library knows nothing above it); `tls_cert_file` / `tls_key_file` serve TLS (reloaded
    when the files change); `access_key` / `secret_key` / `tls_ca_file` are what this
    process's own channels sign and trust. `record_unexported=False`: with no
    `otlp_endpoint`, no span is even recorded (tidemq.common.tracing.init_tracing)."""

    def __init__(self, name: str, settings: ServiceSettings, *, max_workers: int = 64,
                 tracing: bool = True, aio: bool = False, acl: StaticAcl | None = None,
                 follow_acl: AclFollowing | None = None,
                 record_unexported: bool = True) -> None:
        self.name = name
        self.settings = settings
        configure_logging(name, settings.log_level, settings.log_format)
        credentials = Credentials(settings.access_key, settings.secret_key)
        if security := rpc.ClientSecurity.of_service(settings):
            rpc.configure_client_security(security)
        if tracing:
            init_tracing(name, settings.otlp_endpoint, tls_ca_file=settings.tls_ca_file,
                         credentials=credentials, tls_cert=(settings.tls_cert_file,
                                                            settings.tls_key_file),
                         quiet_operations=settings.trace_quiet_operations,
                         record_unexported=record_unexported)
        # the ACL follower (start) swaps in each new table; a given `acl` is used as it is
        self._follow_acl = follow_acl if acl is None else None
        if settings.auth_enabled and acl is None and follow_acl is None:
            raise errors.InvalidArgument(
                f"{name}: auth_enabled needs an ACL: a given one, or one to follow")
        self.acl = acl or StaticAcl()
        self.auth = AuthGuard(name, self.acl, skew_s=settings.auth_skew_s,
                              trusted=credentials) if settings.auth_enabled else None
        # authenticate → authorize → run → map errors, for every transport this process
        # serves (the broker's wire server takes it too)
        self.pipeline = CallPipeline(self.auth)
        server_class = AsyncioGrpcServer if aio else ThreadedGrpcServer
        self.transport = server_class(name, max_workers=max_workers, options=SERVER_GRPC_OPTIONS,
                                      pipeline=self.pipeline)
        self.server = self.transport.server  # what generated add_*_to_server functions take
        self.port = 0
        self.metrics_port = 0
        self.ready_extra: dict[str, Any] = {}
        self._service_names: list[str] = []
        self._stop_callbacks: list[Callable[[], None]] = []
        self._metrics_server = None

    def add(self, add_to_server: Callable, servicer: Any, service_name: str = "") -> None:
        add_to_server(servicer, self.server)
        if service_name:
            self._service_names.append(service_name)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Run `callback` after the server drained (callbacks run in reverse order)."""
        self._stop_callbacks.append(callback)

    def start(self) -> int:
        address = f"{self.settings.host}:{self.settings.port}"
        if self.settings.tls_cert_file:
            self.port = self.transport.add_secure_port(address, tls.server_credentials(
                self.settings.tls_cert_file, self.settings.tls_key_file,
                self.settings.tls_client_ca_file))
        else:
            self.port = self.transport.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot bind {self.settings.host}:{self.settings.port}")
        self.settings.port = self.port
        if self.settings.metrics_port >= 0:
            self._metrics_server, _ = prometheus_client.start_http_server(
                self.settings.metrics_port, addr=self.settings.host
            )
            self.metrics_port = self._metrics_server.server_port
        self.transport.start()
        if self.auth is not None and self._follow_acl is not None:
            self.on_stop(self._follow_acl(self.name, self.acl))
        self.transport.set_serving(["", *self._service_names])
        if self.settings.ready_file:
            write_json_atomically(self.settings.ready_file, {
                "port": self.port, "metrics_port": self.metrics_port, "pid": os.getpid(),
                **self.ready_extra,
            })
        log.info("serving", service=self.name, addr=f"{self.settings.host}:{self.port}",
                 metrics_port=self.metrics_port)
        return self.port

    def run_until_signal(self) -> None:
        StopSignal().install().wait()
        self.stop()

    def stop(self) -> None:
        log.info("stopping", service=self.name, grace_s=self.settings.shutdown_grace_s)
        self.transport.stop(self.settings.shutdown_grace_s)
        for callback in reversed(self._stop_callbacks):
            try:
                callback()
            except Exception:
                log.exception("stop callback failed", callback=getattr(callback, "__name__", "?"))
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        shutdown_tracing()
        log.info("stopped", service=self.name)
