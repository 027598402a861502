"""The client side of the wire protocol: one multiplexed connection to a broker's wire port.

This module only carries frames. Whether a call takes it or gRPC, which port a broker offers,
deadlines, breakers and retries are the broker channel's (tidemq.common.channel), the one place
that chooses. A call already on a lost connection fails SERVICE_UNAVAILABLE, as a gRPC call on
a lost channel does (its outcome unknown); one never written fails `NotSent`, which the channel
sends over gRPC instead.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from tidemq.common import errors
from tidemq.common.wire import frames
from tidemq.common.wire.methods import Method

CONNECT_TIMEOUT_S = 1.0  # TCP connect + the server's greeting
READ_BUFFER = 1 << 16


class NotSent(errors.ServiceUnavailable):
    """The request never left: the connection was closed before it was written."""


class WireCall(Future):
    """One call's answer (a concurrent.futures.Future of the response message)."""

    def __init__(self, connection: WireConnection, request_id: int, method: Method,
                 deadline: float) -> None:
        super().__init__()
        self.connection, self.request_id, self.method = connection, request_id, method
        self.deadline = deadline  # monotonic; past it, the sweeper fails the call

    def add_done_callback(self, fn: Callable[[Future], object]) -> None:
        """`fn` runs on the process's wire callback thread, never on a connection's reader:
        a callback that sends (an ack lane starting its next call) must not block the thread
        that reads the answers its send waits for."""
        super().add_done_callback(lambda done: _run_callback(fn, done))

    def cancel(self) -> bool:
        """Stop waiting for the answer and cancel the call on the broker, as a gRPC client's
        cancellation does (what it already did stays done)."""
        self.connection._cancel(self.request_id)
        return super().cancel()

    def answer(self, timeout_s: float) -> Any:
        """The response, or the TideMQError the call ended with (DeadlineExceeded when no
        answer came within `timeout_s`)."""
        try:
            return self.result(timeout_s)
        except FutureTimeout:
            pass
        self.connection._cancel(self.request_id)  # the broker stops it (a long poll ends)
        failure = errors.DeadlineExceeded(
            f"{self.method.name} on {self.connection.addr} (wire): no answer within "
            f"{timeout_s:.3g} s")
        try:
            self.set_exception(failure)  # what its trace span and callbacks see too
        except InvalidStateError:
            return self.result(0)  # answered meanwhile
        raise failure


_callbacks: ThreadPoolExecutor | None = None
_callbacks_pid = 0
_callbacks_lock = threading.Lock()


def _run_callback(fn: Callable[[Future], object], done: Future) -> None:
    global _callbacks, _callbacks_pid
    with _callbacks_lock:
        if _callbacks is None or _callbacks_pid != os.getpid():  # none yet, or forked
            _callbacks = ThreadPoolExecutor(1, thread_name_prefix="tidemq-wire-callbacks")
            _callbacks_pid = os.getpid()
        pool = _callbacks
    pool.submit(fn, done)


def _send(sock: socket.socket, *parts: bytes) -> None:
    """The parts in one vectored write (a large payload is not copied behind the head first),
    continuing after a partial send."""
    sent = sock.sendmsg(parts)
    for part in parts:
        if sent >= len(part):
            sent -= len(part)
            continue
        with memoryview(part) as view:
            sock.sendall(view[sent:])
        sent = 0


class _Plain:
    """A plaintext connection's reads and writes: the socket's own."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.read = sock.makefile("rb", buffering=READ_BUFFER).read  # exactly n, or at EOF

    def write(self, parts: Sequence[bytes]) -> None:
        _send(self._sock, *parts)


class _Tls:
    """TLS over the blocking socket through memory BIOs, so the reader thread and the writers
    never use the SSL object at once: OpenSSL forbids it, and CPython's SSLSocket would do it
    (a recv in one thread, a send in another). The SSL object is touched only under `_lock`;
    the socket is read by the reader thread alone and written by one writer at a time (the
    connection's write lock), each writer sending the records it made before the next may
    make any, so records leave in the order they were sealed."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_name: str) -> None:
        self._sock = sock
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing,
                                     server_hostname=server_name)
        self._lock = threading.Lock()
        self._plain = bytearray()
        while True:  # the handshake, under the socket's connect timeout
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(READ_BUFFER)
                if not data:
                    raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "the peer closed the connection "
                                          "during the TLS handshake") from None
                self._incoming.write(data)
        self._flush()

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self._sock.sendall(data)

    def write(self, parts: Sequence[bytes]) -> None:
        with self._lock:
            for part in parts:
                self._ssl.write(part)
            sealed = self._outgoing.read()  # with anything a read left (post-handshake)
        self._sock.sendall(sealed)

    def _fill(self) -> bool:
        """Decrypt what the next read of the socket brings; False at the end of the stream."""
        data = self._sock.recv(READ_BUFFER)
        with self._lock:
            if data:
                self._incoming.write(data)
            else:
                self._incoming.write_eof()
            try:
                while True:
                    chunk = self._ssl.read(READ_BUFFER)
                    if not chunk:
                        return False  # the peer's close_notify
                    self._plain += chunk
            except ssl.SSLWantReadError:
                return bool(data)
            except ssl.SSLEOFError:
                return False

    def read(self, size: int) -> bytes:
        """`size` bytes, or fewer at the end of the stream."""
        while len(self._plain) < size and self._fill():
            pass
        taken = bytes(self._plain[:size])
        del self._plain[:size]
        return taken


def _receive(channel: Any, size: int) -> bytes:
    received = b""
    while len(received) < size:
        chunk = channel.read(size - len(received))
        if not chunk:
            break
        received += chunk
    return received


def tls_failure(addr: str, exc: BaseException) -> str:
    """A sentence for a TLS connection that failed, naming what is probably wrong."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return (f"{addr}: the broker's wire certificate does not verify ({text}): is it signed "
                "by the CA in TIDEMQ_TLS_CA_FILE / tls_ca_file, and does it name the host "
                "dialled (else set TIDEMQ_TLS_SERVER_NAME / tls_server_name)?")
    if "certificate required" in text.lower() or "alert" in text.lower():
        return (f"{addr}: the broker refused this client's certificate ({text}): it requires "
                "one its CA signed (TIDEMQ_TLS_CERT_FILE and TIDEMQ_TLS_KEY_FILE, or "
                "tls_cert_file and tls_key_file)")
    return (f"{addr}: the TLS handshake failed ({text}): does this port serve TLS? (a broker "
            "serves TLS on its wire port exactly when it serves TLS on gRPC)")


class WireConnection:
    """One TCP connection to a broker's wire port; any number of threads call through it at
    once, each answer matched to its call by request id (a reader thread completes them)."""

    def __init__(self, addr: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 tls: ssl.SSLContext | None = None, tls_server_name: str = "") -> None:
        """`tls`: speak TLS (the port serves it), verifying the broker's certificate against
        the context's CA and the name `tls_server_name` (default: the host dialled), and
        presenting the context's certificate to a broker that asks for one."""
        self.addr = addr
        host, _, port = addr.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)),
                                        timeout=connect_timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            try:
                channel: Any = _Tls(sock, tls, tls_server_name or host.strip("[]")) if tls \
                    else _Plain(sock)
            except (ssl.SSLError, ConnectionResetError) as exc:
                raise ConnectionError(tls_failure(addr, exc)) from None
            try:
                channel.write((frames.HELLO,))
                greeting = _receive(channel, len(frames.HELLO) + frames.NAME_LENGTH.size)
            except ssl.SSLError as exc:  # a mutual-TLS refusal comes with the first read
                raise ConnectionError(tls_failure(addr, exc)) from None
            except (ConnectionResetError, BrokenPipeError):
                if not tls:
                    raise
                greeting = b""  # a TLS 1.3 server refuses a client's certificate after the
                # client's handshake is done: an alert, or just a reset
            if len(greeting) < len(frames.HELLO) + frames.NAME_LENGTH.size or \
                    not greeting.startswith(frames.HELLO):
                raise ConnectionError(self._not_wire(addr, greeting, tls is not None))
            (length,) = frames.NAME_LENGTH.unpack_from(greeting, len(frames.HELLO))
            self.server_name = _receive(channel, length).decode(errors="replace")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.tls = tls is not None
        self._channel = channel
        self._reader = channel
        self._write_lock = threading.Lock()
        self._pending: dict[int, WireCall] = {}
        self._ids = itertools.count(1)
        self._closed: errors.ServiceUnavailable | None = None
        self._pid = os.getpid()  # a forked child has the socket but not the reader thread
        threading.Thread(target=self._read_answers, name=f"tidemq-wire-{addr}",
                         daemon=True).start()
        _sweeper.watch(self)

    @staticmethod
    def _not_wire(addr: str, greeting: bytes, tls: bool) -> str:
        if not tls and (not greeting or greeting[:1] in (b"\x15", b"\x16")):
            # a TLS server answers the plaintext greeting with an alert, or just closes
            return (f"{addr} did not answer the plaintext greeting (greeting {greeting[:16]!r}): "
                    "the port probably serves TLS, so this client needs the CA that signs the "
                    "broker (TIDEMQ_TLS_CA_FILE or the tls_ca_file setting)")
        if tls and not greeting:  # the handshake passed, then the broker hung up
            return (f"{addr} closed the TLS connection before greeting: it probably requires a "
                    "client certificate its CA signed (TIDEMQ_TLS_CERT_FILE and "
                    "TIDEMQ_TLS_KEY_FILE, or tls_cert_file and tls_key_file)")
        return f"{addr} did not answer as a TideMQ wire endpoint (greeting {greeting[:16]!r})"

    @property
    def alive(self) -> bool:
        if self._pid != os.getpid():  # inherited over a fork: the parent's, not ours to use
            self._closed = errors.ServiceUnavailable(f"wire connection to {self.addr} belongs "
                                                     "to the parent process")
            self._pid = os.getpid()
            self._sock.close()  # this process's descriptor only: no shutdown of the parent's
        return self._closed is None

    def start(self, method: Method, request: Any, timeout_s: float,
              metadata: Sequence[tuple[str, str]] = ()) -> WireCall:
        """`request`: the protobuf message, or its encoding as a sequence of byte strings
        written one after another without being joined (a batch of records uncopied)."""
        parts = ((request.SerializeToString(),) if hasattr(request, "SerializeToString")
                 else tuple(request))
        with self._write_lock:
            if not self.alive:
                raise NotSent(self._closed.message)
            request_id = next(self._ids) & 0xFFFFFFFF
            call = self._pending[request_id] = WireCall(self, request_id, method,
                                                        time.monotonic() + timeout_s)
            try:
                self._channel.write((frames.request_head(
                    request_id, method.number, max(1, int(timeout_s * 1000)), metadata,
                    sum(len(part) for part in parts)), *parts))
            except OSError as exc:  # (ssl.SSLError too) a frame not wholly written is never served
                self._pending.pop(request_id, None)
                self._close_now(f"write failed: {exc}")
                raise NotSent(f"{method.name} to {self.addr} not sent: {exc}") from None
        return call

    def call(self, method: Method, request: Any, timeout_s: float,
             metadata: Sequence[tuple[str, str]] = ()) -> Any:
        return self.start(method, request, timeout_s, metadata).answer(timeout_s)

    def close(self) -> None:
        self._close_now("closed by this client")

    def _cancel(self, request_id: int) -> None:
        """Forget the call; tell the broker to cancel it if it may still be running."""
        if self._pending.pop(request_id, None) is None or not self.alive:
            return
        with self._write_lock, contextlib.suppress(OSError):  # a lost connection cancels all
            self._channel.write((frames.request(request_id, frames.CANCEL, 0, (), b""),))

    def _expire(self, now: float) -> None:
        """Fail the calls whose deadline passed without an answer (a started call may be
        waited on without a timeout: its future must still end, as a gRPC future does)."""
        for request_id, call in list(self._pending.items()):
            if call.deadline <= now and request_id in self._pending:
                self._cancel(request_id)
                with contextlib.suppress(InvalidStateError):
                    call.set_exception(errors.DeadlineExceeded(
                        f"{call.method.name} on {self.addr} (wire): no answer before its "
                        "deadline"))

    def _read_answers(self) -> None:
        reader, reason = self._reader, "closed by the broker"
        try:
            while True:
                head = reader.read(4)
                if len(head) < 4:
                    break
                (length,) = frames.LENGTH.unpack(head)
                if length > frames.MAX_FRAME:
                    reason = f"answer frame of {length} bytes is over the limit"
                    break
                body = reader.read(length)
                if len(body) < length:
                    break
                request_id, answer = frames.parse_response(body)
                call = self._pending.pop(request_id, None)
                if call is None:
                    continue  # its caller stopped waiting
                try:
                    if isinstance(answer, errors.TideMQError):
                        call.set_exception(answer)
                    else:
                        call.set_result(call.method.response.FromString(answer))
                except InvalidStateError:
                    pass  # cancelled meanwhile
        except (OSError, ValueError, frames.FrameError) as exc:
            reason = str(exc) or type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - an answer that does not decode
            reason = f"{type(exc).__name__}: {exc}"
        self._close_now(reason)

    def _close_now(self, reason: str) -> None:
        if self._closed is not None:
            return
        self._closed = errors.ServiceUnavailable(f"wire connection to {self.addr} lost: "
                                                 f"{reason}")
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        pending, self._pending = self._pending, {}
        for call in pending.values():
            with contextlib.suppress(InvalidStateError):
                call.set_exception(self._closed)


class _Sweeper:
    """One thread for the process that ends overdue calls of every open connection."""

    INTERVAL_S = 0.1

    def __init__(self) -> None:
        self._connections: weakref.WeakSet[WireConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's thread is not here, nor are its connections ours."""
        self._lock = threading.Lock()
        self._connections = weakref.WeakSet()
        self._thread = None

    def watch(self, connection: WireConnection) -> None:
        with self._lock:
            self._connections.add(connection)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tidemq-wire-deadlines",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.INTERVAL_S)
            now = time.monotonic()
            with self._lock:
                connections = [c for c in self._connections if c.alive]
            for connection in connections:
                connection._expire(now)


_sweeper = _Sweeper()


def _after_fork() -> None:
    """In a forked child: no thread of the parent's is here, and a lock it held stays held."""
    global _callbacks_lock
    _sweeper.forget_after_fork()
    _callbacks_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
