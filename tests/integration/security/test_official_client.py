"""The official RocketMQ 5 Python client, unmodified, against gateway-grpc with auth and TLS
on (`tls_enable=True`, its credentials): an allowed user's send is stored, a user without PUB
is refused and nothing is stored. The client runs in its own process because it trusts gRPC's
default roots, which GRPC_DEFAULT_SSL_ROOTS_FILE_PATH points at our CA."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tidemq.common.auth.acl import Rule, User
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient

from tests.integration.security.conftest import TOPIC, secure_env
from tests.integration.security.test_secure_cluster import _stored
from tests.support.processes import wait_until

SEND = """
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer
endpoint, ak, sk, topic = sys.argv[1:5]
producer = Producer(ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=10),
                    (topic,), tls_enable=True)
producer.startup()
try:
    message = Message()
    message.topic, message.body = topic, b"from the official client"
    try:
        print("OK", producer.send(message).message_id)
    except Exception as exc:
        print("ERR", type(exc).__name__, exc)
finally:
    producer.shutdown()
"""


@pytest.fixture(scope="module")
def gateway_grpc(secure_cluster, cert_dir):
    admin = AclAdmin(ConfigClient(secure_cluster.config_center.addr))
    admin.add_user(User("rmq-user", "rmq-secret"))
    admin.add_user(User("rmq-nobody", "nobody-secret"))
    admin.add_rule(Rule.create("rmq-user-pub", "rmq-user", f"topic:{TOPIC}", ["PUB"]))
    return secure_cluster.start("tidemq.gatewaygrpc", [
        "--namesrv-addrs", secure_cluster.namesrv_addrs,
        "--auth-config-center", secure_cluster.config_center.addr,
    ], env=secure_env(cert_dir))


def official_send(endpoint: str, access_key: str, secret_key: str, ca: str) -> str:
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": ca, "TZ": "UTC"}
    done = subprocess.run([sys.executable, "-c", SEND, endpoint, access_key, secret_key, TOPIC],
                          capture_output=True, text=True, timeout=90, env=env)
    starts = [i for i, line in enumerate(done.stdout.splitlines())
              if line.startswith(("OK", "ERR"))]
    assert starts, f"the client printed no outcome:\n{done.stdout}\n{done.stderr[-3000:]}"
    return "\n".join(done.stdout.splitlines()[starts[-1]:])  # an error spans lines


def test_official_client_with_tls_and_credentials(secure_cluster, cert_dir, gateway_grpc):
    broker = secure_cluster.brokers["broker-a"].addr
    ca = str(cert_dir / "ca.pem")
    outcome: list[str] = []

    def allowed_send_stored() -> bool:  # the user and rule reach gateway-grpc by its watch
        before = _stored(broker)
        outcome.append(official_send(gateway_grpc.addr, "rmq-user", "rmq-secret", ca))
        return outcome[-1].startswith("OK") and _stored(broker) == before + 1
    wait_until(allowed_send_stored, 120, interval=0.5,
               message=f"an allowed official-client send (last: {outcome[-1:]})")
    before = _stored(broker)
    refused = official_send(gateway_grpc.addr, "rmq-nobody", "nobody-secret", ca)
    assert refused.startswith("ERR") and "PUB on topic" in refused, refused
    assert _stored(broker) == before
