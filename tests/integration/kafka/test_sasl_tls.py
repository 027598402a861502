"""gateway-kafka as `make up-secure` runs it (#40): SASL_SSL on TideMQ's ACL users.

A secured cluster (auth on every service, TLS, certificates from deploy.certs) and one
gateway-kafka with the same settings. Each SASL mechanism over TLS with the three Python client
families; a wrong password refused with SASL_AUTHENTICATION_FAILED; a produce, a fetch and a
group join the ACL does not allow refused with TOPIC_/GROUP_AUTHORIZATION_FAILED, storing
nothing; a topic's config altered only with ADMIN on that topic; a rule added while a
connection is open applies to its next request; any request but ApiVersions or SASL before
authentication closes the connection."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.record.memory_records import MemoryRecordsBuilder
from tidemq.common.auth.acl import Rule, User
from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient

from tests.integration.kafka.harness import read_frame
from tests.integration.kafka.secured import consume, produce, secured_cluster
from tests.integration.security.conftest import ADMIN, secure_env
from tests.support.cluster import create_topic_in_config_center, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC, OTHER, GROUP = "ksec-orders", "ksec-secret", "ksec-group"
ALICE = ("alice", "alice-secret")     # PUB and SUB on TOPIC, SUB on GROUP
BOB = ("bob", "bob-secret")           # no rules
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
TOPIC_DENIED, GROUP_DENIED, SASL_FAILED = 29, 30, 58


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with secured_cluster(tmp_path_factory, "ksecure", (TOPIC, OTHER)) as (cluster, cert_dir,
                                                                           admin):
        for name, secret in (ALICE, BOB):
            admin.add_user(User(name, secret))
        admin.add_rule(Rule.create("alice-topic", "alice", f"topic:{TOPIC}", ["PUB", "SUB"]))
        admin.add_rule(Rule.create("alice-group", "alice", f"group:{GROUP}*", ["SUB"]))
        gateway = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1",
        ], env=secure_env(cert_dir))
        yield {"bootstrap": gateway.addr, "ca": str(cert_dir / "ca.pem"), "admin": admin,
               "cluster": cluster}


def _confluent(secured, mechanism: str, user: tuple[str, str], **extra) -> dict:
    return {"bootstrap.servers": secured["bootstrap"], "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user[0], "sasl.password": user[1],
            "ssl.ca.location": secured["ca"], **extra}


def _produce_confluent(secured, mechanism, user, topic, values) -> list:
    """Each value's delivery error (None = stored)."""
    return produce(_confluent(secured, mechanism, user, **{"enable.idempotence": True}),
                   topic, values)


def _high_watermark(secured, topic: str) -> int:
    consumer = Consumer(_confluent(secured, "SCRAM-SHA-256", (ADMIN.access_key,
                                                              ADMIN.secret_key),
                                   **{"group.id": "ksec-watermarks"}))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def _consume_confluent(secured, mechanism, user, group, wanted: list[bytes]) -> list[bytes]:
    return consume(_confluent(secured, mechanism, user, **{"group.id": group}), TOPIC, wanted)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_each_mechanism_over_tls(secured, mechanism):
    values = [f"{mechanism}-{uuid.uuid4().hex}".encode() for _ in range(3)]
    assert _produce_confluent(secured, mechanism, ALICE, TOPIC, values) == [None] * 3
    got = _consume_confluent(secured, mechanism, ALICE, f"{GROUP}-{uuid.uuid4().hex[:6]}",
                             values)
    assert set(values) <= set(got)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_each_mechanism_over_tls(secured, mechanism):
    common = {"bootstrap_servers": secured["bootstrap"], "security_protocol": "SASL_SSL",
              "sasl_mechanism": mechanism, "sasl_plain_username": ALICE[0],
              "sasl_plain_password": ALICE[1], "ssl_cafile": secured["ca"]}
    value = f"kp-{mechanism}-{uuid.uuid4().hex}".encode()
    producer = KafkaProducer(acks="all", **common)
    try:
        metadata = producer.send(TOPIC, value).get(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(group_id=f"{GROUP}-kp-{uuid.uuid4().hex[:6]}",
                             auto_offset_reset="earliest", consumer_timeout_ms=30000, **common)
    try:
        consumer.subscribe([TOPIC])
        for record in consumer:
            if record.value == value:
                assert record.offset == metadata.offset
                break
        else:
            pytest.fail("the record was not consumed back")
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_each_mechanism_over_tls(secured, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> tuple[int, list[bytes]]:
        common = {"bootstrap_servers": secured["bootstrap"], "security_protocol": "SASL_SSL",
                  "sasl_mechanism": mechanism, "sasl_plain_username": ALICE[0],
                  "sasl_plain_password": ALICE[1],
                  "ssl_context": create_ssl_context(cafile=secured["ca"])}
        producer = AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            sent = await producer.send_and_wait(TOPIC, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, group_id=f"{GROUP}-aio-{uuid.uuid4().hex[:6]}",
                                    auto_offset_reset="earliest", **common)
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(60):
                async for record in consumer:
                    got.append(record.value)
                    if record.value == value:
                        break
        finally:
            await consumer.stop()
        return sent.offset, got

    value = f"aio-{mechanism}-{uuid.uuid4().hex}".encode()
    _, got = asyncio.run(run())
    assert value in got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_refused(secured, mechanism):
    errors: list[KafkaError] = []
    producer = ConfluentProducer(_confluent(secured, mechanism, (ALICE[0], "guessed"), **{
        "error_cb": errors.append, "message.timeout.ms": 10000}))
    producer.produce(TOPIC, b"never stored")
    producer.flush(15)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("wrong secret key for access key 'alice'" in e.str()
               or "SASL_AUTHENTICATION_FAILED" in e.str() or "Authentication failed" in e.str()
               for e in errors), errors


def test_wrong_password_answers_sasl_authentication_failed_and_closes(secured):
    raw = RawClient(secured)
    answer = raw.login((ALICE[0], "guessed"))
    assert answer.error_code == SASL_FAILED
    assert answer.error_message == \
        "authentication failed (PLAIN): wrong secret key for access key 'alice'"
    assert raw.closed()


def test_unpermitted_produce_is_refused_and_stores_nothing(secured):
    before = _high_watermark(secured, OTHER)
    outcomes = _produce_confluent(secured, "SCRAM-SHA-512", ALICE, OTHER, [b"x", b"y"])
    assert [e.code() if e else None for e in outcomes] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    outcomes = _produce_confluent(secured, "PLAIN", BOB, TOPIC, [b"z"])
    assert outcomes[0] is not None and \
        outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _high_watermark(secured, OTHER) == before


def test_unpermitted_fetch_and_group_join_are_refused(secured):
    # alice may not read OTHER: her consumer's fetch is refused
    consumer = Consumer(_confluent(secured, "SCRAM-SHA-256", ALICE, **{
        "group.id": f"{GROUP}-fetch", "auto.offset.reset": "earliest"}))
    try:
        consumer.assign([TopicPartition(OTHER, 0, 0)])
        refusal = _first_error(consumer)
        assert refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refusal
    finally:
        consumer.close()
    # bob has no group rule: joining is refused
    consumer = Consumer(_confluent(secured, "SCRAM-SHA-256", BOB, **{
        "group.id": f"{GROUP}-bob", "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([TOPIC])
        refusal = _first_error(consumer)
        assert refusal.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, refusal
    finally:
        consumer.close()


def _first_error(consumer: Consumer) -> KafkaError:
    errors: list[KafkaError] = []

    def poll() -> bool:
        try:
            msg = consumer.poll(0.5)
        except KafkaException as exc:
            errors.append(exc.args[0])
            return True
        if msg is not None and msg.error():
            errors.append(msg.error())
        return bool(errors)

    wait_until(poll, 60, interval=0, message="the consumer's refusal")
    return errors[0]


# -- the protocol by hand: one TLS connection throughout ------------------------------------------

class RawClient:
    def __init__(self, secured) -> None:
        host, port = secured["bootstrap"].rsplit(":", 1)
        context = ssl.create_default_context(cafile=secured["ca"])
        self.sock = context.wrap_socket(socket.create_connection((host, int(port)), timeout=20),
                                        server_hostname=host)
        self.correlation = 0

    def call(self, request, response_cls):
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="ksec-raw")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return response_cls.decode(read_frame(self.sock), version=request.version, header=True)

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True

    def login(self, user: tuple[str, str]) -> SaslAuthenticateResponse:
        shake = self.call(SaslHandshakeRequest(version=1, mechanism="PLAIN"),
                          SaslHandshakeResponse)
        assert shake.error_code == 0 and "SCRAM-SHA-512" in shake.mechanisms
        token = b"\x00" + user[0].encode() + b"\x00" + user[1].encode()
        return self.call(SaslAuthenticateRequest(version=2, auth_bytes=token),
                         SaslAuthenticateResponse)

    def produce(self, topic: str, value: bytes) -> tuple[int, str | None]:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
        builder.append(0, None, value, [])
        builder.close()
        topic_data = ProduceRequest._struct.fields["topic_data"].data_class
        partition_data = topic_data._struct.fields["partition_data"].data_class
        request = ProduceRequest(version=8, transactional_id=None, acks=-1, timeout_ms=30000,
                                 topic_data=[topic_data(name=topic, partition_data=[
                                     partition_data(index=0, records=bytes(builder.buffer()))])])
        answer = self.call(request, ProduceResponse)
        part = answer.responses[0].partition_responses[0]
        return part.error_code, part.error_message


def test_request_before_authentication_closes_the_connection(secured):
    raw = RawClient(secured)
    versions = raw.call(ApiVersionsRequest(version=3, client_software_name="raw",
                                           client_software_version="1"), ApiVersionsResponse)
    assert {(k.api_key, k.max_version) for k in versions.api_keys} >= {(17, 1), (36, 2)}
    raw.correlation += 1
    request = ProduceRequest(version=8, transactional_id=None, acks=-1, timeout_ms=1000,
                             topic_data=[])
    request.with_header(correlation_id=raw.correlation, client_id="ksec-raw")
    raw.sock.sendall(bytes(request.encode(header=True, framed=True)))
    assert raw.closed()


def test_acl_change_applies_to_an_open_connection(secured):
    admin: AclAdmin = secured["admin"]
    raw = RawClient(secured)
    assert raw.login(BOB).error_code == 0
    code, message = raw.produce(TOPIC, b"refused")
    assert code == TOPIC_DENIED
    assert message == f"user 'bob' may not PUB on topic '{TOPIC}' from 127.0.0.1: " \
                      "no rule allows it"
    admin.add_rule(Rule.create("bob-live", "bob", f"topic:{TOPIC}", ["PUB"]))
    try:
        wait_until(lambda: raw.produce(TOPIC, b"allowed now")[0] == 0, 30,
                   message="bob's new rule to apply on his open connection")
    finally:
        admin.remove_rule("bob-live")
    wait_until(lambda: raw.produce(TOPIC, b"refused again")[0] == TOPIC_DENIED, 30,
               message="bob's removed rule to stop applying")
    assert raw.produce(TOPIC, b"same connection")[0] == TOPIC_DENIED


def test_scram_verifiers_follow_a_changed_secret(secured):
    admin: AclAdmin = secured["admin"]
    carol = ("carol", "carol-secret-1")
    admin.add_user(User(*carol))
    admin.add_rule(Rule.create("carol-pub", "carol", f"topic:{TOPIC}", ["PUB"]))
    wait_until(lambda: _produce_confluent(secured, "SCRAM-SHA-256", carol, TOPIC, [b"c"]) ==
               [None], 60, interval=0.5, message="carol's user to reach the gateway")
    admin.add_user(User("carol", "carol-secret-2"))
    wait_until(lambda: _produce_confluent(secured, "SCRAM-SHA-256", ("carol", "carol-secret-2"),
                                          TOPIC, [b"c2"]) == [None], 60, interval=0.5,
               message="carol's new secret to reach the gateway")



def test_a_sasl_users_quota_follows_its_kafka_client_through_the_gateway(secured):
    """The gateway calls the brokers for the SASL user (docs/quotas.md, "Clients of a
    gateway"): alice's user quota throttles her Kafka producer, whatever its client.id, and
    the answers tell it so (throttle_time_ms)."""
    from tidemq.configclient.quotas import QuotaAdmin

    from tests.integration.broker.test_quotas import broker_metric

    broker = secured["cluster"].brokers["broker-a"]
    quotas = QuotaAdmin(ConfigClient(secured["cluster"].config_center.addr))
    quotas.set("user", "alice", {"producer_byte_rate": 10_000})     # 10 kB/s
    quotas.set("client", "alice-app", {"producer_byte_rate": 1 << 30})
    throttle_times: list[float] = []
    producer = ConfluentProducer(_confluent(secured, "SCRAM-SHA-256", ALICE, **{
        "client.id": "alice-app",
        "throttle_cb": lambda event: throttle_times.append(event.throttle_time)}))
    try:
        body = os.urandom(20_000)   # incompressible: the gateway's producer compresses

        def told() -> bool:
            producer.produce(TOPIC, body)
            producer.flush(30)
            return bool(throttle_times)

        wait_until(told, 60, interval=0.2, message="alice's Kafka client to be throttled")
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity="user:alice") > 0
        assert broker_metric(broker, "tidemq_broker_quota_charged_total",
                             entity="client:alice-app") == 0
    finally:
        producer.flush(30)
        quotas.delete("user", "alice")
        quotas.delete("client", "alice-app")


def _alter_retention(secured, user: tuple[str, str], topic: str, value: str,
                     resource_type=None):
    """IncrementalAlterConfigs SET retention.ms as `user`: None, or the error it answered."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient(_confluent(secured, "SCRAM-SHA-256", user))
    resource = ConfigResource(resource_type or ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)])
    try:
        next(iter(admin.incremental_alter_configs([resource], request_timeout=20).values())
             ).result(30)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _carol_alters(secured, carol, topic: str) -> bool:
    """Whether carol's change went through (a user the gateway does not know yet fails SASL
    until the ACL follower has her: a timeout or an error, polled again)."""
    try:
        return _alter_retention(secured, carol, topic, "120000") is None
    except TimeoutError:
        return False


def _retention(secured, topic: str) -> str:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(_confluent(secured, "SCRAM-SHA-256", (ADMIN.access_key,
                                                              ADMIN.secret_key)))
    described = next(iter(admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic)]).values())).result(30)
    return described["retention.ms"].value


def test_topic_config_change_needs_admin_on_that_topic(secured):
    """IncrementalAlterConfigs on a topic is ADMIN on that topic, not on the cluster: a user
    with ADMIN on it alters it; one without (bob: no rule; alice: PUB and SUB only) is refused
    TOPIC_AUTHORIZATION_FAILED with the other gateways' sentence and nothing changes; a broker
    resource still needs cluster ADMIN."""
    from confluent_kafka.admin import AdminClient, ResourceType

    topic, carol = "ksec-settings", ("carol", "carol-secret")
    create_topic_in_config_center(secured["cluster"], topic, 1)
    wait_for_route(secured["cluster"], topic, 1)
    admin: AclAdmin = secured["admin"]
    admin.add_user(User(*carol))
    admin.add_rule(Rule.create("carol-topic", "carol", f"topic:{topic}", ["ADMIN"]))
    wait_until(lambda: _carol_alters(secured, carol, topic), 90, interval=0.5,
               message="carol's ADMIN rule on the topic to apply")
    assert _retention(secured, topic) == "120000"
    for user, who in ((BOB, "bob"), (ALICE, "alice")):
        refusal = _alter_retention(secured, user, topic, "60000")
        assert refusal is not None and \
            refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refusal
        assert refusal.str() == (f"user '{who}' may not ADMIN on topic '{topic}' from "
                                 "127.0.0.1: no rule allows it"), refusal.str()
    assert _retention(secured, topic) == "120000"   # nothing changed
    # carol's topic rule is no cluster right: a broker's config stays cluster ADMIN
    node = next(iter(AdminClient(_confluent(secured, "PLAIN", carol)).list_topics(
        timeout=20).brokers))
    refusal = _alter_retention(secured, carol, str(node), "60000", ResourceType.BROKER)
    assert refusal is not None and refusal.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, \
        refusal
