"""Security acceptance over a real cluster with auth and TLS on (#16): each bad request gets
its precise error and stores nothing; ACL changes apply without a restart; the official
RocketMQ client's signing code is accepted; plaintext clients fail cleanly."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import grpc
import pytest
from rocketmq.v5.util.signature import Signature
from tidemq.client.encoding import BatchEncoder
from tidemq.client.message import Message
from tidemq.common import errors, rpc
from tidemq.common.auth.acl import Rule, User
from tidemq.common.auth.signature import Credentials, signed_metadata
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc, config_pb2, nameserver_pb2, nameserver_pb2_grpc

from tests.integration.security.conftest import ADMIN, TOPIC
from tests.support.cli import TIDEMQ
from tests.support.processes import wait_until

ALICE = Credentials("alice", "alice-secret")  # may PUB to TOPIC
BOB = Credentials("bob", "bob-secret")  # no rules at all
ENCODER = BatchEncoder(max_message_size=1 << 20, compression="none", compress_threshold=1 << 20,
                       born_host=bytes(8))


@pytest.fixture(scope="module")
def acl(secure_cluster):
    admin = AclAdmin(ConfigClient(secure_cluster.config_center.addr))
    for creds in (ALICE, BOB):
        admin.add_user(User(creds.access_key, creds.secret_key))
    admin.add_rule(Rule.create("alice-pub", "alice", f"topic:{TOPIC}", ["PUB"]))
    broker = secure_cluster.brokers["broker-a"].addr
    wait_until(lambda: _try_send(broker, ALICE) is None, 30, message="alice's rule to apply")
    return admin


def _channel(addr: str, credentials: Credentials | None, ca: bool = True) -> grpc.Channel:
    return rpc.open_channel(addr, rpc.ClientSecurity(
        credentials, rpc.client_security().ca_file if ca else ""))


def _send_request() -> broker_pb2.SendRequest:
    records, ids = ENCODER.encode([Message(TOPIC, b"secret plans")])
    return broker_pb2.SendRequest(topic=TOPIC, queue_id=0, records=records, record_count=len(ids))


def _send(addr: str, credentials: Credentials | None = None, metadata=()) -> None:
    with _channel(addr, credentials) as channel:
        try:
            broker_pb2_grpc.BrokerServiceStub(channel).Send(_send_request(), metadata=metadata,
                                                            timeout=10)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None


def _try_send(addr: str, credentials: Credentials) -> errors.TideMQError | None:
    try:
        _send(addr, credentials)
    except errors.TideMQError as exc:
        return exc
    return None


def _stored(addr: str) -> int:
    with _channel(addr, ADMIN) as channel:
        reply = broker_pb2_grpc.BrokerServiceStub(channel).GetQueueOffsets(
            broker_pb2.GetQueueOffsetsRequest(topic=TOPIC), timeout=10)
    return sum(q.max_offset for q in reply.queues)


@pytest.mark.parametrize(("case", "sentence"), [
    ("no credentials", "no credentials"),
    ("wrong signature", "does not match"),
    ("expired timestamp", "allowed skew"),
    ("replayed outside skew", "allowed skew"),
    ("unknown user", "is not a known user"),
])
def test_bad_credentials_are_unauthenticated_and_store_nothing(secure_cluster, acl, case,
                                                               sentence):
    broker = secure_cluster.brokers["broker-a"].addr
    replay = dict(signed_metadata(ALICE, datetime.now(UTC) - timedelta(minutes=20)))
    metadata = {
        "no credentials": (),
        "wrong signature": signed_metadata(Credentials("alice", "guessed")),
        "expired timestamp": signed_metadata(ALICE, datetime.now(UTC) - timedelta(hours=2)),
        # a request captured 20 minutes ago and sent again, byte for byte
        "replayed outside skew": tuple(replay.items()),
        "unknown user": signed_metadata(Credentials("mallory", "x")),
    }[case]
    before = _stored(broker)
    with pytest.raises(errors.Unauthenticated, match=sentence):
        _send(broker, None, metadata)
    assert _stored(broker) == before


def test_user_without_permission_is_denied_naming_resource_and_action(secure_cluster, acl):
    broker = secure_cluster.brokers["broker-a"].addr
    before = _stored(broker)
    with pytest.raises(errors.PermissionDenied, match=f"PUB on topic '{TOPIC}'"):
        _send(broker, BOB)
    assert _stored(broker) == before


def test_config_writes_need_admin_and_store_nothing(secure_cluster, acl):
    addr = secure_cluster.config_center.addr
    with _channel(addr, BOB) as channel:
        stub = config_pb2_grpc_stub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Put(config_pb2.PutRequest(key="/tidemq/topics/evil", value=b"{}"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as caught:  # secrets are admin-only reading
            stub.Range(config_pb2.RangeRequest(prefix="/tidemq/acl/"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert ConfigClient(addr).get("/tidemq/topics/evil") is None


def config_pb2_grpc_stub(channel: grpc.Channel):
    from tidemq.v1 import config_pb2_grpc

    return config_pb2_grpc.ConfigServiceStub(channel)


def test_acl_changes_apply_without_restart_including_ip_denial(secure_cluster, acl):
    broker = secure_cluster.brokers["broker-a"].addr
    acl.add_rule(Rule.create("bob-pub", "bob", f"topic:{TOPIC}", ["PUB"]))
    try:
        wait_until(lambda: _try_send(broker, BOB) is None, 30, message="bob's allow to apply")
        acl.add_rule(Rule.create("no-loopback", "bob", "topic:*", ["PUB"], "deny",
                                 ["127.0.0.0/8"]))
        # Sends until the denial reaches the broker are still stored: count from then on.
        wait_until(lambda: isinstance(_try_send(broker, BOB), errors.PermissionDenied), 30,
                   message="bob's IP denial to apply")
        before = _stored(broker)
        refusal = _try_send(broker, BOB)
        assert "rule 'no-loopback' denies it" in str(refusal) and "127.0.0.1" in str(refusal)
        assert _stored(broker) == before
    finally:
        acl.remove_rule("no-loopback")
        acl.remove_rule("bob-pub")
    wait_until(lambda: isinstance(_try_send(broker, BOB), errors.PermissionDenied), 30,
               message="bob's rules to be gone")


def test_the_official_clients_signature_is_accepted(secure_cluster, acl):
    """Metadata made by rocketmq-python-client's own Signature.metadata, sent as it is."""
    config = SimpleNamespace(credentials=SimpleNamespace(ak="alice", sk="alice-secret"),
                             namespace="")
    metadata = Signature.metadata(config, "official-client-1")
    namesrv = secure_cluster.namesrvs[0].addr
    with _channel(namesrv, None) as channel:
        route = nameserver_pb2_grpc.NameServerServiceStub(channel).GetRouteInfo(
            nameserver_pb2.GetRouteInfoRequest(topic=TOPIC), metadata=metadata, timeout=10)
    assert route.queue_datas or route.broker_datas
    broker = secure_cluster.brokers["broker-a"].addr
    before = _stored(broker)
    _send(broker, None, Signature.metadata(config, "official-client-1"))
    assert _stored(broker) == before + 1


def test_plaintext_client_against_tls_endpoint_fails_cleanly(secure_cluster):
    client = rpc.RpcClient(secure_cluster.namesrvs[0].addr,
                           nameserver_pb2_grpc.NameServerServiceStub, pool=_PlainPool(),
                           retries=0)
    with pytest.raises(errors.ServiceUnavailable, match="serves TLS, give this client its CA"):
        client.call("GetRouteInfo", nameserver_pb2.GetRouteInfoRequest(topic=TOPIC), timeout=5)


class _PlainPool(rpc.ChannelPool):
    def get(self, addr: str) -> grpc.Channel:
        return rpc.open_channel(addr, rpc.ClientSecurity(ADMIN, ""))


def test_acl_cli(secure_cluster, acl):
    env = {**os.environ, "TIDEMQ_CONFIG_CENTER": secure_cluster.config_center.addr,
           "TIDEMQ_TLS_CA_FILE": rpc.client_security().ca_file}
    admin_env = {**env, "TIDEMQ_ACCESS_KEY": ADMIN.access_key,
                 "TIDEMQ_SECRET_KEY": ADMIN.secret_key}

    def tidemq(*args: str, environment: dict) -> subprocess.CompletedProcess:
        return subprocess.run([TIDEMQ, *args], capture_output=True, text=True, timeout=60,
                              env=environment)

    added = tidemq("acl", "user", "add", "dave", "-o", "json", environment=admin_env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["secret_key"]
    rule = tidemq("acl", "rule", "add", "dave-sub", "--user", "dave", "--resource", "group:g-*",
                  "--action", "SUB", environment=admin_env)
    assert rule.returncode == 0, rule.stderr
    listed = json.loads(tidemq("acl", "rule", "list", "-o", "json", environment=admin_env).stdout)
    assert {"id": "dave-sub", "user": "dave", "resource": "group:g-*", "actions": ["SUB"],
            "decision": "allow", "source_ips": []} in listed
    users = json.loads(tidemq("acl", "user", "list", "-o", "json", environment=admin_env).stdout)
    assert {"access_key": "dave", "admin": False} in users
    assert all("secret" not in json.dumps(user) for user in users)
    refused = tidemq("acl", "user", "add", "eve", environment=env)  # no credentials
    assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
    for args in (("rule", "remove", "dave-sub"), ("user", "remove", "dave")):
        assert tidemq("acl", *args, environment=admin_env).returncode == 0


def test_the_tracing_dashboard_serves_https_and_needs_a_user_allowed_to_read_traces(
        secure_cluster, acl, cert_dir):
    """Spans name topics, groups, message ids and keys: with auth on, the collector's pages
    and API answer only a user allowed cluster:traces (browsers log in with HTTP Basic)."""
    import base64
    import ssl
    import urllib.error
    import urllib.request

    from tests.support.cluster import ready_http_port

    collector = secure_cluster.start(
        "tidemq.tracecollector",
        ["--http-port", "0", "--config-center", secure_cluster.config_center.addr])
    port = ready_http_port(collector)
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.pem"))

    def status(path: str, creds: Credentials | None = None, scheme: str = "https") -> int:
        headers = {}
        if creds is not None:
            pair = f"{creds.access_key}:{creds.secret_key}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as reply:
                return reply.status
        except urllib.error.HTTPError as refused:
            return refused.code

    assert status("/healthz") == 200
    assert status("/api/traces") == 401
    assert status("/", Credentials(ALICE.access_key, "wrong")) == 401
    # alice may only publish to one topic: refused once the collector has read the ACL
    wait_until(lambda: status("/api/traces", ALICE) == 403, 15, message="the ACL followed")
    assert status("/api/traces", ADMIN) == 200 and status("/", ADMIN) == 200
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        status("/healthz", scheme="http")  # plaintext gets no answer from a TLS port
