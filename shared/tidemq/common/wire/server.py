"""The broker side of the wire protocol: an asyncio protocol on the gRPC server's event loop.

Each request becomes a task that runs the servicer's own `async def` method through the
service's call pipeline (tidemq.common.pipeline: the same authentication, ACL check and error
mapping as its gRPC calls), so a long poll
parks as a coroutine here as it does under grpc.aio, and answers leave in the order they are
ready. A connection that closes cancels its calls (a consumer gone ends its long poll). A
connection with `MAX_IN_FLIGHT` calls running, or whose answers the peer does not read, stops
being read until it drains: a fast sender cannot queue unbounded work or memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.pipeline import CallPipeline
from tidemq.common.tls import ReloadingContext
from tidemq.common.wire import frames, spans
from tidemq.common.wire.methods import Method

log = get_logger(__name__)

MAX_IN_FLIGHT = 4096  # calls of one connection running at once before it is read no more
Handler = Callable[[Any, Any], Awaitable[Any]]


class CallContext:
    """What the servicer's methods ask of their gRPC context."""

    __slots__ = ("_deadline", "_peer")

    def __init__(self, deadline: float | None, peer: str) -> None:
        self._deadline, self._peer = deadline, peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def peer(self) -> str:
        return self._peer


class WireServer:
    """Serves `handlers` (method number → (Method, async handler)) on `loop`, which runs in
    another thread: start and stop are called from synchronous code."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 handlers: dict[int, tuple[Method, Handler]], *, name: str,
                 pipeline: CallPipeline | None = None) -> None:
        """`name`: what the greeting tells clients this server is (the broker's advertised
        gRPC address, which clients know it by). `pipeline`: the service's call pipeline
        (authenticate → authorize → run → map errors), the one its gRPC server uses."""
        self.loop, self.handlers = loop, handlers
        self.pipeline = pipeline or CallPipeline()
        self.greeting = frames.greeting(name)
        self.port = 0
        self.tls: ReloadingContext | None = None
        self._refresh_at = 0.0
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()

    def _run(self, coroutine, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def start(self, host: str, port: int, tls: ReloadingContext | None = None) -> int:
        """`tls`: serve TLS with this context (the broker's gRPC certificate; with a client CA,
        mutual TLS: a client without a certificate that CA signed is refused at the handshake).
        Rotated files load for the connections accepted after they changed."""
        self.tls = tls

        async def listen():
            return await self.loop.create_server(
                self._accept, host, port, reuse_address=True,
                ssl=tls.context if tls is not None else None)
        self._server = self._run(listen())
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def _accept(self) -> _Connection:
        tls = self.tls
        if tls is not None and time.monotonic() >= self._refresh_at:  # at most once a second
            self._refresh_at = time.monotonic() + 1.0
            tls.refresh()
        return _Connection(self)

    def stop(self, grace_s: float) -> None:
        """Stop accepting; let running calls finish for up to `grace_s`; close every
        connection (what is still running is cancelled)."""
        if self._server is None:
            return

        async def close():
            self._server.close()
            running = [t for c in self._connections for t in c.tasks.values()]
            if running:
                await asyncio.wait(running, timeout=grace_s)
            for connection in list(self._connections):
                connection.close()
        with contextlib.suppress(TimeoutError, RuntimeError):  # the loop is gone already
            self._run(close(), timeout=grace_s + 5)
        self._server = None


class _Connection(asyncio.Protocol):
    def __init__(self, server: WireServer) -> None:
        self.server = server
        self.tasks: dict[int, asyncio.Task] = {}  # by request id
        self._buffer = bytearray()
        self._greeted = False
        self._paused_reading = False
        self._paused_writing = False
        self._transport: asyncio.Transport | None = None
        self._peer = ""

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        address = transport.get_extra_info("peername") or ("", 0)
        family = "ipv6" if ":" in str(address[0]) else "ipv4"
        host = f"[{address[0]}]" if family == "ipv6" else address[0]
        self._peer = f"{family}:{host}:{address[1]}"
        self.server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._connections.discard(self)
        for task in self.tasks.values():
            task.cancel()

    def pause_writing(self) -> None:
        self._paused_writing = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_writing = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if not self._greeted:
            if len(buffer) < len(frames.HELLO):
                return
            if bytes(buffer[:len(frames.HELLO)]) != frames.HELLO:
                log.warning("wire connection closed: not this protocol's greeting",
                            peer=self._peer)
                self.close()
                return
            self._transport.write(self.server.greeting)
            del buffer[:len(frames.HELLO)]
            self._greeted = True
        position, end = 0, len(buffer)
        while end - position >= 4:
            (length,) = frames.LENGTH.unpack_from(buffer, position)
            if length > frames.MAX_FRAME:
                log.warning("wire connection closed: frame over the limit", peer=self._peer,
                            length=length, limit=frames.MAX_FRAME)
                self.close()
                return
            if end - position - 4 < length:
                break
            with memoryview(buffer) as view:  # one copy of the frame, not two
                body = bytes(view[position + 4:position + 4 + length])
            position += 4 + length
            try:
                self._dispatch(body)
            except frames.FrameError as exc:
                log.warning("wire connection closed", peer=self._peer, error=str(exc))
                self.close()
                return
        if position:
            del buffer[:position]

    # -- calls
    def _dispatch(self, body: bytes) -> None:
        request_id, number, timeout_ms, metadata, payload = frames.parse_request(body)
        if number == frames.CANCEL:
            running = self.tasks.get(request_id)
            if running is not None:
                running.cancel()
            return
        entry = self.server.handlers.get(number)
        if entry is None:
            self._write(frames.error(request_id, errors.InvalidArgument(
                f"method {number} is not served over the wire protocol here",
                code="UNKNOWN_METHOD")))
            return
        method, handler = entry
        try:
            request = method.request.FromString(payload)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
            self._write(frames.error(request_id, errors.InvalidArgument(
                f"{method.name}: the request is not a {method.request.__name__}: {exc}")))
            return
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        serve = self._serve_traced if spans.server_calls_traced() else self._serve
        task = self.server.loop.create_task(
            serve(request_id, method, handler, request, metadata, deadline))
        self.tasks[request_id] = task
        task.add_done_callback(lambda _: self._finished(request_id))
        self._update_reading()

    def _finished(self, request_id: int) -> None:
        self.tasks.pop(request_id, None)
        self._update_reading()

    async def _serve(self, request_id: int, method: Method, handler: Handler, request: Any,
                     metadata: list[tuple[str, str]], deadline: float | None,
                     span: Any = None) -> None:
        try:
            reply = await self.server.pipeline.run_async(
                method.full_name, metadata, CallContext(deadline, self._peer), request, handler)
            payload = reply.SerializeToString()
            answer: tuple[bytes, ...] = (frames.ok_head(request_id, len(payload)), payload)
        except errors.TideMQError as exc:  # the pipeline maps every failure to one
            if span is not None:
                spans.answered_with(span, exc)
            answer = (frames.error(request_id, exc),)
        self._write(*answer)

    async def _serve_traced(self, request_id: int, method: Method, handler: Handler,
                            request: Any, metadata: list[tuple[str, str]],
                            deadline: float | None) -> None:
        """`_serve` inside the SERVER span gRPC's instrumentation would make."""
        with spans.server_span(method, metadata, self._peer) as span:
            await self._serve(request_id, method, handler, request, metadata, deadline, span)

    def _write(self, *parts: bytes) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.writelines(parts)  # one vectored write: the payload is not copied

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        pause = self._paused_writing or len(self.tasks) >= MAX_IN_FLIGHT
        if pause != self._paused_reading:
            self._paused_reading = pause
            (transport.pause_reading if pause else transport.resume_reading)()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
