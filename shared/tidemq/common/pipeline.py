"""The server's one call pipeline: authenticate → authorize → run → map errors.

Every transport a service serves hands its calls to a CallPipeline: the threaded gRPC server
(tidemq.common.server), the grpc.aio server (tidemq.common.aio_server) and the broker's wire
protocol server (tidemq.common.wire.server). So a call is checked and answered the same way
whatever carried it, as RocketMQ's remoting has one RPC hook and Kafka one request handler:
the same signature check, the same ACL entry (tidemq.common.auth.permissions, keyed by gRPC's
method name), the same refusal sentences, and an unexpected exception answered INTERNAL with
its log line. The transports only adapt: read the method, metadata and peer, then turn the
TideMQError the pipeline raises into their own answer (a gRPC abort, an error frame).

`run` and `run_async` are the one pipeline's blocking and coroutine forms; `admit` is its
first two steps, for calls whose request is a stream (checked with the method's needs only).
`admit` also says who is calling — the signed user and the `tidemq-client-id` metadata — in
tidemq.common.quotas.CALLER, which client quotas are charged to (docs/quotas.md). A gateway's
call for one of its clients names that client's user in `tidemq-on-behalf-of`; it is believed
only from a signed caller granted ADMIN on `cluster:forward-identity` (admins are), refused
PERMISSION_DENIED from anyone else, and ignored when the call is not signed (auth off: no user
is charged then), so an ordinary client cannot charge its calls to another user.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

from tidemq.common import errors
from tidemq.common.auth.acl import Action, Permission
from tidemq.common.auth.guard import AuthGuard, peer_ip
from tidemq.common.auth.permissions import needs_authentication, required_permissions
from tidemq.common.auth.signature import AUTHORIZATION, DATE_TIME
from tidemq.common.logs import get_logger
from tidemq.common.quotas import (
    ANONYMOUS,
    CALLER,
    CLIENT_ID_METADATA,
    FORWARD_IDENTITY,
    ON_BEHALF_OF_METADATA,
    Caller,
    end_user_of,
)

log = get_logger(__name__)

Metadata = Iterable[tuple[str, Any]]
FORWARDING = (Permission("cluster", FORWARD_IDENTITY, Action.ADMIN),)
Answered = Callable[[BaseException, Any], bool]


def _never(_exc: BaseException, _context: Any) -> bool:
    return False


class CallPipeline:
    """`guard`: the service's AuthGuard, or None when auth is off (then calls just run).

    The calls take the method's gRPC name, the call metadata, the transport's context (whose
    `peer()` the ACL checks; the handler gets it too) and the request. `answered(exc,
    context)`: whether an exception is the transport's own answer already (a gRPC handler
    that aborted), to be let through rather than mapped."""

    def __init__(self, guard: AuthGuard | None = None) -> None:
        self.guard = guard

    def admit(self, method: str, metadata: Metadata | None, context: Any,
              request: Any) -> None:
        """Authenticate, then authorize: raises Unauthenticated / PermissionDenied.
        `request`: the request message, or None for a streamed request."""
        guard = self.guard
        authorization = date_time = None
        client_id = ""
        on_behalf_of = None
        for key, value in metadata or ():
            if key == AUTHORIZATION:
                authorization = value
            elif key == DATE_TIME:
                date_time = value
            elif key == CLIENT_ID_METADATA:
                client_id = value
            elif key == ON_BEHALF_OF_METADATA:
                on_behalf_of = value
        if guard is None or not needs_authentication(method):
            # set on every call: a pooled thread must not keep the previous call's caller.
            # An unsigned call is charged to no user, whoever it says it calls for.
            CALLER.set(Caller("", client_id) if client_id else ANONYMOUS)
            return
        user = guard.authenticate(authorization, date_time)
        ip = peer_ip(context.peer())
        guard.authorize(user, ip, required_permissions(method, request))
        if on_behalf_of is None:
            CALLER.set(Caller(user.access_key, client_id))
            return
        CALLER.set(Caller(self._forwarded_user(guard, user, ip, on_behalf_of), client_id))

    @staticmethod
    def _forwarded_user(guard: AuthGuard, user: Any, ip: str, on_behalf_of: str) -> str:
        """The end user a gateway's call is made for, once the caller may say so."""
        try:
            end_user = end_user_of(on_behalf_of)
        except ValueError as exc:
            raise errors.InvalidArgument(str(exc)) from None
        try:
            guard.authorize(user, ip, FORWARDING)
        except errors.PermissionDenied as exc:
            raise errors.PermissionDenied(
                f"{exc.message}: only a gateway's credential may make calls on behalf of "
                f"another client ({ON_BEHALF_OF_METADATA}); nothing was done") from None
        return end_user

    def failure(self, method: str, exc: Exception) -> errors.TideMQError:
        """The answer to an exception a handler raised: a TideMQError as it is, anything
        else INTERNAL (and logged, since the caller learns only its name)."""
        if isinstance(exc, errors.TideMQError):
            return exc
        log.exception("unhandled error in handler", method=method)
        return errors.Internal(f"internal error: {type(exc).__name__}: {exc}")

    def run(self, method: str, metadata: Metadata | None, context: Any, request: Any,
            behavior: Callable[[Any, Any], Any], answered: Answered = _never) -> Any:
        """The whole pipeline for a blocking handler: its reply, or the TideMQError to
        answer with."""
        try:
            self.admit(method, metadata, context, request)
            return behavior(request, context)
        except Exception as exc:
            if answered(exc, context):
                raise
            raise self.failure(method, exc) from None

    async def run_async(self, method: str, metadata: Metadata | None, context: Any,
                        request: Any, behavior: Callable[[Any, Any], Awaitable[Any]],
                        answered: Answered = _never) -> Any:
        """The whole pipeline for a coroutine handler (the same steps as `run`)."""
        try:
            self.admit(method, metadata, context, request)
            return await behavior(request, context)
        except Exception as exc:
            if answered(exc, context):
                raise
            raise self.failure(method, exc) from None

    def run_stream(self, method: str, metadata: Metadata | None, context: Any, request: Any,
                   behavior: Callable[[Any, Any], Iterator[Any]]) -> Iterator[Any]:
        """A server-streaming handler's replies; a TideMQError ends the stream (other
        exceptions end it as the transport ends it)."""
        self.admit(method, metadata, context, request)
        yield from behavior(request, context)

    async def run_stream_async(self, method: str, metadata: Metadata | None, context: Any,
                               request: Any, behavior: Callable[[Any, Any], AsyncIterator[Any]],
                               ) -> AsyncIterator[Any]:
        self.admit(method, metadata, context, request)
        async for reply in behavior(request, context):
            yield reply


def admitted(pipeline: CallPipeline, method: str, metadata: Metadata | None, kind: str,
             behavior: Callable[[Any, Any], Any],
             abort: Callable[[Any, errors.TideMQError], None]) -> Callable[[Any, Any], Any]:
    """A blocking handler of streamed requests (`kind`: stream_unary or stream_stream),
    admitted on the method's needs alone before it runs; `abort(context, exc)` answers a
    refusal (and raises). A streaming reply stays a generator function: grpc.aio tells how to
    run a plain handler by that."""
    def admit(context: Any) -> None:
        try:
            pipeline.admit(method, metadata, context, None)
        except errors.TideMQError as exc:
            abort(context, exc)

    if kind.endswith("stream"):
        def stream(request_iterator: Any, context: Any) -> Iterator[Any]:
            admit(context)
            yield from behavior(request_iterator, context)
        return stream

    def unary(request_iterator: Any, context: Any) -> Any:
        admit(context)
        return behavior(request_iterator, context)
    return unary
