"""gateway-kafka's listener settings and registrations (docs/kafka.md#listeners)."""

from __future__ import annotations

import pytest
from tidemq.common.settings import SettingsError, load_settings
from tidemq.gatewaykafka.nodes import EXTERNAL, INTERNAL, Node
from tidemq.gatewaykafka.settings import KafkaGatewaySettings


def _settings(*argv: str) -> KafkaGatewaySettings:
    return load_settings(KafkaGatewaySettings, list(argv))


def test_no_external_listener_by_default():
    settings = _settings()
    assert settings.external_port == -1 and settings.external_endpoint() is None


def test_external_listener_settings_from_flags_and_environment(monkeypatch):
    settings = _settings("--external-port", "29092",
                         "--external-advertised-addr", "127.0.0.1:19092")
    assert settings.external_endpoint() == ("127.0.0.1", 19092)
    monkeypatch.setenv("TIDEMQ_EXTERNAL_PORT", "0")
    monkeypatch.setenv("TIDEMQ_EXTERNAL_ADVERTISED_ADDR", "[::1]:9094")
    assert _settings().external_endpoint() == ("::1", 9094)


@pytest.mark.parametrize(("argv", "sentence"), [
    (["--external-port", "-2"], "external_port must be -1 (no external listener)"),
    (["--external-port", "70000"], "external_port must be -1"),
    (["--port", "9092", "--external-port", "9092"], "is the internal listener's port"),
    (["--external-advertised-addr", "h:1"], "there is no external listener"),
    (["--external-port", "0", "--external-advertised-addr", "h"], "must be host:port"),
    (["--external-port", "0", "--external-advertised-addr", ":9094"], "must be host:port"),
    (["--external-port", "0", "--external-advertised-addr", "h:0"], "a port 1..65535"),
    (["--external-port", "0", "--external-advertised-addr", "h:x"], "must be host:port"),
    (["--port", "-1"], "port must be 0..65535"),
])
def test_bad_listener_settings_are_refused_with_a_sentence(argv, sentence):
    with pytest.raises(SettingsError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        _settings(*argv)


def test_a_registration_carries_both_addresses_and_each_listener_gets_its_own():
    node = Node(7, "gateway-kafka", 9092, None, "127.0.0.1", 9094)
    again = Node.from_json(node.to_json().encode())
    assert again == node
    assert again.endpoint(INTERNAL) == ("gateway-kafka", 9092)
    assert again.endpoint(EXTERNAL) == ("127.0.0.1", 9094)


def test_an_instance_without_an_external_listener_is_listed_by_its_internal_address():
    plain = Node(8, "gateway-kafka-2", 9093)
    assert Node.from_json(plain.to_json().encode()).endpoint(EXTERNAL) == ("gateway-kafka-2", 9093)
    # a registration written before listeners existed has no "external" key at all
    old = b'{"node_id": 9, "host": "10.0.0.9", "port": 9092, "rack": null}'
    assert Node.from_json(old).endpoint(EXTERNAL) == ("10.0.0.9", 9092)


def test_each_listener_has_a_security_protocol_and_the_external_takes_the_internal_one(
        monkeypatch):
    assert _settings().listener_protocols() == ("PLAINTEXT", "PLAINTEXT")
    assert _settings("--auth-enabled", "true", "--tls-cert-file", "c.pem", "--tls-key-file",
                     "k.pem").listener_protocols() == ("SASL_SSL", "SASL_SSL")
    settings = _settings("--auth-enabled", "true", "--tls-cert-file", "c.pem",
                         "--tls-key-file", "k.pem", "--security-protocol", "plaintext",
                         "--external-port", "0")
    assert settings.listener_protocols() == ("PLAINTEXT", "PLAINTEXT")
    monkeypatch.setenv("TIDEMQ_EXTERNAL_SECURITY_PROTOCOL", "SASL_SSL")
    settings = _settings("--auth-enabled", "true", "--tls-cert-file", "c.pem",
                         "--tls-key-file", "k.pem", "--security-protocol", "PLAINTEXT",
                         "--external-port", "0")
    assert settings.listener_protocols() == ("PLAINTEXT", "SASL_SSL")


@pytest.mark.parametrize(("argv", "sentence"), [
    (["--security-protocol", "TLS"], "security_protocol must be one of PLAINTEXT, SSL, "
                                     "SASL_PLAINTEXT, SASL_SSL, got 'TLS'"),
    (["--security-protocol", "SSL"], "security_protocol SSL needs a certificate"),
    (["--external-port", "0", "--external-security-protocol", "SASL_SSL", "--auth-enabled",
      "true"], "external_security_protocol SASL_SSL needs a certificate: set tls_cert_file"),
    (["--security-protocol", "SASL_PLAINTEXT"], "security_protocol SASL_PLAINTEXT needs "
                                                "auth_enabled"),
    (["--external-security-protocol", "SSL"], "external_security_protocol is set but there "
                                              "is no external listener"),
])
def test_bad_security_protocols_are_refused_with_a_sentence(argv, sentence):
    with pytest.raises(SettingsError, match=sentence):
        _settings(*argv)
