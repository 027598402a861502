"""The wire protocol's TLS and trace spans, against an in-process WireServer on its own event
loop: TLS with the gRPC certificates (the server name checked as gRPC checks it), mutual TLS
(a client without a certificate, or with another CA's, refused with a sentence naming what to
set), clear errors for a plaintext client at a TLS port and the reverse, many threads sharing
one TLS connection with large frames; and the spans a traced call makes: a CLIENT span and a
SERVER span under it named and attributed as gRPC's instrumentation names them, the server
span current while the handler runs, failures carrying their gRPC status."""

from __future__ import annotations

import asyncio
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tidemq.common import errors, rpc
from tidemq.common.channel import link, ports
from tidemq.common.tls import ReloadingContext
from tidemq.common.wire import client as wire
from tidemq.common.wire import spans
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.common.wire.server import WireServer
from tidemq.v1 import broker_pb2

from tests.support.pki import new_pki
from tests.support.processes import wait_until

SEND, PULL = BROKER_METHODS["Send"], BROKER_METHODS["Pull"]
NAME = "127.0.0.1:1"  # the broker's "gRPC address" the greeting names


async def _send(request: broker_pb2.SendRequest, context) -> broker_pb2.SendResponse:
    trace.get_current_span().set_attribute("tidemq.queue_offset", 7)  # as the servicer does
    if request.topic == "refused":
        raise errors.PermissionDenied("no PUB on topic 'refused'")
    if request.topic == "broken":
        raise RuntimeError("boom")
    return broker_pb2.SendResponse(queue_id=request.queue_id)


async def _pull(request: broker_pb2.PullRequest, context) -> broker_pb2.PullResponse:
    return broker_pb2.PullResponse(records=b"r" * request.max_messages)  # echoes a size


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    folder = new_pki(tmp_path_factory.mktemp("pki"), "tidemq", "client")
    new_pki(folder / "other", "client")  # another CA and a client certificate it signed
    return folder


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def serve(loop, tls: ReloadingContext | None) -> WireServer:
    server = WireServer(loop, {SEND.number: (SEND, _send), PULL.number: (PULL, _pull)},
                        name=NAME)
    server.start("127.0.0.1", 0, tls)
    return server


def client_context(pki: Path, cert: str = "") -> ssl.SSLContext:
    folder = pki / "other" if cert == "other" else pki
    return link.client_context(rpc.ClientSecurity(
        ca_file=str(pki / "ca.pem"),
        cert_file=str(folder / "client.pem") if cert else "",
        key_file=str(folder / "client-key.pem") if cert else ""))


def server_tls(pki: Path, mutual: bool = False) -> ReloadingContext:
    return ReloadingContext(True, str(pki / "tidemq.pem"), str(pki / "tidemq-key.pem"),
                            str(pki / "ca.pem") if mutual else "")


@pytest.fixture(scope="module")
def tls_server(loop, pki):
    server = serve(loop, server_tls(pki))
    yield server
    server.stop(1)


@pytest.fixture(scope="module")
def mutual_server(loop, pki):
    server = serve(loop, server_tls(pki, mutual=True))
    yield server
    server.stop(1)


@pytest.fixture(scope="module")
def plain_server(loop):
    server = serve(loop, None)
    yield server
    server.stop(1)


def addr(server: WireServer) -> str:
    return f"127.0.0.1:{server.port}"


def test_tls_calls_from_many_threads_with_large_frames(tls_server, pki):
    connection = wire.WireConnection(addr(tls_server), tls=client_context(pki))
    try:
        assert connection.tls and connection.server_name == NAME

        def call(n: int) -> None:
            size = (n % 5) * 70_000 + n  # up to ~280 KB answers, many TLS records each
            answer = connection.call(PULL, broker_pb2.PullRequest(max_messages=size), 10)
            assert answer.records == b"r" * size
            sent = connection.call(SEND, broker_pb2.SendRequest(
                topic="t", queue_id=n, records=b"x" * size), 10)
            assert sent.queue_id == n

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(call, range(40)))
        assert connection.alive
    finally:
        connection.close()


def test_the_server_name_is_checked_as_grpc_checks_it(tls_server, pki):
    with pytest.raises(ConnectionError, match="does not verify.*TIDEMQ_TLS_SERVER_NAME"):
        wire.WireConnection(addr(tls_server), tls=client_context(pki),
                            tls_server_name="elsewhere.example")
    named = wire.WireConnection(addr(tls_server), tls=client_context(pki),
                                tls_server_name="tidemq")  # a name the certificate lists
    named.close()
    strange = new_pki(pki.parent / "strange", "tidemq")  # a CA this client does not trust
    with pytest.raises(ConnectionError, match="does not verify"):
        wire.WireConnection(addr(tls_server), tls=link.client_context(
            rpc.ClientSecurity(ca_file=str(strange / "ca.pem"))))


def test_a_plaintext_client_at_a_tls_port_is_told_to_use_tls(tls_server):
    with pytest.raises(OSError, match="serves TLS.*TIDEMQ_TLS_CA_FILE"):
        wire.WireConnection(addr(tls_server))


def test_a_tls_client_at_a_plaintext_port_fails_its_handshake(plain_server, pki):
    with pytest.raises(ConnectionError, match="handshake failed.*serve TLS"):
        wire.WireConnection(addr(plain_server), tls=client_context(pki))


def test_mutual_tls_takes_only_certificates_of_its_ca(mutual_server, pki):
    with pytest.raises(ConnectionError, match="TIDEMQ_TLS_CERT_FILE"):
        wire.WireConnection(addr(mutual_server), tls=client_context(pki))
    with pytest.raises(ConnectionError, match="TIDEMQ_TLS_CERT_FILE"):
        wire.WireConnection(addr(mutual_server), tls=client_context(pki, "other"))
    connection = wire.WireConnection(addr(mutual_server), tls=client_context(pki, "client"))
    try:
        assert connection.call(SEND, broker_pb2.SendRequest(topic="t", queue_id=3),
                               10).queue_id == 3
    finally:
        connection.close()


def test_the_link_speaks_tls_only_to_a_tls_port(tls_server, plain_server, pki):
    security = rpc.ClientSecurity(ca_file=str(pki / "ca.pem"))
    request = broker_pb2.SendRequest(topic="t", queue_id=5)
    to_tls = link.WireLink(NAME, security=security,
                           discover=lambda _: ports.WirePort(tls_server.port, True))
    try:
        assert to_tls.call("Send", request, 10).queue_id == 5
    finally:
        to_tls.close()
    # a plaintext port for a client that trusts a CA: never a downgrade (gRPC takes the call)
    downgrade = link.WireLink(NAME, security=security,
                              discover=lambda _: ports.WirePort(plain_server.port, False))
    assert downgrade.call("Send", request, 10) is None
    # a TLS port and a client without a CA: gRPC, which says what to set
    untrusting = link.WireLink(NAME, discover=lambda _: ports.WirePort(tls_server.port, True))
    assert untrusting.call("Send", request, 10) is None


@pytest.fixture
def recorded(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(spans, "_tracer", provider.get_tracer("tidemq.common.wire"))
    monkeypatch.setattr(spans, "client_calls_traced", lambda: True)
    monkeypatch.setattr(spans, "server_calls_traced", lambda: True)
    yield provider.get_tracer("test"), exporter


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_a_traced_call_makes_grpcs_client_and_server_spans(recorded, tls, tls_server,
                                                           plain_server, pki):
    tracer, exporter = recorded
    server = tls_server if tls else plain_server
    endpoint = link.WireLink(NAME, security=rpc.ClientSecurity(ca_file=str(pki / "ca.pem"))
                             if tls else None,
                             discover=lambda _: ports.WirePort(server.port, tls))
    try:
        with tracer.start_as_current_span("publish") as parent:
            endpoint.call("Send", broker_pb2.SendRequest(topic="t"), 10)
            with pytest.raises(errors.PermissionDenied):
                endpoint.call("Send", broker_pb2.SendRequest(topic="refused"), 10)
            with pytest.raises(errors.Internal):
                endpoint.call("Send", broker_pb2.SendRequest(topic="broken"), 10)
    finally:
        endpoint.close()

    def finished():
        found = [s for s in exporter.get_finished_spans() if s.name != "publish"]
        return found if len(found) == 6 else None

    found = wait_until(finished, 10, message="six spans (client and server, three calls)")
    clients = [s for s in found if s.kind == trace.SpanKind.CLIENT]
    servers = [s for s in found if s.kind == trace.SpanKind.SERVER]
    assert len(clients) == len(servers) == 3
    name = "/tidemq.v1.BrokerService/Send"
    expected = {"rpc.system": "grpc", "rpc.service": "tidemq.v1.BrokerService",
                "rpc.method": "Send"}
    by_parent = {s.parent.span_id: s for s in servers}
    for client, status in zip(clients, (0, 7, 13), strict=True):
        assert client.name == name and client.parent.span_id == parent.get_span_context().span_id
        assert {**expected, "rpc.grpc.status_code": status}.items() <= client.attributes.items()
        assert client.status.is_ok == (status == 0)
        server = by_parent[client.context.span_id]  # the server span is the client's child
        assert server.name == name and server.context.trace_id == client.context.trace_id
        assert {**expected, "rpc.grpc.status_code": status, "rpc.user_agent": "tidemq-wire/1",
                "net.peer.ip": "127.0.0.1", "net.peer.name": "localhost",
                "tidemq.queue_offset": 7}.items() <= server.attributes.items()
        assert "net.peer.port" in server.attributes
    # as gRPC's server instrumentation: a refusal is an answer (status unset), INTERNAL an error
    assert [s.status.status_code.name for s in servers] == ["UNSET", "UNSET", "ERROR"]


def test_an_untraced_process_sends_no_trace_context(plain_server, monkeypatch):
    seen = []
    real = wire.WireConnection.start

    def start(self, method, request, timeout_s, metadata=()):
        seen.append(dict(metadata))
        return real(self, method, request, timeout_s, metadata)

    monkeypatch.setattr(wire.WireConnection, "start", start)
    endpoint = link.WireLink(NAME, discover=lambda _: ports.WirePort(plain_server.port))
    try:
        endpoint.call("Send", broker_pb2.SendRequest(topic="t"), 10)
    finally:
        endpoint.close()
    assert seen == [{}]
