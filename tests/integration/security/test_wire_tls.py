"""The wire protocol on a TLS cluster (tests/integration/security/conftest.py: auth and TLS on
every service, certificates from deploy.certs): the broker serves its wire port over TLS with
its gRPC certificate and says so in routes and GetBrokerInfo; the SDK, trusting the CA, takes
it (the fast path of `make up-secure`); signed requests are served and unsigned ones refused
over it as over gRPC; a plaintext client at the port is told to use TLS. Mutual TLS:
test_mutual_tls.py."""

from __future__ import annotations

import pytest
from tidemq.client import Message, Producer
from tidemq.client.encoding import BatchEncoder
from tidemq.client.routes import NameServerClient
from tidemq.common import errors, rpc
from tidemq.common.auth.signature import signed_metadata
from tidemq.common.channel import link, metrics, ports
from tidemq.common.wire.client import WireConnection
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from tests.integration.security.conftest import ADMIN, TOPIC

SEND = BROKER_METHODS["Send"]
ENCODER = BatchEncoder(max_message_size=1 << 20, compression="none", compress_threshold=1 << 20,
                       born_host=bytes(8))


@pytest.fixture
def tls_security(secure_cluster, cert_dir):
    """The process's security: the cluster's CA and the admin's key (another module may have
    left plaintext in place), put back after."""
    previous = rpc.client_security()
    security = rpc.ClientSecurity(ADMIN, str(cert_dir / "ca.pem"))
    rpc.configure_client_security(security)
    yield security
    rpc.configure_client_security(previous)


def wire_addr(cluster) -> str:
    return f"127.0.0.1:{cluster.brokers['broker-a'].info['wire_port']}"


def wire_send(cluster, security, metadata) -> errors.TideMQError | None:
    records, ids = ENCODER.encode([Message(TOPIC, b"over tls")])
    connection = WireConnection(wire_addr(cluster), tls=link.client_context(security))
    try:
        connection.call(SEND, broker_pb2.SendRequest(topic=TOPIC, queue_id=0, records=records,
                                                     record_count=len(ids)), 10, metadata)
    except errors.TideMQError as exc:
        return exc
    finally:
        connection.close()
    return None


def test_a_tls_broker_offers_a_tls_wire_port(secure_cluster, tls_security):
    broker = secure_cluster.brokers["broker-a"]
    assert broker.info["wire_port"] > 0 and broker.info["wire_tls"] is True
    with rpc.open_channel(broker.addr, tls_security) as channel:
        info = broker_pb2_grpc.BrokerServiceStub(channel).GetBrokerInfo(
            broker_pb2.GetBrokerInfoRequest(), timeout=10)
    assert (info.wire_port, info.wire_tls) == (broker.info["wire_port"], True)
    ports.forget_all()
    NameServerClient(secure_cluster.namesrvs[0].addr).route(TOPIC)  # routes say it too
    assert ports.known(broker.addr) == ports.WirePort(broker.info["wire_port"], True)


def test_a_plaintext_client_at_the_tls_wire_port_is_told_to_use_tls(secure_cluster):
    with pytest.raises(OSError, match="serves TLS.*TIDEMQ_TLS_CA_FILE"):
        WireConnection(wire_addr(secure_cluster))


def test_signed_requests_over_the_tls_wire(secure_cluster, tls_security):
    assert wire_send(secure_cluster, tls_security, signed_metadata(ADMIN)) is None
    refusal = wire_send(secure_cluster, tls_security, ())
    assert isinstance(refusal, errors.Unauthenticated) and "no credentials" in refusal.message


def test_the_sdk_takes_the_tls_wire(secure_cluster, tls_security):
    def wire_sends() -> float:
        return metrics.CALLS.labels("Send", metrics.WIRE)._value.get()

    before = wire_sends()
    with Producer(secure_cluster.namesrv_addrs) as producer:
        for n in range(3):
            producer.send(Message(TOPIC, f"tls wire {n}".encode()))
    endpoint = link.link_for(secure_cluster.brokers["broker-a"].addr, tls_security)
    assert endpoint.connected and endpoint._connection.tls
    assert wire_sends() == before + 3
