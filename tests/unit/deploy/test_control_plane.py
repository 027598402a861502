"""The control plane of the topology: a Redis master, two replicas and three Sentinels, and two
config centers reaching the master through them, rendered for supervisord and compose alike;
`REDIS=single` keeps one Redis. The launcher that writes each node's and Sentinel's own config
is checked here for its file handling; test_supervisor_mechanics runs it with real Redis."""

from __future__ import annotations

import configparser
import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.redis_tier import LAUNCHER
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

NODES = ("redis", "redis-replica-1", "redis-replica-2")
SENTINELS = ("sentinel-1", "sentinel-2", "sentinel-3")
SENTINEL_URL = "redis+sentinel://{}:26379,{}:26380,{}:26381/tidemq/{}"


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def directives(argv: list[str]) -> list[str]:
    """The config lines the launcher writes from a command line (--name args...)."""
    lines: list[str] = []
    for word in argv:
        if word.startswith("--"):
            lines.append(word[2:])
        elif lines:
            lines[-1] += f" {word}"
    return lines


def supervisor(tmp_path: Path, **load_args) -> configparser.RawConfigParser:
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(load(**load_args), Placement(port_offset=500),
                                         run_dir=tmp_path, data_dir=tmp_path,
                                         redis_server="/usr/bin/redis-server",
                                         redis_sentinel="/usr/bin/redis-sentinel"))
    return config


def test_compose_redis_nodes_replicate_refuse_unfollowed_writes_and_announce_their_names():
    services = yaml.safe_load(render_compose(load()))["services"]
    for node in NODES:
        command = services[node]["command"]
        assert command[:2] == ["redis-server", "/data/redis.conf"], node  # the image's launcher
        lines = directives(command[2:])
        for line in ("appendonly yes", "appendfsync always", "min-replicas-to-write 1",
                     "min-replicas-max-lag 5", f"replica-announce-ip {node}"):
            assert line in lines, (node, line)
        assert ("replicaof redis 6379" in lines) == (node != "redis")
        assert services[node]["volumes"] == [f"{node}-data:/data"]
        assert services[node]["environment"]["TIDEMQ_SENTINELS"] == \
            "sentinel-1:26379,sentinel-2:26380,sentinel-3:26381"
        assert services[node]["environment"]["TIDEMQ_REDIS_ADDRESS"] == \
            f"{node} {6379 + NODES.index(node)}"


def test_compose_sentinels_monitor_the_master_by_name_with_the_topology_timings():
    services = yaml.safe_load(render_compose(load()))["services"]
    for index, name in enumerate(SENTINELS):
        command = services[name]["command"]
        assert command[:2] == ["redis-sentinel", "/data/sentinel.conf"]
        assert directives(command[2:]) == [
            "bind 0.0.0.0", f"port {26379 + index}", "dir /data", "protected-mode no",
            "sentinel resolve-hostnames yes", "sentinel announce-hostnames yes",
            f"sentinel announce-ip {name}",
            "sentinel monitor tidemq redis 6379 2",
            "sentinel down-after-milliseconds tidemq 2000",
            "sentinel failover-timeout tidemq 10000",
            "sentinel parallel-syncs tidemq 1",
        ]
        assert services[name]["volumes"] == [f"{name}-data:/data"]
        assert services[name]["healthcheck"]["test"] == \
            ["CMD", "redis-cli", "-p", str(26379 + index), "ping"]
        assert set(services[name]["depends_on"]) == set(NODES)


def test_config_centers_and_the_gateway_breaker_reach_redis_through_the_sentinels():
    services = yaml.safe_load(render_compose(load()))["services"]
    for name in ("config-center-1", "config-center-2"):
        assert flag(services[name]["command"], "--redis-url") == \
            SENTINEL_URL.format(*SENTINELS, 0)
        assert set(services[name]["depends_on"]) == {*NODES, *SENTINELS}
    assert flag(services["gateway-http"]["command"], "--redis-url") == \
        SENTINEL_URL.format(*SENTINELS, 1)
    assert set(services["namesrv-1"]["depends_on"]) == {"config-center-1", "config-center-2"}


def test_make_up_runs_nodes_and_sentinels_through_the_launcher_on_shifted_ports(tmp_path):
    config = supervisor(tmp_path)
    replica = config["program:redis-replica-1"]
    argv = replica["command"].split()
    assert argv[:4] == ["sh", str(LAUNCHER), "/usr/bin/redis-server",
                        str(tmp_path / "redis-replica-1" / "redis.conf")]
    lines = directives(argv[4:])
    assert "replicaof 127.0.0.1 6879" in lines and "port 6880" in lines
    assert not [line for line in lines if "announce" in line]  # loopback needs no names
    assert 'TIDEMQ_REDIS_ADDRESS="127.0.0.1 6880"' in replica["environment"]
    assert 'TIDEMQ_SENTINELS="127.0.0.1:26879,127.0.0.1:26880,127.0.0.1:26881"' in \
        replica["environment"]
    sentinel = config["program:sentinel-2"]["command"].split()
    assert sentinel[2:4] == ["/usr/bin/redis-sentinel",
                             str(tmp_path / "sentinel-2" / "sentinel.conf")]
    assert "sentinel monitor tidemq 127.0.0.1 6879 2" in directives(sentinel[4:])
    assert "TIDEMQ_SENTINELS" not in config["program:sentinel-2"]["environment"]
    assert ("--redis-url redis+sentinel://127.0.0.1:26879,127.0.0.1:26880,127.0.0.1:26881"
            "/tidemq/0") in config["program:config-center-2"]["command"]
    assert "--port 7571" in config["program:config-center-2"]["command"]


def test_redis_single_runs_one_redis_without_sentinels(tmp_path):
    assert env_overrides({"TIDEMQ_REDIS": "single", "TIDEMQ_REPLICAS": ""}) == \
        {"replicas": None, "redis": "single"}
    topology = load(redis="single")
    assert [s.name for s in topology.services.values() if s.group in ("redis", "sentinel")] == \
        ["redis"]
    assert {"config-center-1", "config-center-2"} <= set(topology.services)
    config = supervisor(tmp_path, redis="single")
    redis = config["program:redis"]["command"].split()
    assert redis[0] == "/usr/bin/redis-server" and "--min-replicas-to-write" not in redis
    assert "TIDEMQ_SENTINELS" not in config["program:redis"]["environment"]
    assert "--redis-url redis://127.0.0.1:6879/0" in config["program:config-center-1"]["command"]
    assert "--redis-url redis://127.0.0.1:6879/1" in config["program:gateway-http"]["command"]
    assert config["program:config-center-1"]["priority"] == "20"  # right after redis
    with pytest.raises(TopologyError, match="redis mode"):
        load(redis="cluster")


def test_make_up_prints_every_node_and_sentinel():
    lines = {line.split()[1]: line.split()[0] for line in published_urls(load(), Placement())}
    ports = (6379, 6380, 6381, 26379, 26380, 26381)
    for name, port in zip((*NODES, *SENTINELS), ports, strict=True):
        assert lines[name] == f"redis://127.0.0.1:{port}"


def control_plane(**settings):
    data = yaml.safe_load(TOPOLOGY_FILE.read_text())
    data["control_plane"] = {**data["control_plane"], **settings}
    return parse(copy.deepcopy(data))


@pytest.mark.parametrize("settings, message", [
    ({"redis_replicas": 0}, "Sentinels need"),
    ({"quorum": 4}, "quorum"),
    ({"sentinels": 0}, "replicas need Sentinels"),
    ({"min_replicas_to_write": 3}, "min_replicas_to_write"),
    ({"config_centers": 0}, "config_centers"),
])
def test_inconsistent_control_plane_settings_are_refused(settings, message):
    with pytest.raises(TopologyError, match=message):
        control_plane(**settings)


def test_more_instances_are_more_services_and_every_follower_lists_them():
    topology = control_plane(redis_replicas=3, sentinels=5, quorum=3, config_centers=3)
    names = set(topology.services)
    assert {"redis-replica-3", "sentinel-5", "config-center-3"} <= names
    argv = yaml.safe_load(render_compose(topology))["services"]["broker-b"]["command"]
    assert flag(argv, "--config-center").count(",") == 2


def test_the_old_single_service_name_is_no_address_any_more():
    data = yaml.safe_load(TOPOLOGY_FILE.read_text())
    data["services"]["namesrv-1"]["args"] = ["--config-center", "{addr:config-center}"]
    with pytest.raises(TopologyError, match="names no service"):
        render_compose(parse(data))


# --- the launcher's config file ---------------------------------------------------------------


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """Stands for redis-sentinel: prints the command line the launcher ends with."""
    path = tmp_path / "bin" / "redis-sentinel"
    path.parent.mkdir()
    path.write_text('#!/bin/sh\necho "ran $*"\n')
    path.chmod(0o755)
    return path


def launch(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(LAUNCHER), *argv], capture_output=True, text=True,
                          timeout=30)


def test_launcher_writes_the_config_from_the_directives_only_when_missing(tmp_path, program):
    conf = tmp_path / "sentinel.conf"
    ran = launch(str(program), str(conf), "--port", "26379", "--sentinel", "monitor", "tidemq",
                 "127.0.0.1", "6379", "2")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"ran {conf}"  # the directives live in the file only
    assert conf.read_text() == "port 26379\nsentinel monitor tidemq 127.0.0.1 6379 2\n"
    conf.write_text("port 26379\nsentinel monitor tidemq 127.0.0.1 6380 2\n")  # as Sentinel
    assert launch(str(program), str(conf), "--port", "1").returncode == 0     # rewrites it
    assert "6380" in conf.read_text() and "port 1" not in conf.read_text()


def test_launcher_refuses_a_value_before_any_directive_and_passes_other_commands(tmp_path,
                                                                                 program):
    refused = launch(str(program), str(tmp_path / "x.conf"), "26379", "--port", "1")
    assert refused.returncode != 0 and "before any --directive" in refused.stderr
    assert not list(tmp_path.glob("x.conf*"))
    assert launch("echo", "redis-server", "--port", "1").stdout == "redis-server --port 1\n"
