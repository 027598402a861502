"""gRPC server interceptors that put every call through an AuthGuard (tidemq.common.auth).

Thin on purpose: read the `authorization` / `x-mq-date-time` metadata and the peer, ask the
guard, abort with UNAUTHENTICATED / PERMISSION_DENIED (plus `tidemq-code`) or run the handler.
The signature is checked when the call arrives, before its handler runs; the ACL check needs
the request (topic, group) and the peer's address, so it runs in a wrapper around the handler,
before the handler's own code (for streamed requests, with the method's needs only). Works for any service (the permissions
table in tidemq.common.auth.permissions also maps RocketMQ 5's MessagingService).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import grpc
from tidemq.common import errors
from tidemq.common.auth.acl import User
from tidemq.common.auth.guard import AuthGuard, peer_ip
from tidemq.common.auth.permissions import needs_authentication, required_permissions
from tidemq.common.auth.signature import AUTHORIZATION, DATE_TIME

_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def _credentials(details: grpc.HandlerCallDetails) -> tuple[str | None, str | None]:
    authorization = date_time = None
    for key, value in details.invocation_metadata or ():
        if key == AUTHORIZATION:
            authorization = value
        elif key == DATE_TIME:
            date_time = value
    return authorization, date_time


def _kind(handler: Any) -> str:
    return next(kind for kind in _KINDS if getattr(handler, kind) is not None)


def _abort(context: grpc.ServicerContext, exc: errors.TideMQError) -> None:
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    context.abort(exc.grpc_status, exc.message)


class AuthInterceptor(grpc.ServerInterceptor):
    """For the threaded server (tidemq.common.server)."""

    def __init__(self, guard: AuthGuard) -> None:
        self.guard = guard

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not needs_authentication(method):
            return handler
        kind = _kind(handler)
        try:
            user = self.guard.authenticate(*_credentials(handler_call_details))
        except errors.TideMQError as exc:
            return handler._replace(**{kind: _sync_wrapper(kind, getattr(handler, kind),
                                                           _refuse(exc))})
        check = _authorizer(self.guard, user, method, kind)
        return handler._replace(**{kind: _sync_wrapper(kind, getattr(handler, kind), check)})


def _refuse(exc: errors.TideMQError) -> Callable:
    def refuse(_request: Any, _context: Any) -> None:
        raise exc
    return refuse


def _authorizer(guard: AuthGuard, user: User, method: str, kind: str) -> Callable:
    streamed_request = kind.startswith("stream")

    def check(request: Any, context: Any) -> None:
        guard.authorize(user, peer_ip(context.peer()),
                        required_permissions(method, None if streamed_request else request))
    return check


def _sync_wrapper(kind: str, behavior: Callable, check: Callable) -> Callable:
    """Run `check`, then `behavior`; a refusal aborts the call through the context (which
    raises, so `behavior` never runs)."""
    def guarded(request: Any, context: Any) -> None:
        try:
            check(request, context)
        except errors.TideMQError as exc:
            _abort(context, exc)

    if kind.endswith("stream"):
        def stream(request: Any, context: Any) -> Any:
            guarded(request, context)
            yield from behavior(request, context)
        return stream

    def unary(request: Any, context: Any) -> Any:
        guarded(request, context)
        return behavior(request, context)
    return unary


class AsyncAuthInterceptor(grpc.aio.ServerInterceptor):
    """For the grpc.aio server (tidemq.common.aio_server), inside its error-mapping
    interceptor. Coroutine handlers are wrapped by coroutines that await the abort; a plain
    unary handler (run on the server's pool by the error mapper) raises the refusal for the
    mapper to abort with; other plain handlers get grpc's synchronous context and abort as on
    the threaded server."""

    def __init__(self, guard: AuthGuard) -> None:
        self.guard = guard

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not needs_authentication(method):
            return handler
        kind = _kind(handler)
        try:
            user = self.guard.authenticate(*_credentials(handler_call_details))
        except errors.TideMQError as exc:
            return handler._replace(**{kind: _async_refusal(kind, exc)})
        check = _authorizer(self.guard, user, method, kind)
        behavior = getattr(handler, kind)
        if inspect.isasyncgenfunction(behavior):
            async def stream(request: Any, context: Any):
                try:
                    check(request, context)
                except errors.TideMQError as exc:
                    await _abort_async(context, exc)
                async for reply in behavior(request, context):
                    yield reply
            return handler._replace(**{kind: stream})
        if inspect.iscoroutinefunction(behavior):
            async def unary(request: Any, context: Any) -> Any:
                try:
                    check(request, context)
                except errors.TideMQError as exc:
                    await _abort_async(context, exc)
                return await behavior(request, context)
            return handler._replace(**{kind: unary})
        if kind == "unary_unary":
            def blocking(request: Any, context: Any) -> Any:
                check(request, context)  # a refusal is raised: the error mapper aborts
                return behavior(request, context)
            return handler._replace(unary_unary=blocking)
        return handler._replace(**{kind: _sync_wrapper(kind, behavior, check)})


async def _abort_async(context: Any, exc: errors.TideMQError) -> None:
    context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
    await context.abort(exc.grpc_status, exc.message)


def _async_refusal(kind: str, exc: errors.TideMQError) -> Callable:
    if kind.endswith("unary"):
        async def refuse(_request: Any, context: Any) -> Any:
            await _abort_async(context, exc)
        return refuse

    async def refuse_stream(_request: Any, context: Any):
        await _abort_async(context, exc)
        yield  # pragma: no cover - never reached; makes this an async generator
    return refuse_stream
