"""The auth interceptors and TLS over a real gRPC server on loopback: the threaded runtime and
the grpc.aio one (plain and coroutine handlers). Each refusal carries its status, its
`tidemq-code` and a sentence; the handler never runs for a refused call."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tidemq.common import errors
from tidemq.common.auth.acl import AclTable, Rule, User
from tidemq.common.auth.guard import StaticAcl
from tidemq.common.auth.signature import Credentials, signed_metadata
from tidemq.common.rpc import ChannelPool, ClientSecurity, RpcClient, open_channel
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import ServiceSettings
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from deploy import certs
from tests.support.pki import new_pki, rotate

ALICE = Credentials("alice", "alice-secret")
ACL = AclTable({"alice": User("alice", "alice-secret")},
               (Rule.create("r1", "alice", "topic:orders", ["PUB"]),))


class RecordingBroker(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self) -> None:
        self.sent: list[str] = []

    def Send(self, request, context):
        self.sent.append(request.topic)
        return broker_pb2.SendResponse(broker_name="b")


class AsyncRecordingBroker(RecordingBroker):
    async def Send(self, request, context):  # noqa: N802 - gRPC method name
        return RecordingBroker.Send(self, request, context)


def start_runtime(kind: str, **settings) -> tuple[ServiceRuntime, RecordingBroker]:
    rt = ServiceRuntime("authtest", ServiceSettings(metrics_port=-1, shutdown_grace_s=0,
                                                    **settings),
                        tracing=False, aio=kind.startswith("aio"), acl=StaticAcl(ACL))
    servicer = AsyncRecordingBroker() if kind == "aio-coroutine" else RecordingBroker()
    rt.add(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer)
    rt.start()
    return rt, servicer


@pytest.fixture(params=["threaded", "aio-plain", "aio-coroutine"])
def secured(request):
    rt, servicer = start_runtime(request.param, auth_enabled=True)
    yield rt, servicer
    rt.stop()


def send(port: int, topic: str, metadata=(), security: ClientSecurity | None = None):
    with open_channel(f"127.0.0.1:{port}", security or ClientSecurity()) as channel:
        try:
            return broker_pb2_grpc.BrokerServiceStub(channel).Send(
                broker_pb2.SendRequest(topic=topic), metadata=metadata, timeout=5)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None


def test_signed_and_allowed_call_runs(secured):
    rt, servicer = secured
    assert send(rt.port, "orders", security=ClientSecurity(ALICE)).broker_name == "b"
    assert servicer.sent == ["orders"]


@pytest.mark.parametrize(("metadata", "sentence"), [
    ((), "no credentials"),
    (signed_metadata(Credentials("alice", "nope")), "does not match"),
    (signed_metadata(ALICE, datetime.now(UTC) - timedelta(hours=1)), "allowed skew"),
])
def test_bad_credentials_get_unauthenticated(secured, metadata, sentence):
    rt, servicer = secured
    with pytest.raises(errors.Unauthenticated, match=sentence) as caught:
        send(rt.port, "orders", metadata)
    assert caught.value.code == "UNAUTHENTICATED"
    assert servicer.sent == []


def test_missing_permission_names_resource_and_action(secured):
    rt, servicer = secured
    with pytest.raises(errors.PermissionDenied, match="PUB on topic 'payments'") as caught:
        send(rt.port, "payments", security=ClientSecurity(ALICE))
    assert caught.value.code == "PERMISSION_DENIED"
    assert servicer.sent == []


def test_health_needs_no_credentials(secured):
    rt, _ = secured
    with grpc.insecure_channel(f"127.0.0.1:{rt.port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def pki(tmp_path: Path):
    ca = certs.create_ca(tmp_path)
    certs.issue(tmp_path, "broker", ca)
    return tmp_path


@pytest.mark.parametrize("kind", ["threaded", "aio-coroutine"])
def test_tls_client_with_the_ca_works_and_plaintext_fails_cleanly(pki, kind):
    rt, _ = start_runtime(kind, tls_cert_file=str(pki / "broker.pem"),
                          tls_key_file=str(pki / "broker-key.pem"))
    try:
        assert send(rt.port, "orders",
                    security=ClientSecurity(ca_file=str(pki / "ca.pem"))).broker_name == "b"
        with pytest.raises(errors.ServiceUnavailable):
            send(rt.port, "orders")
        plaintext = RpcClient(f"127.0.0.1:{rt.port}", broker_pb2_grpc.BrokerServiceStub,
                              pool=ChannelPool(), retries=0)
        with pytest.raises(errors.ServiceUnavailable, match="serves TLS, give this client"):
            plaintext.call("Send", broker_pb2.SendRequest(topic="orders"), timeout=5)
    finally:
        rt.stop()


def test_certificate_reloads_when_the_files_change(pki, tmp_path):
    rt, _ = start_runtime("threaded", tls_cert_file=str(pki / "broker.pem"),
                          tls_key_file=str(pki / "broker-key.pem"))
    try:
        old_ca = tmp_path / "old-ca.pem"
        old_ca.write_bytes((pki / "ca.pem").read_bytes())
        rotated = tmp_path / "rotated"
        new_ca = certs.create_ca(rotated)
        certs.issue(rotated, "broker", new_ca)
        for name in ("broker-key.pem", "broker.pem"):
            os.replace(rotated / name, pki / name)
        # a new connection (a new handshake) gets the new certificate
        assert send(rt.port, "orders",
                    security=ClientSecurity(ca_file=str(rotated / "ca.pem"))).broker_name == "b"
        with pytest.raises(errors.ServiceUnavailable):
            send(rt.port, "orders", security=ClientSecurity(ca_file=str(old_ca)))
    finally:
        rt.stop()


RMQ = "apache.rocketmq.v2.MessagingService"
ACL_WITH_IP = AclTable(ACL.users, (*ACL.rules, Rule.create(
    "vpn-admin", "alice", "cluster:*", ["ADMIN"], source_ips=["10.0.0.0/8"])))


def _generic(kind: str):
    """A service known only by name (as gateway-grpc's MessagingService is to this module):
    a streamed Telemetry and a method no permission table maps, raw bytes both ways."""
    if kind == "aio-coroutine":
        async def telemetry(requests, context):
            async for item in requests:
                yield item

        async def unmapped(request, context):
            return request
    else:
        def telemetry(requests, context):
            yield from requests

        def unmapped(request, context):
            return request
    return grpc.method_handlers_generic_handler(RMQ, {
        "Telemetry": grpc.stream_stream_rpc_method_handler(telemetry),
        "SomethingNew": grpc.unary_unary_rpc_method_handler(unmapped)})


@pytest.mark.parametrize("kind", ["threaded", "aio-plain", "aio-coroutine"])
def test_streams_and_unmapped_methods_of_any_service(kind):
    rt = ServiceRuntime("authtest", ServiceSettings(metrics_port=-1, shutdown_grace_s=0,
                                                    auth_enabled=True),
                        tracing=False, aio=kind.startswith("aio"), acl=StaticAcl(ACL_WITH_IP))
    rt.add(lambda _servicer, server: server.add_generic_rpc_handlers((_generic(kind),)), None)
    rt.start()
    try:
        with open_channel(f"127.0.0.1:{rt.port}", ClientSecurity(ALICE)) as signed, \
                grpc.insecure_channel(f"127.0.0.1:{rt.port}") as anonymous:
            assert list(signed.stream_stream(f"/{RMQ}/Telemetry")(iter([b"a", b"b"]),
                                                                   timeout=5)) == [b"a", b"b"]
            with pytest.raises(grpc.RpcError) as caught:
                list(anonymous.stream_stream(f"/{RMQ}/Telemetry")(iter([b"a"]), timeout=5))
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            # ADMIN is allowed alice only from 10/8: this call comes from 127.0.0.1
            with pytest.raises(grpc.RpcError) as caught:
                signed.unary_unary(f"/{RMQ}/SomethingNew")(b"x", timeout=5)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "ADMIN on cluster 'SomethingNew' from 127.0.0.1" in caught.value.details()
    finally:
        rt.stop()


def test_a_rotated_client_ca_applies_to_new_connections(pki, tmp_path):
    """Mutual TLS: the CA clients must be signed by reloads like the key pair (it was read
    once), and replaces the old one: a client of the retired CA is refused from then on."""
    other = new_pki(tmp_path / "other", "client")
    certs.issue(pki, "client", certs.load_ca(pki))
    client_ca = tmp_path / "client-ca.pem"
    client_ca.write_bytes((pki / "ca.pem").read_bytes())
    rt, _ = start_runtime("threaded", tls_cert_file=str(pki / "broker.pem"),
                          tls_key_file=str(pki / "broker-key.pem"),
                          tls_client_ca_file=str(client_ca))

    def as_client_of(folder: Path) -> ClientSecurity:
        return ClientSecurity(ca_file=str(pki / "ca.pem"), cert_file=str(folder / "client.pem"),
                              key_file=str(folder / "client-key.pem"))
    try:
        assert send(rt.port, "orders", security=as_client_of(pki)).broker_name == "b"
        with pytest.raises(errors.ServiceUnavailable):
            send(rt.port, "orders", security=as_client_of(other))
        rotate(other / "ca.pem", client_ca)
        assert send(rt.port, "orders", security=as_client_of(other)).broker_name == "b"
        with pytest.raises(errors.ServiceUnavailable):
            send(rt.port, "orders", security=as_client_of(pki))
    finally:
        rt.stop()
