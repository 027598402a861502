"""Per-topic settings (docs/topics.md) set and shown the same way through the CLI and the HTTP
gateway, against real processes (the shared two-broker cluster with its HTTP gateway)."""

from __future__ import annotations

import random

import pytest
import requests

from tests.support.processes import wait_until

BIG = random.Random(39).randbytes(4096)   # incompressible: the record stays over 2048 bytes


@pytest.fixture(scope="module")
def cluster(shared_gateway_cluster):
    return shared_gateway_cluster


def test_cli_create_alter_describe(tidemq):
    created = tidemq.json("topic", "create", "SettingsCli", "--queues", "1",
                          "--config", "retention.ms=60000", "-c", "cleanup.policy=compact")
    assert created["config"] == {"retention.ms": 60000, "cleanup.policy": "compact"}
    config = tidemq.json("topic", "describe", "SettingsCli")["config"]
    assert config["retention.ms"] == {"value": 60000, "source": "topic"}
    assert config["cleanup.policy"] == {"value": "compact", "source": "topic"}
    assert config["delete.retention.ms"] == {"value": 86400000, "source": "default"}

    altered = tidemq.json("topic", "alter", "SettingsCli", "--config", "retention.bytes=1048576",
                          "--delete-config", "cleanup.policy")["config"]
    assert altered["retention.bytes"] == {"value": 1048576, "source": "topic"}
    assert altered["cleanup.policy"] == {"value": "delete", "source": "default"}
    assert altered["retention.ms"]["value"] == 60000    # untouched
    assert tidemq.json("topic", "describe", "SettingsCli")["config"] == altered
    assert "retention.bytes" in tidemq("topic", "describe", "SettingsCli").stdout   # the table


def test_cli_refuses_bad_settings_naming_them(tidemq):
    bad = tidemq("topic", "create", "SettingsBad", "--config", "retention.ms=later", expect=1)
    assert "INVALID_TOPIC_CONFIG" in bad.stderr and "'retention.ms'" in bad.stderr
    unknown = tidemq("topic", "create", "SettingsBad", "--config", "retention.hours=1",
                     expect=1)
    assert "unknown topic setting 'retention.hours'" in unknown.stderr
    malformed = tidemq("topic", "create", "SettingsBad", "--config", "retention.ms", expect=1)
    assert "NAME=VALUE" in malformed.stderr
    missing = tidemq("topic", "alter", "NoSuchSettingsTopic", "-c", "retention.ms=1", expect=1)
    assert "TOPIC_NOT_EXIST" in missing.stderr
    nothing = tidemq("topic", "alter", "SettingsCli", expect=1)
    assert "nothing to change" in nothing.stderr
    names = {t["name"] for t in tidemq.json("topic", "list")}
    assert "SettingsBad" not in names     # refused before anything was written


def test_http_create_patch_describe(cluster):
    url = cluster.gateway_url
    created = requests.post(f"{url}/v1/topics", json={
        "name": "SettingsHttp", "queues": 1, "config": {"retention.ms": 5000,
                                                        "max.message.bytes": 65536}},
                            timeout=30)
    assert created.status_code in (201, 202), created.text
    assert created.json()["config"]["max.message.bytes"] == {"value": 65536, "source": "topic"}

    patched = requests.patch(f"{url}/v1/topics/SettingsHttp", json={
        "config": {"retention.ms": None, "cleanup.policy": "compact,delete"}}, timeout=30)
    assert patched.status_code == 200, patched.text
    config = patched.json()["config"]
    assert config["retention.ms"]["source"] == "default"
    assert config["cleanup.policy"] == {"value": "compact,delete", "source": "topic"}
    described = requests.get(f"{url}/v1/topics/SettingsHttp", timeout=30).json()
    assert described["config"] == config


@pytest.mark.parametrize(("method", "path", "body", "named"), [
    ("post", "/v1/topics", {"name": "SettingsHttpBad", "config": {"retention.ms": "x"}},
     "'retention.ms'"),
    ("post", "/v1/topics", {"name": "SettingsHttpBad", "config": {"segment.ms": 1}},
     "unknown topic setting 'segment.ms'"),
    ("patch", "/v1/topics/SettingsHttp", {"config": {"cleanup.policy": "sometimes"}},
     "'cleanup.policy'"),
    ("patch", "/v1/topics/SettingsHttp", {"config": {"delete.retention.ms": -5}},
     "'delete.retention.ms'"),
])
def test_http_refuses_bad_settings_naming_them(cluster, method, path, body, named):
    answer = getattr(requests, method)(f"{cluster.gateway_url}{path}", json=body, timeout=30)
    assert answer.status_code == 400, answer.text
    problem = answer.json()
    assert problem["code"] == "INVALID_TOPIC_CONFIG" and named in problem["detail"], problem


def test_http_patch_of_a_missing_topic_is_404(cluster):
    answer = requests.patch(f"{cluster.gateway_url}/v1/topics/NoSuchSettingsTopic",
                            json={"config": {"retention.ms": 1000}}, timeout=30)
    assert answer.status_code == 404 and answer.json()["code"] == "TOPIC_NOT_EXIST", answer.text


def test_brokers_enforce_max_message_bytes_as_altered_live(tidemq, cluster):
    from tidemq.client import Message, Producer
    from tidemq.common import errors

    tidemq("topic", "create", "SettingsMaxBytes", "--queues", "1",
           "--config", "max.message.bytes=2048")
    with Producer(cluster.namesrv_addrs, retries=0) as producer:
        producer.send(Message("SettingsMaxBytes", b"small"))
        with pytest.raises(errors.TideMQError) as refused:
            producer.send(Message("SettingsMaxBytes", BIG))
        assert refused.value.code == "MESSAGE_TOO_LARGE", refused.value
        assert "max.message.bytes=2048" in refused.value.message
        tidemq("topic", "alter", "SettingsMaxBytes", "--config", "max.message.bytes=65536")
        wait_until(lambda: _sends(producer, Message("SettingsMaxBytes", BIG)), 30,
                   message="the brokers to take the raised max.message.bytes")


def _sends(producer, message) -> bool:
    from tidemq.common import errors

    try:
        producer.send(message)
        return True
    except errors.TideMQError as exc:
        assert exc.code == "MESSAGE_TOO_LARGE", exc
        return False
