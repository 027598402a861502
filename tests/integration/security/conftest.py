"""A real cluster with the `secure` settings on: auth (every service follows the ACL in the
config center) and TLS on every gRPC endpoint, certificates from deploy.certs."""

from __future__ import annotations

from pathlib import Path

import pytest
from tidemq.common import rpc
from tidemq.common.auth.signature import Credentials

from deploy import certs
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route

ADMIN = Credentials("cluster-admin", "cluster-admin-secret")
TOPIC = "sec-orders"


def secure_env(cert_dir: Path) -> dict[str, str]:
    return {
        "TIDEMQ_AUTH_ENABLED": "true",
        "TIDEMQ_ACCESS_KEY": ADMIN.access_key, "TIDEMQ_SECRET_KEY": ADMIN.secret_key,
        "TIDEMQ_TLS_CERT_FILE": str(cert_dir / "tidemq.pem"),
        "TIDEMQ_TLS_KEY_FILE": str(cert_dir / "tidemq-key.pem"),
        "TIDEMQ_TLS_CA_FILE": str(cert_dir / "ca.pem"),
    }


@pytest.fixture(scope="package")
def cert_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    certs.issue(out, "tidemq", certs.create_ca(out))
    return out


@pytest.fixture(scope="package")
def secure_cluster(tmp_path_factory, cert_dir):
    tmp = tmp_path_factory.mktemp("secure")
    with running_cluster(tmp, env=secure_env(cert_dir), controller=True,
                         broker_names=("broker-a",)) as cluster:
        rpc.configure_client_security(rpc.ClientSecurity(ADMIN, str(cert_dir / "ca.pem")))
        try:
            create_topic_in_config_center(cluster, TOPIC, 2)
            wait_for_route(cluster, TOPIC, 1)
            yield cluster
        finally:
            rpc.configure_client_security(rpc.ClientSecurity.from_env())
