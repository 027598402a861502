"""gateway-kafka's two listeners in the deployments (docs/kafka.md#listeners): under compose
an internal one advertising the service name and an external one published to the host,
advertising 127.0.0.1 and the published port (following its override); `make up` one listener
on 127.0.0.1, as before."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.compose import ComposeStack
from deploy.render import COMPOSE_FILE, render_compose, render_supervisor
from deploy.topology import (
    ALL_PROFILES,
    REPO_ROOT,
    Placement,
    TopologyError,
    expand,
    load,
    parse,
    published_urls,
)
from tests.support.tools import needs_tool

GATEWAYS = {"gateway-kafka": (9092, 9094), "gateway-kafka-2": (9093, 9095)}


def _flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_compose_runs_an_internal_and_a_published_external_listener():
    services = yaml.safe_load(render_compose(load(profiles=ALL_PROFILES)))["services"]
    for name, (internal, external) in GATEWAYS.items():
        command, env = services[name]["command"], name.upper().replace("-", "_")
        assert (_flag(command, "--port"), _flag(command, "--advertised-host")) == \
            (str(internal), name)
        assert _flag(command, "--external-port") == str(external)
        assert _flag(command, "--external-advertised-addr") == \
            f"127.0.0.1:${{TIDEMQ_{env}_EXTERNAL_PORT:-{external}}}"
        published = services[name]["ports"]
        assert f"127.0.0.1:${{TIDEMQ_{env}_EXTERNAL_PORT:-{external}}}:{external}" in published
        # the internal listener is not published: a host client would be sent to `name`
        assert not any(p.endswith(f":{internal}") for p in published), published


def test_make_up_keeps_one_listener_on_loopback(tmp_path: Path):
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(load(), Placement(port_offset=500),
                                         run_dir=tmp_path, data_dir=tmp_path))
    for name, (internal, _) in GATEWAYS.items():
        command = config[f"program:{name}"]["command"]
        assert f"--port {internal + 500} " in command
        assert "--advertised-host 127.0.0.1 " in command and "external" not in command
    lines = published_urls(load(), Placement(port_offset=0))
    assert any(line.strip().startswith("kafka://127.0.0.1:9092 ") for line in lines)


def test_compose_urls_name_the_external_bootstrap_at_its_published_port():
    stack = ComposeStack(host_ports={"gateway-kafka.external": 29094})
    kafka = [line for line in stack.urls() if line.strip().startswith("kafka://")]
    assert len(kafka) == 2, kafka
    assert "kafka://127.0.0.1:29094" in kafka[0] and "clients on this host" in kafka[0]
    assert "kafka://127.0.0.1:9095" in kafka[1]
    assert stack.env()["TIDEMQ_GATEWAY_KAFKA_EXTERNAL_PORT"] == "29094"


@needs_tool("docker-compose")
def test_an_overridden_published_port_is_the_advertised_one():
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "TIDEMQ_GATEWAY_KAFKA_EXTERNAL_PORT": "29094"}
    check = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config"],
                           capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert check.returncode == 0, check.stderr
    service = yaml.safe_load(check.stdout)["services"]["gateway-kafka"]
    assert _flag(service["command"], "--external-advertised-addr") == "127.0.0.1:29094"
    port = service["ports"][0]
    if isinstance(port, str):  # docker-compose 1.x keeps the short syntax
        assert port.startswith("127.0.0.1:29094:9094")
    else:
        assert (str(port["published"]), str(port["target"])) == ("29094", "9094")


def _topology(compose) -> dict:
    return {"images": {"x": {"dockerfile_dir": "x", "package": "p"}}, "services": {
        "k": {"image": "x", "module": "m", "ports": {"kafka": 1, "metrics": 2},
              "health": {"kind": "grpc"}, "compose": compose}}}


def test_compose_parts_merge_once_and_published_follows_the_placement():
    topology = parse(_topology({"ports": {"external": 3}, "publish": ["external"],
                                "args": ["--x", "127.0.0.1:{published:external}"]}))
    plain = topology.services["k"]
    assert (plain.ports, plain.args) == ({"kafka": 1, "metrics": 2}, ())
    composed = topology.under_compose().under_compose().services["k"]
    assert composed.ports == {"kafka": 1, "metrics": 2, "external": 3}
    assert composed.publish == ("external",)
    assert composed.args == ("--x", "127.0.0.1:{published:external}")
    assert expand(composed.args[1], composed, topology, Placement(compose=True)) == \
        "127.0.0.1:${TIDEMQ_K_EXTERNAL_PORT:-3}"
    assert expand(composed.args[1], composed, topology, Placement(port_offset=10)) == \
        "127.0.0.1:13"


@pytest.mark.parametrize(("compose", "sentence"), [
    ({"volumes": []}, "compose: takes only"),
    ({"ports": {"kafka": 5}}, "are already ports"),
    ({"publish": ["nope"]}, "compose: publishes unknown ports"),
    ({"ports": {"metrics2": 1}}, "port 1 used by both"),
])
def test_bad_compose_parts_are_refused(compose, sentence):
    with pytest.raises(TopologyError, match=sentence):
        parse(_topology(compose))
