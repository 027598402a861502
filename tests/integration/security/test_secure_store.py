"""The secure profile's stores, as `make up-secure` runs them (deploy.local under supervisord
with deploy/secure_store.py, on free shifted ports and a temporary data directory): three etcd
members with mutual TLS from their own CA and etcd authentication turned on by the deploy
step, two config centers reaching them with the only etcd credential, and Redis with TLS and
a password. No store node answers a client without credentials, and a user's known secret
appears in no file under the data directories (etcd's WAL and database included)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import ssl
import subprocess
from pathlib import Path

import grpc
import pytest
from tidemq.common.auth.signature import Credentials
from tidemq.configcenter.encryption import parse_sealed, sealed
from tidemq.etcd import rpc_pb2 as etcd
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc

from deploy.etcd_cluster import status_lines
from deploy.health import redis_healthy
from deploy.local import LocalDeployment, config_center_lines, free_port_offset
from deploy.secure_store import ENV_VAR, ETCD_USER, ROOT_USER, StoreSecurity
from deploy.topology import load
from tests.integration.security.conftest import secure_env
from tests.support.cli import TIDEMQ
from tests.support.processes import wait_until
from tests.support.tools import needs_tool

pytestmark = [needs_tool("etcd"), needs_tool("redis-server"), pytest.mark.slow]

STORES = ("etcd", "redis", "config-center")
KNOWN = "KNOWN-alice-secret-7f3c9a1e5b"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, cert_dir):
    """etcd-1..3, redis and config-center-1..2 of the default topology, secured."""
    full = load(replicas=1)
    topology = dataclasses.replace(full.select(drop=tuple(
        name for name, s in full.services.items() if s.group not in STORES
        and name not in STORES)), tracing=None)
    assert {s.group for s in topology.services.values()} == set(STORES)
    security = StoreSecurity.create(tmp_path_factory.mktemp("store-credentials"),
                                    [m.name for m in topology.etcd_members()])
    env = {**secure_env(cert_dir), ENV_VAR: str(security.directory)}
    data_dir = tmp_path_factory.mktemp("data")
    from tidemq.common import rpc

    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():  # what secure.py puts in supervisord's environment
            patch.setenv(name, value)
        # The process's client security is chosen from the environment on first use: a module
        # that ran before on this pytest-xdist worker may have chosen plaintext already (its
        # config client then met these TLS config centers with "Socket closed").
        previous = rpc.client_security()
        rpc.configure_client_security(rpc.ClientSecurity.from_env())
        local = LocalDeployment(data_dir=data_dir, port_offset=free_port_offset(topology),
                                topology=topology, security=security)
        try:
            local.up(timeout=60, progress=lambda line: None)
            yield local
        finally:
            local.down()
            rpc.configure_client_security(previous)   # TLS must not outlive this module


def _endpoints(deployment: LocalDeployment) -> list[str]:
    return [f"127.0.0.1:{deployment.placement.port(m, 'client')}"
            for m in deployment.topology.etcd_members()]


def _config_centers(deployment: LocalDeployment) -> str:
    return ",".join(deployment.placement.addr(s)
                    for s in deployment.topology.members("config-center"))


def _range(channel: grpc.Channel, metadata=None) -> grpc.StatusCode | None:
    try:
        etcd_grpc.KVStub(channel).Range(etcd.RangeRequest(key=b"/tidemq/", range_end=b"/tidemq0"),
                                        timeout=3, metadata=metadata)
    except grpc.RpcError as exc:
        return exc.code()
    return None


def _token(channel: grpc.Channel, user: str, password: str) -> tuple[tuple[str, str]]:
    reply = etcd_grpc.AuthStub(channel).Authenticate(
        etcd.AuthenticateRequest(name=user, password=password), timeout=3)
    return (("token", reply.token),)


def _tls(ca: Path, pair: tuple[Path, Path] | None = None) -> grpc.ChannelCredentials:
    cert, key = pair or (None, None)
    return grpc.ssl_channel_credentials(ca.read_bytes(), key.read_bytes() if key else None,
                                        cert.read_bytes() if cert else None)


def test_no_etcd_member_serves_a_client_without_a_certificate_and_a_token(deployment,
                                                                         cert_dir):
    security = deployment.security
    service_pair = (cert_dir / "tidemq.pem", cert_dir / "tidemq-key.pem")
    for endpoint in _endpoints(deployment):
        # plaintext, TLS without a client certificate, and a service certificate of the
        # project CA: refused at the handshake
        for channel in (grpc.insecure_channel(endpoint),
                        grpc.secure_channel(endpoint, _tls(security.etcd_ca)),
                        grpc.secure_channel(endpoint, _tls(security.etcd_ca, service_pair))):
            with channel:
                assert _range(channel) == grpc.StatusCode.UNAVAILABLE, endpoint
        # the config centers' certificate without a token: etcd takes its CN as a user, and
        # no user has that name
        with grpc.secure_channel(endpoint, _tls(security.etcd_ca,
                                                security.config_center_pair)) as channel:
            assert _range(channel) == grpc.StatusCode.PERMISSION_DENIED, endpoint
            with pytest.raises(grpc.RpcError, match="authentication failed"):
                _token(channel, ETCD_USER, "not-the-password")
            token = _token(channel, ETCD_USER, security.etcd_password())
            assert _range(channel, token) is None
            # the config centers' user reads and writes keys, and administers nothing
            with pytest.raises(grpc.RpcError) as refused:
                etcd_grpc.AuthStub(channel).UserAdd(
                    etcd.AuthUserAddRequest(name="intruder", password="x"), timeout=3,
                    metadata=token)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_config_centers_work_through_it_and_make_status_shows_every_member(deployment):
    from tidemq.configclient.client import ConfigClient

    with ConfigClient(_config_centers(deployment)) as config:
        written = config.put("/tidemq/config/cluster/c1/retention_hours", "48")
        assert config.get("/tidemq/config/cluster/c1/retention_hours").text == "48"
    lines = status_lines(deployment.topology, deployment.placement,
                         credentials=deployment.security.operator_credentials())
    assert lines[0].startswith("etcd members (3/3 answering, leader etcd-")
    assert all(f"revision {written.revision}" in line or "revision" in line
               for line in lines[1:]) and len(lines) == 4
    centers = config_center_lines(deployment.topology, deployment.placement)
    assert len(centers) == 3 and all(" up " in line for line in centers[1:]), centers
    assert all("mutual TLS, user tidemq" in line for line in centers[1:]), centers


def _cli(deployment: LocalDeployment, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TIDEMQ, *args], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "TIDEMQ_CONFIG_CENTER": _config_centers(deployment)})


def _signed_read(deployment: LocalDeployment, credentials: Credentials) -> bool:
    """A call signed with `credentials` is accepted (the ACL has the user)."""
    from tidemq.common import rpc
    from tidemq.common.errors import TideMQError
    from tidemq.configclient.client import ConfigClient

    previous = rpc._security  # noqa: SLF001 - put back exactly, "not chosen yet" included
    ca_file = rpc.ClientSecurity.from_env().ca_file
    rpc.configure_client_security(rpc.ClientSecurity(credentials, ca_file))
    try:
        with ConfigClient(_config_centers(deployment)) as config:
            config.range("/tidemq/topics/")
        return True
    except TideMQError:
        return False
    finally:
        rpc._security = previous  # noqa: SLF001


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(path) for path in sorted(root.rglob("*"))
            if path.is_file() and needle in path.read_bytes()]


def _root_snapshot(deployment: LocalDeployment) -> bytes:
    """etcd's database as a snapshot (root only): it also makes the member commit its
    backend to disk, so the database file holds every write."""
    security = deployment.security
    with grpc.secure_channel(_endpoints(deployment)[0], security.operator_credentials()) as ch:
        token = _token(ch, ROOT_USER, security.root_password())
        return b"".join(part.blob for part in etcd_grpc.MaintenanceStub(ch).Snapshot(
            etcd.SnapshotRequest(), timeout=10, metadata=token))


def test_a_known_secret_is_in_no_file_under_the_data_directories(deployment):
    _cli(deployment, "acl", "user", "add", "alice", "--secret-key", KNOWN)
    wait_until(lambda: _signed_read(deployment, Credentials("alice", KNOWN)), 30,
               message="the config centers' ACL to accept alice")
    snapshot = _root_snapshot(deployment)
    assert b"/tidemq/acl/users/alice" in snapshot and KNOWN.encode() not in snapshot
    assert _files_holding(deployment.data_dir, KNOWN.encode()) == []
    # the store holds alice sealed under the config centers' current key
    value = _stored(deployment, b"/tidemq/acl/users/alice")
    assert sealed(value) and parse_sealed(value)[0] == _current_key(deployment)
    listed = json.loads(_cli(deployment, "acl", "user", "list", "-o", "json").stdout)
    assert {"access_key": "alice", "admin": False} in listed


def _stored(deployment: LocalDeployment, key: bytes, value: bytes | None = None) -> bytes:
    """The bytes etcd holds for `key` (written first when `value` is given), as root."""
    security = deployment.security
    with grpc.secure_channel(_endpoints(deployment)[0], security.operator_credentials()) as ch:
        token = _token(ch, ROOT_USER, security.root_password())
        kv = etcd_grpc.KVStub(ch)
        if value is not None:
            kv.Put(etcd.PutRequest(key=key, value=value), timeout=3, metadata=token)
        return kv.Range(etcd.RangeRequest(key=key), timeout=3, metadata=token).kvs[0].value


def _current_key(deployment: LocalDeployment) -> str:
    lines = deployment.security.encryption_key_file.read_text().splitlines()
    return next(line for line in lines if line and not line.startswith("#")).partition(":")[0]


def test_a_user_stored_in_plaintext_before_still_signs_and_rekey_seals_it(deployment):
    secret = "plaintext-from-before-9d2e"
    legacy = json.dumps({"access_key": "legacy", "secret_key": secret, "admin": False})
    _stored(deployment, b"/tidemq/acl/users/legacy", legacy.encode())
    wait_until(lambda: _signed_read(deployment, Credentials("legacy", secret)), 30,
               message="the ACL to load the plaintext user")
    # the scan above would see a plaintext secret: this one is in etcd's WAL
    assert any("/member/wal/" in path for path in _files_holding(deployment.data_dir,
                                                                  secret.encode()))
    assert "rewritten under the config centers' current key" in _cli(deployment, "acl",
                                                                      "rekey").stdout
    value = _stored(deployment, b"/tidemq/acl/users/legacy")
    assert sealed(value) and secret.encode() not in value
    assert _signed_read(deployment, Credentials("legacy", secret))


def test_redis_answers_only_over_tls_after_the_password(deployment):
    from tidemq.common import redisconn

    security = deployment.security
    redis = deployment.topology.services["redis"]
    addr = f"127.0.0.1:{deployment.placement.port(redis, 'redis')}"
    host, port = addr.split(":")
    assert not redis_healthy(addr)[0]  # plaintext: no answer but a closed connection
    context = ssl.create_default_context(cafile=str(security.redis_ca))
    with socket.create_connection((host, int(port)), timeout=3) as raw, \
            context.wrap_socket(raw, server_hostname=host) as conn:
        conn.sendall(b"PING\r\n")
        assert conn.recv(64).startswith(b"-NOAUTH")
        conn.sendall(b"GET tidemq\r\n")
        assert conn.recv(64).startswith(b"-NOAUTH")
    assert not redis_healthy(addr, context=context, password="wrong")[0]
    assert redis_healthy(addr, context=context, password=security.redis_password())[0]
    # what the gateway's breakers open from --redis-url rediss://... and the two files
    client = redisconn.connect(f"rediss://{addr}/0", socket_timeout=2,
                               **redisconn.auth_options(security.redis_password(),
                                                        str(security.redis_ca)))
    assert client.ping()
    client.close()


def test_a_refused_token_is_replaced_for_calls_watches_and_keep_alives(deployment):
    """etcd forgets a simple token after --auth-token-ttl idle or when a member restarts:
    the config center's store authenticates again, on unary calls and on streams."""
    from tidemq.configcenter.etcd import EtcdTarget
    from tidemq.configcenter.store import ConfigStore

    security = deployment.security
    cert, key = security.config_center_pair
    store = ConfigStore(EtcdTarget.parse(
        ",".join(_endpoints(deployment)), ca_file=str(security.etcd_ca), cert_file=str(cert),
        key_file=str(key), user=ETCD_USER, password_file=str(security.etcd_password_file)))
    try:
        start = store.put("/tidemq/tests/token", b"1").revision
        store.etcd._token = "expired.token"  # as etcd no longer knows it
        batches = store.watch("/tidemq/tests/", start, until=start)
        assert [e.kv.value for b in batches for e in b.events] == [b"1"]
        lease, _ = store.lease_grant(10)
        store.etcd._token = "expired.token"
        assert store.lease_keepalive(lease) > 0
        store.etcd._token = "expired.token"
        assert store.get("/tidemq/tests/token")[0].value == b"1"
    finally:
        store.close()
