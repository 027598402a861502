"""A grpc.aio server run on an event-loop thread of its own, driven from synchronous code.

For services whose calls mostly wait (a SYNC_FLUSH send waiting for its group-commit round, a
long-polled pull waiting for a message): on grpc.aio such a call is a coroutine parked on a
future, not a thread, so thousands can wait at once and one round's fsync wakes its callers
with one loop wake-up. Handlers written as `async def` run on the loop and must not block it;
plain `def` handlers (the quick or blocking calls: admin, offsets, groups) run on a thread
pool with the caller's contextvars, so their trace spans nest as before.

TideMQError → gRPC status + `tidemq-code` mapping is the same as on the threaded server.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Callable, Coroutine
from concurrent import futures
from typing import Any, TypeVar

import grpc
import uvloop
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tidemq.common import errors
from tidemq.common.logs import get_logger

log = get_logger(__name__)
T = TypeVar("T")


async def _abort(context: grpc.aio.ServicerContext, exc: errors.TideMQError) -> None:
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    await context.abort(exc.grpc_status, exc.message)


class AsyncErrorMappingInterceptor(grpc.aio.ServerInterceptor):
    """Servicers raise TideMQError; callers see its gRPC status plus the `tidemq-code`. Plain
    (non-async) unary handlers are run on `pool`, so they may block."""

    def __init__(self, pool: futures.ThreadPoolExecutor) -> None:
        self.pool = pool

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary:
            return handler._replace(unary_unary=self._guard(handler.unary_unary))
        if handler.unary_stream and inspect.isasyncgenfunction(handler.unary_stream):
            return handler._replace(unary_stream=_guard_stream(handler.unary_stream))
        return handler

    def _guard(self, behavior: Callable) -> Callable:
        if not inspect.iscoroutinefunction(behavior):
            behavior = self._on_pool(behavior)

        async def handler(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await behavior(request, context)
            except errors.TideMQError as exc:
                await _abort(context, exc)
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.exception("unhandled error in handler")
                await _abort(context, errors.Internal(
                    f"internal error: {type(exc).__name__}: {exc}"))

        return handler

    def _on_pool(self, behavior: Callable) -> Callable:
        async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
            call = contextvars.copy_context().run
            return await asyncio.get_running_loop().run_in_executor(
                self.pool, call, behavior, request, context)
        return run


def _guard_stream(behavior: Callable) -> Callable:
    async def handler(request: Any, context: grpc.aio.ServicerContext):
        try:
            async for response in behavior(request, context):
                yield response
        except errors.TideMQError as exc:
            await _abort(context, exc)

    return handler


class AsyncioGrpcServer:
    """The grpc.aio server, its loop thread and its health service, with the blocking
    `add_insecure_port` / `start` / `stop` of a threaded server."""

    def __init__(self, name: str, *, max_workers: int, options: list,
                 auth: Any = None) -> None:
        self._auth = auth  # a tidemq.common.auth.AuthGuard, or None
        self.pool = futures.ThreadPoolExecutor(max_workers=max_workers,
                                               thread_name_prefix=name)
        # uvloop: its call scheduling and callbacks are C, which the store's SYNC_FLUSH
        # appends feel (docs/architecture.md, "Measurements behind the code")
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"{name}-aio",
                                        daemon=True)
        self._thread.start()
        self.server: grpc.aio.Server = self.call(self._create(options))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)

    async def _create(self, options: list) -> grpc.aio.Server:
        interceptors: list = [AsyncErrorMappingInterceptor(self.pool)]
        if self._auth is not None:
            from tidemq.common.auth_grpc import AsyncAuthInterceptor

            interceptors.append(AsyncAuthInterceptor(self._auth))
        return grpc.aio.server(interceptors=interceptors, options=options)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coroutine` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def add_insecure_port(self, address: str) -> int:
        return self.server.add_insecure_port(address)

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self.server.add_secure_port(address, credentials)

    def start(self) -> None:
        self.call(self.server.start())

    def set_serving(self, services: list[str]) -> None:
        for service in services:
            self.call(self.health.set(service, health_pb2.HealthCheckResponse.SERVING))

    def stop(self, grace_s: float) -> None:
        """Stop accepting, let in-flight calls finish for up to `grace_s`, stop the loop.

        Like the threaded server, this does not wait for plain handlers still running on the
        pool past the grace (a JoinGroup waits for the coordinator, which the service stops
        after the server); the loop is stopped, not closed, so their late results are dropped
        quietly."""
        self.call(self.health.enter_graceful_shutdown())
        self.call(self.server.stop(grace_s))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.pool.shutdown(wait=False, cancel_futures=True)
