"""The control plane of the topology: three etcd members and two config centers given every
member's client address, rendered for supervisord and compose alike; `ETCD=single` runs one
member; one plain Redis stays for the gateways' breaker state. test_supervisor_mechanics runs
the members for real."""

from __future__ import annotations

import configparser
import copy
from pathlib import Path

import pytest
import yaml

from deploy.render import render_compose, render_supervisor
from deploy.topology import (
    TOPOLOGY_FILE,
    Placement,
    TopologyError,
    env_overrides,
    load,
    parse,
    published_urls,
)

MEMBERS = ("etcd-1", "etcd-2", "etcd-3")
CLIENT_PORTS = (2379, 2381, 2383)
PEER_PORTS = (2380, 2382, 2384)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def supervisor(tmp_path: Path, **load_args) -> configparser.RawConfigParser:
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(load(**load_args), Placement(port_offset=500),
                                         run_dir=tmp_path, data_dir=tmp_path,
                                         redis_server="/usr/bin/redis-server",
                                         etcd="/usr/bin/etcd"))
    return config


def test_three_members_with_client_and_peer_ports_side_by_side():
    services = load().services
    assert {n: s.ports for n, s in services.items() if n.startswith("etcd")} == {
        name: {"client": client, "peer": peer}
        for name, client, peer in zip(MEMBERS, CLIENT_PORTS, PEER_PORTS, strict=True)}
    for name in MEMBERS:
        assert services[name].stateful and services[name].is_etcd
        assert services[name].health.path == "/health"
    assert not [n for n in services if "sentinel" in n or "replica-" in n and "redis" in n]


def test_compose_members_form_one_cluster_by_service_name_each_on_its_own_volume():
    services = yaml.safe_load(render_compose(load()))["services"]
    cluster = "etcd-1=http://etcd-1:2380,etcd-2=http://etcd-2:2382,etcd-3=http://etcd-3:2384"
    for name, client, peer in zip(MEMBERS, CLIENT_PORTS, PEER_PORTS, strict=True):
        command = services[name]["command"]
        assert command[0] == "etcd"
        assert flag(command, "--name") == name
        assert flag(command, "--data-dir") == "/data"
        assert flag(command, "--listen-client-urls") == f"http://0.0.0.0:{client}"
        assert flag(command, "--advertise-client-urls") == f"http://{name}:{client}"
        assert flag(command, "--listen-peer-urls") == f"http://0.0.0.0:{peer}"
        assert flag(command, "--initial-advertise-peer-urls") == f"http://{name}:{peer}"
        assert flag(command, "--initial-cluster") == cluster
        assert flag(command, "--initial-cluster-token") == "tidemq-etcd"
        assert flag(command, "--initial-cluster-state") == "new"
        assert (flag(command, "--heartbeat-interval"), flag(command, "--election-timeout")) \
            == ("100", "1000")
        assert (flag(command, "--auto-compaction-mode"),
                flag(command, "--auto-compaction-retention")) == ("revision", "100000")
        assert services[name]["volumes"] == [f"{name}-data:/data"]
        assert services[name]["build"]["dockerfile"] == "deploy/etcd/Dockerfile"
        assert services[name]["ports"] == [f"127.0.0.1:${{TIDEMQ_{name.upper().replace('-', '_')}"
                                           f"_PORT:-{client}}}:{client}"]
        assert services[name]["healthcheck"]["test"][-1] == f"http://127.0.0.1:{client}/health"
        assert "depends_on" not in services[name]   # they start together: a leader needs 2


def test_config_centers_are_given_every_member_and_the_gateway_the_one_redis():
    services = yaml.safe_load(render_compose(load()))["services"]
    for name in ("config-center-1", "config-center-2"):
        command = services[name]["command"]
        assert flag(command, "--etcd-endpoints") == "etcd-1:2379,etcd-2:2381,etcd-3:2383"
        assert "--redis-url" not in command
        assert set(services[name]["depends_on"]) == set(MEMBERS)
    assert flag(services["gateway-http"]["command"], "--redis-url") == "redis://redis:6379/0"
    assert services["redis"]["command"][0] == "redis-server"
    assert services["redis"]["build"]["dockerfile"] == "deploy/redis/Dockerfile"
    assert set(services["namesrv-1"]["depends_on"]) == {"config-center-1", "config-center-2"}


def test_make_up_runs_members_on_loopback_on_shifted_ports(tmp_path):
    config = supervisor(tmp_path)
    argv = config["program:etcd-2"]["command"].split()
    assert argv[0] == "/usr/bin/etcd"
    assert flag(argv, "--data-dir") == str(tmp_path / "etcd-2")
    assert flag(argv, "--listen-client-urls") == "http://127.0.0.1:2881"
    assert flag(argv, "--initial-advertise-peer-urls") == "http://127.0.0.1:2882"
    assert flag(argv, "--initial-cluster") == ("etcd-1=http://127.0.0.1:2880,"
                                               "etcd-2=http://127.0.0.1:2882,"
                                               "etcd-3=http://127.0.0.1:2884")
    assert ("--etcd-endpoints 127.0.0.1:2879,127.0.0.1:2881,127.0.0.1:2883"
            in config["program:config-center-2"]["command"])
    assert "--port 7571" in config["program:config-center-2"]["command"]
    assert "--redis-url redis://127.0.0.1:6879/0" in config["program:gateway-http"]["command"]
    assert config["program:redis"]["command"].startswith("/usr/bin/redis-server ")
    priority = {n: int(config[f"program:{n}"]["priority"]) for n in (*MEMBERS, "redis")}
    assert len(set(priority.values())) == 1   # one tier: started together


def test_etcd_single_runs_one_member(tmp_path):
    assert env_overrides({"TIDEMQ_ETCD": "single", "TIDEMQ_REPLICAS": ""}) == \
        {"replicas": None, "etcd": "single"}
    topology = load(etcd="single")
    assert [s.name for s in topology.etcd_members()] == ["etcd-1"]
    assert {"config-center-1", "config-center-2"} <= set(topology.services)
    config = supervisor(tmp_path, etcd="single")
    argv = config["program:etcd-1"]["command"].split()
    assert flag(argv, "--initial-cluster") == "etcd-1=http://127.0.0.1:2880"
    assert config["program:config-center-1"]["command"].endswith(
        "--etcd-endpoints 127.0.0.1:2879")
    assert load(etcd="cluster").etcd_members() == load().etcd_members()
    with pytest.raises(TopologyError, match="etcd mode"):
        load(etcd="sentinel")


def test_make_up_prints_every_member_and_the_redis():
    lines = {line.split()[1]: line.split()[0] for line in published_urls(load(), Placement())}
    for name, port in zip(MEMBERS, CLIENT_PORTS, strict=True):
        assert lines[name] == f"http://127.0.0.1:{port}"
    assert lines["redis"] == "redis://127.0.0.1:6379"


def control_plane(**settings):
    data = yaml.safe_load(TOPOLOGY_FILE.read_text())
    data["control_plane"] = {**data["control_plane"], **settings}
    return parse(copy.deepcopy(data))


@pytest.mark.parametrize("settings, message", [
    ({"etcd_members": 2}, "must be odd"),
    ({"etcd_members": 0}, "must be odd"),
    ({"election_timeout_ms": 400}, "5 x heartbeat"),
    ({"config_centers": 0}, "config_centers"),
    ({"auto_compaction_retention": 0}, "auto_compaction_retention"),
    ({"redis_replicas": 2}, "redis_replicas"),   # the Redis tier's settings are gone
])
def test_inconsistent_control_plane_settings_are_refused(settings, message):
    with pytest.raises(TopologyError, match=message):
        control_plane(**settings)


def test_more_members_are_more_services_and_every_follower_lists_the_config_centers():
    topology = control_plane(etcd_members=5, config_centers=3)
    assert [s.name for s in topology.etcd_members()] == [f"etcd-{n}" for n in range(1, 6)]
    assert topology.services["etcd-5"].ports == {"client": 2387, "peer": 2388}
    compose = yaml.safe_load(render_compose(topology))["services"]
    assert flag(compose["broker-b-0"]["command"], "--config-center").count(",") == 2
    assert flag(compose["config-center-3"]["command"], "--etcd-endpoints").count(",") == 4


def test_the_old_single_service_name_is_no_address_any_more():
    data = yaml.safe_load(TOPOLOGY_FILE.read_text())
    data["services"]["namesrv-1"]["args"] = ["--config-center", "{addr:config-center}"]
    with pytest.raises(TopologyError, match="names no service"):
        render_compose(parse(data))
