"""A cluster whose every gRPC server requires a client certificate (`tls_client_ca_file`):
services call each other with their own certificates (brokers register, routes appear), a
client presenting one of the cluster's CA works, and a client without one is refused at the
handshake with a sentence naming what to set, on gRPC and on the wire protocol's TLS port (which
the SDK takes with its certificate). The HTTP gateway's HTTPS asks the same."""

from __future__ import annotations

import pytest
import requests
from tidemq.client import Message, Producer
from tidemq.common import errors, rpc
from tidemq.common.auth.bearer import make_token
from tidemq.common.channel import link
from tidemq.common.healthcheck import http_healthy
from tidemq.common.wire.client import WireConnection
from tidemq.v1 import nameserver_pb2, nameserver_pb2_grpc

from tests.integration.security.conftest import ADMIN, secure_env
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.pki import new_pki

pytestmark = pytest.mark.slow
TOPIC = "mtls-orders"


class _Pool(rpc.ChannelPool):
    """Channels with a given ClientSecurity (the process-wide one has the certificate)."""

    def __init__(self, security: rpc.ClientSecurity) -> None:
        super().__init__()
        self.security = security

    def get(self, addr: str):
        return rpc.open_channel(addr, self.security)


def test_every_server_requires_a_certificate_of_the_clusters_ca(tmp_path, monkeypatch):
    folder = new_pki(tmp_path / "certs", "tidemq", "client")
    ca_file = str(folder / "ca.pem")
    env = {**secure_env(folder), "TIDEMQ_TLS_CLIENT_CA_FILE": ca_file}
    with running_cluster(tmp_path / "cluster", env=env, controller=True,
                         broker_names=("broker-a",)) as cluster:
        previous = rpc.client_security()  # restored as it was (the env is patched below)
        rpc.configure_client_security(rpc.ClientSecurity(
            ADMIN, ca_file, cert_file=str(folder / "client.pem"),
            key_file=str(folder / "client-key.pem")))
        try:
            create_topic_in_config_center(cluster, TOPIC, 2)
            wait_for_route(cluster, TOPIC, 1)  # the broker registered with its certificate
            with Producer(cluster.namesrv_addrs) as producer:
                assert producer.send(Message(TOPIC, b"mutual")).broker_name == "broker-a"
            # ... over the wire protocol, whose port asks for the same client certificate
            broker = cluster.brokers["broker-a"]
            endpoint = link.link_for(broker.addr, rpc.client_security())
            assert broker.info["wire_tls"] and endpoint.connected and endpoint._connection.tls
            wire_port = f"127.0.0.1:{broker.info['wire_port']}"
            with pytest.raises(ConnectionError, match="TIDEMQ_TLS_CERT_FILE"):
                WireConnection(wire_port, tls=link.client_context(rpc.ClientSecurity(
                    ADMIN, ca_file)))
            anonymous = rpc.RpcClient(cluster.namesrvs[0].addr,
                                      nameserver_pb2_grpc.NameServerServiceStub,
                                      pool=_Pool(rpc.ClientSecurity(ADMIN, ca_file)), retries=0)
            with pytest.raises(errors.ServiceUnavailable, match="TIDEMQ_TLS_CERT_FILE"):
                anonymous.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=TOPIC),
                               timeout=5)
            gateway = cluster.start("tidemq.gateway", [
                "--namesrv-addrs", cluster.namesrv_addrs,
                "--config-center", cluster.config_center.addr, "--workers", "1"], env=env)
            url = f"https://127.0.0.1:{gateway.port}/v1/topics/{TOPIC}"
            client_cert = (str(folder / "client.pem"), str(folder / "client-key.pem"))
            with_cert = requests.get(url, verify=ca_file, cert=client_cert, timeout=10,
                                     headers={"Authorization": "Bearer " + make_token(ADMIN)})
            assert with_cert.status_code == 200, with_cert.text
            with pytest.raises(requests.exceptions.ConnectionError):  # SSLError is one
                requests.get(url, verify=ca_file, timeout=10)
            health = f"https://127.0.0.1:{gateway.port}/healthz"  # the deployment's probe
            monkeypatch.setenv("TIDEMQ_TLS_CA_FILE", ca_file)
            assert not http_healthy(health)[0]
            monkeypatch.setenv("TIDEMQ_TLS_CERT_FILE", client_cert[0])
            monkeypatch.setenv("TIDEMQ_TLS_KEY_FILE", client_cert[1])
            assert http_healthy(health)[0]
        finally:
            rpc.configure_client_security(previous)
