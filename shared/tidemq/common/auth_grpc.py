"""gRPC server interceptors that put every call through an AuthGuard (tidemq.common.auth).

Thin on purpose: read the `authorization` / `x-mq-date-time` metadata and the peer, ask the
guard, abort with UNAUTHENTICATED / PERMISSION_DENIED (plus `tidemq-code`) or run the handler.
The signature is checked when the call arrives, before its handler runs; the ACL check needs
the request (topic, group), so for methods whose permissions name one it runs in a wrapper
around the handler, before the handler's own code. Works for any service (the permissions
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
from tidemq.common.auth.permissions import RULES, needs_authentication, required_permissions
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
            if method not in RULES or not kind.startswith("unary"):
                self._authorize(user, method, None, "")  # needs that name no resource
                return handler
        except errors.TideMQError as exc:
            refusal = exc

            def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
                _abort(context, refusal)
            return handler._replace(**{kind: refuse})
        return handler._replace(**{kind: self._wrap(getattr(handler, kind), user, method,
                                                    streaming=kind == "unary_stream")})

    def _authorize(self, user: User, method: str, request: Any, peer: str) -> None:
        self.guard.authorize(user, peer_ip(peer), required_permissions(method, request))

    def _wrap(self, behavior: Callable, user: User, method: str, *, streaming: bool) -> Callable:
        def check(request: Any, context: grpc.ServicerContext) -> bool:
            try:
                self._authorize(user, method, request, context.peer())
            except errors.TideMQError as exc:
                _abort(context, exc)
            return True

        if streaming:
            def stream(request: Any, context: grpc.ServicerContext) -> Any:
                check(request, context)
                yield from behavior(request, context)
            return stream

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            check(request, context)
            return behavior(request, context)
        return unary


class AsyncAuthInterceptor(grpc.aio.ServerInterceptor):
    """For the grpc.aio server (tidemq.common.aio_server). Installed inside its error-mapping
    interceptor, so a refusal raised in a wrapper becomes the same status as elsewhere."""

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
            if method not in RULES or not kind.startswith("unary"):
                self.guard.authorize(user, "", required_permissions(method, None))
                return handler
        except errors.TideMQError as exc:
            return handler._replace(**{kind: _async_refusal(kind, exc)})
        return handler._replace(**{kind: self._wrap(getattr(handler, kind), user, method)})

    def _wrap(self, behavior: Callable, user: User, method: str) -> Callable:
        guard = self.guard

        def check(request: Any, context: Any) -> None:
            guard.authorize(user, peer_ip(context.peer()),
                            required_permissions(method, request))

        if inspect.isasyncgenfunction(behavior):
            async def stream(request: Any, context: Any):
                check(request, context)
                async for reply in behavior(request, context):
                    yield reply
            return stream
        if inspect.iscoroutinefunction(behavior):
            async def unary(request: Any, context: Any) -> Any:
                check(request, context)
                return await behavior(request, context)
            return unary

        def blocking(request: Any, context: Any) -> Any:  # runs on the server's pool
            check(request, context)
            return behavior(request, context)
        return blocking


def _async_refusal(kind: str, exc: errors.TideMQError) -> Callable:
    async def abort(context: Any) -> None:
        context.set_trailing_metadata(((errors.CODE_METADATA_KEY, exc.code),))
        await context.abort(exc.grpc_status, exc.message)

    if kind.endswith("unary"):
        async def refuse(_request: Any, context: Any) -> Any:
            await abort(context)
        return refuse

    async def refuse_stream(_request: Any, context: Any):
        await abort(context)
        yield  # pragma: no cover - never reached; makes this an async generator
    return refuse_stream
