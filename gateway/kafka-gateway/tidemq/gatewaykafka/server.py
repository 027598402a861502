"""The Kafka listener: asyncio TCP, one request at a time per connection (Kafka's ordering).

A frame is a signed 4-byte size and that many bytes. A size that is negative, smaller than a
request header or larger than `max_request_size`, a frame cut short, or a request that does
not decode closes the connection (logged, counted in tidemq_gateway_kafka_bad_frames_total),
as Kafka's broker does; nothing a client sends can stop the listener.

One server may listen on several ports, each a named listener (nodes.py: internal, and an
external one for clients outside the network the internal address is in): a connection is
served the same on every listener, except the addresses Metadata and FindCoordinator give it,
which are those of the listener it came in on, and its security protocol: each listener is
started with its own KafkaSecurity (SASL or not) and TLS or not (Kafka's
listener.security.protocol.map), and a connection is served by the rules of its listener.

On a TLS listener the server serves TLS only (rotated certificate files are loaded for new
connections, checked at most once a second); with security on (security.py) a connection
authenticates with SASL first, or is ANONYMOUS on a listener without SASL, and every request
is authorized against the ACL.

Each request is served in a SERVER span of its own (spans.py).

Client quotas (docs/quotas.md, docs/kafka.md): each request's broker calls are made on behalf
of the Kafka client (its header's client_id and its SASL user), so the brokers charge that
client, not the gateway. The longest throttle time they answer goes into the Kafka answer's
throttle_time_ms, and the connection is not read again until it has passed (Kafka's broker
mutes a throttled client's channel the same way, KIP-219): a client that ignores the field is
slowed all the same, and the gateway's other clients are not.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import time

from opentelemetry.trace import SpanKind, Status, StatusCode
from tidemq.common.logs import get_logger
from tidemq.common.quotas import on_behalf_of
from tidemq.common.tls import ReloadingContext
from tidemq.gatewaykafka import codec, metrics, spans
from tidemq.gatewaykafka.handlers import Connection, KafkaApis
from tidemq.gatewaykafka.nodes import INTERNAL, LISTENERS
from tidemq.gatewaykafka.security import KafkaSecurity

log = get_logger(__name__)

SIZE = struct.Struct(">i")


class KafkaServer:
    def __init__(self, apis: KafkaApis, *, max_request_size: int,
                 security: KafkaSecurity | None = None,
                 tls: ReloadingContext | None = None) -> None:
        self.apis = apis
        self.max_request_size = max_request_size
        self.security = security or KafkaSecurity(None)
        self.tls = tls
        self._tls_checked = 0.0
        self._servers: dict[str, asyncio.base_events.Server] = {}
        self._connections: set[asyncio.Task] = set()

    async def start(self, host: str, port: int, listener: str = INTERNAL, *,
                    security: KafkaSecurity | None = None, tls: bool | None = None) -> int:
        """Listen on `port` (0: a free one) as `listener`, with `security` (default: the
        server's) and TLS or not (default: whether the server has a TLS context); the port
        listened on."""
        if listener not in LISTENERS or listener in self._servers:
            raise ValueError(f"listener {listener!r}: one of {LISTENERS}, each started once")
        tls = self.tls is not None if tls is None else tls
        if tls and self.tls is None:
            raise ValueError(f"listener {listener!r}: TLS needs the server's TLS context")
        server = await asyncio.start_server(
            functools.partial(self._serve, listener=listener,
                              security=security or self.security, tls=tls),
            host, port, limit=2 ** 16, reuse_address=True,
            ssl=self.tls.context if tls else None)
        self._servers[listener] = server
        return server.sockets[0].getsockname()[1]

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, let requests in progress finish for up to `grace_s`, then close."""
        for server in self._servers.values():
            server.close()
        if self._connections:
            await asyncio.wait(self._connections, timeout=grace_s)
        for task in self._connections:
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                     listener: str = INTERNAL, security: KafkaSecurity | None = None,
                     tls: bool = False) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        security = security or self.security
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = Connection(peer_host=str(peer[0]), listener=listener)
        security.accepted(conn)
        metrics.CONNECTIONS.inc()
        if tls and time.monotonic() - self._tls_checked >= 1.0:
            self._tls_checked = time.monotonic()
            self.tls.refresh()   # for the connections after this one
        try:
            while True:
                payload = await self._read_frame(reader, peer)
                if payload is None:
                    return
                answer = await self._answer(payload, conn, peer, security)
                if answer is False:
                    return
                if answer:
                    writer.write(answer)
                    await writer.drain()
                if conn.close_after:
                    return
                await self._mute(conn)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            metrics.CONNECTIONS.dec()
            self._connections.discard(task)
            writer.close()

    @staticmethod
    async def _mute(conn: Connection) -> None:
        """Read nothing more from a connection until its throttle time has passed."""
        wait = conn.throttled_until - time.monotonic()
        if wait > 0:
            metrics.MUTED.inc(wait)
            await asyncio.sleep(wait)

    async def _read_frame(self, reader: asyncio.StreamReader, peer) -> bytes | None:
        try:
            head = await reader.readexactly(SIZE.size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self._bad("truncated_size", peer, f"{len(exc.partial)} bytes of a size")
            return None
        (size,) = SIZE.unpack(head)
        if size < codec.MIN_REQUEST_SIZE or size > self.max_request_size:
            reason = "negative_size" if size < 0 else (
                "oversized" if size > self.max_request_size else "undersized")
            self._bad(reason, peer, f"frame size {size}")
            return None
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            self._bad("truncated", peer, f"{len(exc.partial)} of {size} bytes")
            return None

    async def _answer(self, payload: bytes, conn: Connection, peer,
                      security: KafkaSecurity) -> bytes | None | bool:
        """The framed answer, None (no answer: acks=0) or False (close the connection)."""
        frame = codec.peek_header(payload)
        api = codec.API_NAMES.get(frame.api_key, str(frame.api_key))
        if not security.admits(frame.api_key, conn):
            self._bad("unauthenticated", peer, f"{api} before SASL authentication")
            return False
        if frame.api_key in codec.NEW_GROUP_PROTOCOLS:
            return self._refuse_new_group_protocol(frame, api, conn, peer)
        if not codec.supported(frame.api_key, frame.api_version):
            metrics.UNSUPPORTED.labels(str(frame.api_key), str(frame.api_version)).inc()
            answer = codec.unsupported_version_response(frame)
            if answer is None:
                self._bad("unsupported", peer, f"API {frame.api_key} v{frame.api_version}")
                return False
            return answer
        try:
            request = codec.decode_request(frame)
        except codec.FrameError as exc:
            self._bad("undecodable", peer, str(exc))
            return False
        if request.header is not None and request.header.client_id:
            conn.client_id = request.header.client_id
        started = time.perf_counter()
        with spans.tracer.start_as_current_span(
                spans.span_name(api), kind=SpanKind.SERVER,
                attributes=spans.request_attributes(
                    frame.api_key, api, frame.api_version, request, conn.client_id,
                    conn.client_software)) as span:
            try:
                handler = ({17: security.sasl_handshake, 36: security.sasl_authenticate}
                           .get(frame.api_key) or self.apis.table[frame.api_key])
                user = conn.sasl.user.access_key if conn.sasl.user is not None else ""
                with on_behalf_of(conn.client_id, user) as end:
                    fields = await security.call(frame.api_key, request,
                                                      frame.api_version, conn, handler)
                if end.throttle_ms:
                    self._throttled(api, conn, fields, end.throttle_ms)
                if fields is None:
                    metrics.REQUESTS.labels(api, "ok").inc()
                    return None
                answer = codec.encode_response(frame.api_key, frame.api_version,
                                               frame.correlation_id, fields)
            except Exception as exc:
                log.exception("kafka_request_failed", api=api, client=conn.client_id)
                metrics.REQUESTS.labels(api, "failed").inc()
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                return False
            finally:
                metrics.LATENCY.labels(api).observe(time.perf_counter() - started)
            failed = spans.describe_answer(span, fields)
        metrics.REQUESTS.labels(api, "error" if failed else "ok").inc()
        return answer

    @staticmethod
    def _throttled(api: str, conn: Connection, fields: dict | None, throttle_ms: int) -> None:
        """A broker throttled the client: say so in the answer, mute the connection."""
        metrics.THROTTLED.labels(api).inc()
        conn.throttled_until = max(conn.throttled_until,
                                   time.monotonic() + throttle_ms / 1000)
        if fields is not None and "throttle_time_ms" in fields:
            fields["throttle_time_ms"] = max(fields["throttle_time_ms"] or 0, throttle_ms)

    def _refuse_new_group_protocol(self, frame: codec.RequestFrame, api: str, conn: Connection,
                                   peer) -> bytes | bool:
        """A KIP-848 or share-group heartbeat: refused at once, with a sentence naming the
        classic protocol. librdkafka shows a heartbeat's error message to the application only
        for TOPIC_AUTHORIZATION_FAILED (every other code is either retried silently or made
        fatal with the code's own text), so a librdkafka client gets that code; others get
        UNSUPPORTED_VERSION, which the Java client turns into its own 'use classic' error."""
        librdkafka = "rdkafka" in conn.client_software.lower()
        code = codec.ERRORS["TOPIC_AUTHORIZATION_FAILED" if librdkafka else "UNSUPPORTED_VERSION"]
        answer = codec.new_group_protocol_refusal(frame, code)
        if answer is None:
            self._bad("unsupported", peer, f"API {frame.api_key} v{frame.api_version}")
            return False
        metrics.REQUESTS.labels(api, "error").inc()
        log.info("kafka_group_protocol_refused", api=api, client=conn.client_id,
                 software=conn.client_software)
        return answer

    @staticmethod
    def _bad(reason: str, peer, detail: str) -> None:
        metrics.BAD_FRAMES.labels(reason).inc()
        log.warning("kafka_connection_closed", reason=reason, peer=str(peer), detail=detail)
