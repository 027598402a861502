"""The wire protocol under auth (a plaintext cluster with `auth_enabled`): every request is
checked as its gRPC call would be, with the same signature and the same ACL, and refused with
the same errors. The same over TLS: test_wire_tls.py."""

from __future__ import annotations

import pytest
from tidemq.client import Message, Producer
from tidemq.client.encoding import BatchEncoder
from tidemq.common import errors, rpc
from tidemq.common.auth.acl import Rule, User
from tidemq.common.auth.signature import Credentials, signed_metadata
from tidemq.common.channel import link
from tidemq.common.wire.client import WireConnection
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc

from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route
from tests.support.processes import wait_until

ADMIN = Credentials("cluster-admin", "cluster-admin-secret")
ALICE = Credentials("alice", "alice-secret")  # may PUB to TOPIC
BOB = Credentials("bob", "bob-secret")  # no rules at all
TOPIC = "wire-sec-orders"
SEND = BROKER_METHODS["Send"]
ENCODER = BatchEncoder(max_message_size=1 << 20, compression="none", compress_threshold=1 << 20,
                       born_host=bytes(8))


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory):
    """Its own cluster: auth on, TLS off (the wire protocol is plaintext)."""
    env = {"TIDEMQ_AUTH_ENABLED": "true", "TIDEMQ_ACCESS_KEY": ADMIN.access_key,
           "TIDEMQ_SECRET_KEY": ADMIN.secret_key}
    with running_cluster(tmp_path_factory.mktemp("wire-auth"), env=env, controller=True,
                         broker_names=("broker-a",)) as cluster:  # name servers follow the ACL
        previous = rpc.client_security()  # the package's TLS cluster may have set it
        rpc.configure_client_security(rpc.ClientSecurity(ADMIN))
        try:
            create_topic_in_config_center(cluster, TOPIC, 1)
            wait_for_route(cluster, TOPIC, 1)
            admin = AclAdmin(ConfigClient(cluster.config_center.addr))
            for creds in (ALICE, BOB):
                admin.add_user(User(creds.access_key, creds.secret_key))
            admin.add_rule(Rule.create("alice-pub", "alice", f"topic:{TOPIC}", ["PUB"]))
            yield cluster
        finally:
            rpc.configure_client_security(previous)


def send_request() -> broker_pb2.SendRequest:
    records, ids = ENCODER.encode([Message(TOPIC, b"secret plans")])
    return broker_pb2.SendRequest(topic=TOPIC, queue_id=0, records=records, record_count=len(ids))


def wire_send(cluster, metadata) -> errors.TideMQError | None:
    connection = WireConnection(f"127.0.0.1:{cluster.brokers['broker-a'].info['wire_port']}")
    try:
        connection.call(SEND, send_request(), 10, metadata)
    except errors.TideMQError as exc:
        return exc
    finally:
        connection.close()
    return None


def stored(cluster) -> int:
    stub = broker_pb2_grpc.BrokerServiceStub(rpc.default_pool.get(
        cluster.brokers["broker-a"].addr))
    reply = stub.GetQueueOffsets(broker_pb2.GetQueueOffsetsRequest(topic=TOPIC), timeout=10)
    return sum(q.max_offset for q in reply.queues)


def test_a_signed_request_of_an_allowed_user_is_served(auth_cluster):
    wait_until(lambda: wire_send(auth_cluster, signed_metadata(ALICE)) is None, 30,
               message="alice's rule to apply")


@pytest.mark.parametrize(("metadata", "refusal", "sentence"), [
    (lambda: (), errors.Unauthenticated, "no credentials"),
    (lambda: signed_metadata(Credentials("alice", "guessed")), errors.Unauthenticated, "does not match"),
    (lambda: signed_metadata(BOB), errors.PermissionDenied, f"PUB on topic '{TOPIC}'"),
], ids=["unsigned", "wrong signature", "no permission"])
def test_refusals_are_gRPCs_and_store_nothing(auth_cluster, metadata, refusal, sentence):
    # signed when the test runs: a signature made at collection is stale past the allowed skew
    # once a long suite reaches this test

    wait_until(lambda: wire_send(auth_cluster, signed_metadata(ALICE)) is None, 30,
               message="alice's rule to apply")
    before = stored(auth_cluster)
    failure = wire_send(auth_cluster, metadata())
    assert isinstance(failure, refusal) and sentence in failure.message
    assert stored(auth_cluster) == before


def test_the_sdk_signs_its_wire_calls(auth_cluster):
    wait_until(lambda: wire_send(auth_cluster, signed_metadata(ALICE)) is None, 30,
               message="alice's rule to apply")
    before = stored(auth_cluster)
    with Producer(auth_cluster.namesrv_addrs) as producer:  # the admin's credentials
        producer.send(Message(TOPIC, b"signed by the sdk"))
    assert link.link_for(auth_cluster.brokers["broker-a"].addr,
                         rpc.client_security()).connected
    assert stored(auth_cluster) == before + 1


def test_a_users_quota_follows_the_signed_user_over_its_client_ids_quota(auth_cluster):
    """Kafka's precedence: the signed user's quota applies, whatever client id it sends; the
    answer carries the throttle time and a request that could only be served past its deadline
    is refused THROTTLED (docs/quotas.md)."""
    from tidemq.common.quotas import CLIENT_ID_METADATA
    from tidemq.common.wire.client import WireConnection as Connection
    from tidemq.configclient.quotas import QuotaAdmin

    carol = Credentials("carol", "carol-secret")
    config = ConfigClient(auth_cluster.config_center.addr)
    AclAdmin(config).add_user(User(carol.access_key, carol.secret_key))
    AclAdmin(config).add_rule(Rule.create("carol-pub", "carol", f"topic:{TOPIC}", ["PUB"]))
    quotas = QuotaAdmin(config)
    quotas.set("client", "carol-app", {"producer_byte_rate": 1 << 30})   # would never throttle
    quotas.set("user", "carol", {"producer_byte_rate": 1000})            # 1 kB/s
    records, ids = ENCODER.encode([Message(TOPIC, b"x" * 5000)])
    request = broker_pb2.SendRequest(topic=TOPIC, queue_id=0, records=records,
                                     record_count=len(ids))
    connection = Connection(f"127.0.0.1:{auth_cluster.brokers['broker-a'].info['wire_port']}")

    def send(timeout_s: float):
        metadata = [*signed_metadata(carol), (CLIENT_ID_METADATA, "carol-app")]
        return connection.call(SEND, request, timeout_s, metadata)

    try:
        # 5 kB against 1 kB/s with 1 s of burst: about 4 s to wait once the quota is read
        wait_until(lambda: send(10).throttle_time_ms > 2000, 30,
                   message="the broker to read carol's user quota and throttle her")
        with pytest.raises(errors.TideMQError) as refused:
            send(1.0)   # not waited out: would be held past its 1 s deadline
        assert refused.value.code == "THROTTLED"
        assert "user:carol is over its producer_byte_rate quota of 1000 bytes/s" in \
            refused.value.message
    finally:
        connection.close()
        quotas.delete("user", "carol")
        quotas.delete("client", "carol-app")


def test_only_a_gateways_credential_may_charge_a_call_to_another_client(auth_cluster):
    """A gateway's calls name the end client they are made for (`tidemq-on-behalf-of`), and
    the broker charges that client's quotas. An ordinary user claiming to call for another
    user — to spend that user's quota instead of its own, or none as "anonymous" — is refused
    and nothing is stored; the cluster's own credential (the gateways') is believed, and the
    broker charges the user it names (docs/quotas.md, "Clients of a gateway")."""
    from tidemq.common.quotas import CLIENT_ID_METADATA, on_behalf_of
    from tidemq.configclient.quotas import QuotaAdmin

    from tests.integration.broker.test_quotas import broker_metric

    config = ConfigClient(auth_cluster.config_center.addr)
    AclAdmin(config).add_user(User("dave", "dave-secret"))
    AclAdmin(config).add_rule(Rule.create("dave-pub", "dave", f"topic:{TOPIC}", ["PUB"]))
    dave = Credentials("dave", "dave-secret")
    quotas = QuotaAdmin(config)
    quotas.set("user", "dave", {"producer_byte_rate": 1000})          # 1 kB/s
    quotas.set("user", "erin", {"producer_byte_rate": 1 << 30})       # would never throttle
    quotas.set("client", "roomy-app", {"producer_byte_rate": 1 << 30})
    broker = auth_cluster.brokers["broker-a"]
    try:
        wait_until(lambda: wire_send(auth_cluster, signed_metadata(dave)) is None, 30,
                   message="dave's rule to apply")
        before = stored(auth_cluster)
        for claim in ("user:erin", "anonymous"):
            metadata = [*signed_metadata(dave), ("tidemq-on-behalf-of", claim),
                        (CLIENT_ID_METADATA, "roomy-app")]
            refused = wire_send(auth_cluster, metadata)
            assert isinstance(refused, errors.PermissionDenied), refused
            assert "user 'dave' may not ADMIN on cluster 'forward-identity'" in refused.message
            assert "tidemq-on-behalf-of" in refused.message
        assert stored(auth_cluster) == before

        # the gateways' credential (this process's: the cluster admin) is believed
        def charged_to_erin() -> float:
            return broker_metric(broker, "tidemq_broker_quota_charged_total",
                                 quota="producer_byte_rate", entity="user:erin")

        wait_until(lambda: broker_metric(broker, "tidemq_broker_quota_charged_total",
                                         entity="user:dave") > 0, 30,
                   message="the broker to read the quotas")
        with Producer(auth_cluster.namesrv_addrs) as producer, \
                on_behalf_of("erin-app", "erin"):
            producer.send(Message(TOPIC, b"for erin"))
        assert stored(auth_cluster) == before + 1
        assert charged_to_erin() > 0
    finally:
        quotas.delete("user", "dave")
        quotas.delete("user", "erin")
        quotas.delete("client", "roomy-app")
