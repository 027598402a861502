"""A security protocol per listener (docs/kafka.md#listeners; Kafka's
listener.security.protocol.map): one gateway-kafka in a secured cluster with a PLAINTEXT
internal listener and a SASL_SSL external one. A plaintext client round-trips on the first as
the user ANONYMOUS (the ACL lets ANONYMOUS use one topic and group only, refusing the rest with
TOPIC_AUTHORIZATION_FAILED), a SASL_SSL client round-trips on the second; a plaintext client on
the SASL_SSL listener and a SASL client on the PLAINTEXT one both fail, as with Kafka."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from tidemq.common.auth.acl import Rule, User

from tests.integration.kafka.secured import consume, produce, secured_cluster
from tests.integration.security.conftest import secure_env

pytestmark = pytest.mark.slow

TOPIC, OTHER, GROUP = "kproto-open", "kproto-closed", "kproto-group"
ALICE = ("alice", "alice-secret")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with secured_cluster(tmp_path_factory, "kproto", (TOPIC, OTHER)) as (cluster, cert_dir,
                                                                          admin):
        admin.add_user(User(*ALICE))
        for user in ("alice", "ANONYMOUS"):
            admin.add_rule(Rule.create(f"{user}-topic", user, f"topic:{TOPIC}",
                                       ["PUB", "SUB"]))
            admin.add_rule(Rule.create(f"{user}-group", user, f"group:{GROUP}*", ["SUB"]))
        started = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1",
            "--security-protocol", "PLAINTEXT", "--external-port", "0",
            "--external-security-protocol", "SASL_SSL",
        ], env=secure_env(cert_dir))
        yield {"plaintext": started.addr,
               "sasl_ssl": f"127.0.0.1:{started.info['external_port']}",
               "ca": str(cert_dir / "ca.pem")}


def _plaintext(gateway, listener: str = "plaintext", **extra) -> dict:
    return {"bootstrap.servers": gateway[listener], **extra}


def _sasl_ssl(gateway, listener: str = "sasl_ssl", **extra) -> dict:
    return {"bootstrap.servers": gateway[listener], "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE[0],
            "sasl.password": ALICE[1], "ssl.ca.location": gateway["ca"], **extra}


def _produce(config: dict, topic: str, values: list[bytes]) -> list:
    return produce(config, topic, values)


def _consume(config: dict, wanted: list[bytes]) -> list[bytes]:
    return consume({**config, "group.id": f"{GROUP}-{uuid.uuid4().hex[:6]}"}, TOPIC, wanted)


@pytest.mark.parametrize("listener", ["plaintext", "sasl_ssl"])
def test_a_client_round_trips_on_each_listener_with_its_own_settings(gateway, listener):
    config = (_plaintext if listener == "plaintext" else _sasl_ssl)(gateway)
    values = [f"{listener}-{uuid.uuid4().hex}".encode() for _ in range(3)]
    assert _produce(config, TOPIC, values) == [None] * 3
    assert set(values) <= set(_consume(config, values))


def test_anonymous_on_the_plaintext_listener_is_refused_what_the_acl_does_not_allow(gateway):
    outcomes = _produce(_plaintext(gateway), OTHER, [b"never stored"])
    assert outcomes[0] is not None
    assert outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, outcomes


def _first_error(config: dict) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 5000,
                         "socket.timeout.ms": 5000})
    producer.produce(TOPIC, b"wrong listener")
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    producer.flush(10)
    assert errors, "the client on the wrong listener saw no error"
    return errors[0]


def test_a_plaintext_client_fails_on_the_sasl_ssl_listener(gateway):
    error = _first_error(_plaintext(gateway, "sasl_ssl"))
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error


def test_a_sasl_client_is_refused_on_the_plaintext_listener(gateway):
    # SASL_PLAINTEXT, so the TLS handshake is not what fails: the SaslHandshake is refused
    config = {**_sasl_ssl(gateway, "plaintext"), "security.protocol": "SASL_PLAINTEXT"}
    config.pop("ssl.ca.location")
    error = _first_error(config)
    # Kafka's answer on a listener without SASL: ILLEGAL_SASL_STATE, no mechanisms offered
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "Request not valid in current SASL state" in error.str(), error
