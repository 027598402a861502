"""A grpc.aio server run on an event-loop thread of its own, driven from synchronous code.

For services whose calls mostly wait (a SYNC_FLUSH send waiting for its group-commit round, a
long-polled pull waiting for a message): on grpc.aio such a call is a coroutine parked on a
future, not a thread, so thousands can wait at once and one round's fsync wakes its callers
with one loop wake-up. Handlers written as `async def` run on the loop and must not block it;
plain `def` handlers (the quick or blocking calls: admin, offsets, groups) run on a thread
pool with the caller's contextvars, so their trace spans nest as before.

Calls go through the same call pipeline (tidemq.common.pipeline) as on the threaded server
and the broker's wire server: authenticate → authorize → run → map errors.
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
from tidemq.common.pipeline import CallPipeline, admitted

log = get_logger(__name__)
T = TypeVar("T")


async def _abort(context: grpc.aio.ServicerContext, exc: errors.TideMQError) -> None:
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    await context.abort(exc.grpc_status, exc.message)


def _answered(exc: BaseException, _context: Any) -> bool:
    return isinstance(exc, grpc.aio.AbortError)  # the handler aborted the call itself


class AsyncPipelineInterceptor(grpc.aio.ServerInterceptor):
    """Every call of the grpc.aio server through the call pipeline (tidemq.common.pipeline):
    servicers raise TideMQError; callers see its gRPC status plus the `tidemq-code`. Plain
    (non-async) unary handlers run on `pool` (the whole pipeline with them), so they may
    block."""

    def __init__(self, pipeline: CallPipeline, pool: futures.ThreadPoolExecutor) -> None:
        self.pipeline = pipeline
        self.pool = pool

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        pipeline = self.pipeline
        method, metadata = handler_call_details.method, handler_call_details.invocation_metadata
        if handler.unary_unary:
            behavior = handler.unary_unary
            if inspect.iscoroutinefunction(behavior):
                async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                    try:
                        return await pipeline.run_async(method, metadata, context, request,
                                                        behavior, _answered)
                    except errors.TideMQError as exc:
                        await _abort(context, exc)
            else:
                pool = self.pool

                async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                    call = contextvars.copy_context().run
                    try:
                        return await asyncio.get_running_loop().run_in_executor(
                            pool, call, pipeline.run, method, metadata, context, request,
                            behavior, _answered)
                    except errors.TideMQError as exc:
                        await _abort(context, exc)
            return handler._replace(unary_unary=unary)
        if handler.unary_stream and inspect.isasyncgenfunction(handler.unary_stream):
            streaming = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext):
                try:
                    async for reply in pipeline.run_stream_async(method, metadata, context,
                                                                 request, streaming):
                        yield reply
                except errors.TideMQError as exc:
                    await _abort(context, exc)
            return handler._replace(unary_stream=stream)
        if pipeline.guard is None:
            return handler
        kind = next(kind for kind in ("unary_stream", "stream_unary", "stream_stream")
                    if getattr(handler, kind) is not None)
        return handler._replace(**{kind: _admitted(pipeline, method, metadata, kind,
                                                   getattr(handler, kind))})


def _admitted(pipeline: CallPipeline, method: str, metadata: Any, kind: str,
              behavior: Callable) -> Callable:
    """Other handlers (plain streams, streamed requests) admitted before they run: on the
    method's needs alone for a streamed request."""
    streamed_request = kind.startswith("stream")
    if inspect.isasyncgenfunction(behavior):
        async def stream(request: Any, context: Any):
            try:
                pipeline.admit(method, metadata, context, None if streamed_request else request)
            except errors.TideMQError as exc:
                await _abort(context, exc)
            async for reply in behavior(request, context):
                yield reply
        return stream
    if inspect.iscoroutinefunction(behavior):
        async def unary(request: Any, context: Any) -> Any:
            try:
                pipeline.admit(method, metadata, context, None if streamed_request else request)
            except errors.TideMQError as exc:
                await _abort(context, exc)
            return await behavior(request, context)
        return unary
    if streamed_request:
        return admitted(pipeline, method, metadata, kind, behavior, _abort_sync)

    def plain_stream(request: Any, context: Any) -> Any:
        try:
            pipeline.admit(method, metadata, context, request)
        except errors.TideMQError as exc:
            _abort_sync(context, exc)
        yield from behavior(request, context)
    return plain_stream


def _abort_sync(context: Any, exc: errors.TideMQError) -> None:
    """For plain handlers, which grpc.aio gives its synchronous context."""
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    context.abort(exc.grpc_status, exc.message)


class AsyncioGrpcServer:
    """The grpc.aio server, its loop thread and its health service, with the blocking
    `add_insecure_port` / `start` / `stop` of a threaded server."""

    def __init__(self, name: str, *, max_workers: int, options: list,
                 pipeline: CallPipeline) -> None:
        self._pipeline = pipeline
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
        return grpc.aio.server(
            interceptors=[AsyncPipelineInterceptor(self._pipeline, self.pool)], options=options)

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
