"""Rendered deployments: committed files in sync, compose properties, supervisord config."""

from __future__ import annotations

import configparser
import subprocess
import tomllib
from pathlib import Path

import yaml

from deploy.render import (
    COMPOSE_FILE,
    render_compose,
    render_dockerfiles,
    render_supervisor,
    rendered_files,
    service_argv,
)
from deploy.topology import ALL_PROFILES, REPO_ROOT, Placement, load
from tests.support.tools import needs_tool


def test_committed_compose_file_and_dockerfiles_match_the_renderer():
    for path, text in rendered_files(load(profiles=ALL_PROFILES)).items():
        assert path.read_text() == text, f"{path} is stale: run `python -m deploy.render`"


def test_compose_services_are_healthchecked_restarted_and_published_on_loopback_only():
    document = yaml.safe_load(render_compose(load(profiles=ALL_PROFILES)))
    for name, service in document["services"].items():
        assert service["restart"] == "unless-stopped", name
        assert service["healthcheck"]["test"][0] == "CMD", name
        for mapping in service.get("ports", []):
            assert mapping.startswith("127.0.0.1:"), mapping
        for dependency in service.get("depends_on", {}).values():
            assert dependency == {"condition": "service_healthy"}



def test_compose_probes_that_start_python_run_every_10_s_and_give_up_after_two_minutes():
    """A probe runs for the stack's whole life: a Python one (~0.2 s of CPU) every 10 s, a
    redis-cli one (milliseconds) every 3 s so the first tier is healthy quickly. Each has 10 s
    to answer: a loaded host may take seconds to schedule it."""
    document = yaml.safe_load(render_compose(load(profiles=ALL_PROFILES)))
    for name, service in document["services"].items():
        check = service["healthcheck"]
        interval = int(check["interval"].removesuffix("s"))
        assert interval == (3 if check["test"][1] == "redis-cli" else 10), name
        assert check["timeout"] == "10s" and interval * check["retries"] == 120, name

def test_compose_etcd_and_redis_keep_their_data_and_stateful_services_have_named_volumes():
    topology = load(profiles=ALL_PROFILES)
    document = yaml.safe_load(render_compose(topology))
    assert "--appendonly" in document["services"]["redis"]["command"]
    for member in ("etcd-1", "etcd-2", "etcd-3"):
        command = document["services"][member]["command"]
        assert command[command.index("--data-dir") + 1] == "/data"
    data_paths = {"grafana": "/var/lib/grafana"}  # where the upstream image keeps its data
    for service in topology.services.values():
        if service.stateful:
            volume = f"{service.name}-data"
            assert volume in document["volumes"]
            path = data_paths.get(service.program, "/data")
            assert document["services"][service.name]["volumes"][0] == f"{volume}:{path}"


def test_compose_addresses_use_service_names():
    command = yaml.safe_load(render_compose(load()))["services"]["broker-a-0"]["command"]
    assert command[command.index("--namesrv-addrs") + 1] == "namesrv-1:9876;namesrv-2:9877"
    assert command[command.index("--advertised-host") + 1] == "broker-a-0"
    assert command[command.index("--otlp-endpoint") + 1] == "trace-collector:4317"



# every service that follows the config center (dynamic settings, ACL): --config-center, or
# gateway-grpc's --auth-config-center
FOLLOWERS = {"namesrv-1": "--config-center", "namesrv-2": "--config-center",
             "trace-collector": "--config-center", "broker-a-0": "--config-center",
             "broker-a-2": "--config-center", "gateway-http": "--config-center",
             "gateway-grpc": "--auth-config-center"}


def test_every_follower_is_given_both_config_centers_in_both_deployments(tmp_path: Path):
    compose = yaml.safe_load(render_compose(load()))["services"]
    for name, flag in FOLLOWERS.items():
        command = compose[name]["command"]
        assert command[command.index(flag) + 1] == \
            "config-center-1:7070,config-center-2:7071", name
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(load(), Placement(port_offset=500),
                                         run_dir=tmp_path, data_dir=tmp_path))
    for name, flag in FOLLOWERS.items():
        assert f"{flag} 127.0.0.1:7570,127.0.0.1:7571" in \
            config[f"program:{name}"]["command"], name
    following = {name for name, service in compose.items()
                 if {"--config-center", "--auth-config-center"} & set(service.get("command", ()))}
    assert following == {n for n in load().services
                         if n.startswith(("namesrv", "broker", "gateway", "trace"))}


@needs_tool("docker-compose")
def test_docker_compose_accepts_the_file_and_the_port_overrides():
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "TIDEMQ_GATEWAY_HTTP_PORT": "18123"}
    check = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE_FILE), "config"],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    port = yaml.safe_load(check.stdout)["services"]["gateway-http"]["ports"][0]
    if isinstance(port, str):  # docker-compose 1.x keeps the short syntax
        assert port.startswith("127.0.0.1:18123:8080")
    else:
        assert (str(port["published"]), port["host_ip"]) == ("18123", "127.0.0.1")


def test_supervisor_config_runs_every_service_with_autorestart(tmp_path: Path):
    topology = load()
    text = render_supervisor(
        topology, Placement(port_offset=500), run_dir=tmp_path / "run", data_dir=tmp_path
    )
    config = configparser.RawConfigParser()
    config.read_string(text)
    programs = {s.split(":", 1)[1] for s in config.sections() if s.startswith("program:")}
    assert programs == set(topology.services)
    for name in programs:
        section = config[f"program:{name}"]
        assert section["autorestart"] == "true"
        assert section["stopasgroup"] == "true"
        assert str(tmp_path / name) in section["command"]
    assert "--port 11421" in config["program:broker-b-0"]["command"]  # 10921 + 500
    assert "'127.0.0.1:10376;127.0.0.1:10377'" in config["program:broker-b-0"]["command"]


def test_priorities_follow_dependencies(tmp_path: Path):
    topology = load()
    config = configparser.RawConfigParser()
    config.read_string(
        render_supervisor(topology, Placement(), run_dir=tmp_path, data_dir=tmp_path)
    )
    priority = {n: int(config[f"program:{n}"]["priority"]) for n in topology.services}
    for service in topology.services.values():
        for dependency in service.depends_on:
            assert priority[dependency] < priority[service.name]


def test_every_tidemq_service_gets_the_common_flags():
    topology = load()
    for service in topology.services.values():
        if service.module is None:  # etcd members, Redis, the profiles' programs
            continue
        argv = service_argv(service, topology, Placement(), data_dir="/d")
        for flag in ("--host", "--port", "--metrics-port", "--advertised-host", "--data-dir"):
            assert flag in argv, (service.name, flag)


def _workspace_deps(member: str) -> set[str]:
    project = tomllib.loads((REPO_ROOT / member / "pyproject.toml").read_text())["project"]
    return {d.split(">")[0].split("[")[0].strip() for d in project.get("dependencies", [])}


def test_each_image_installs_every_workspace_member_its_package_needs():
    root = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    members = {}  # package name -> member folder, as the workspace lists them
    for pattern in root["tool"]["uv"]["workspace"]["members"]:
        for path in sorted(REPO_ROOT.glob(pattern)):
            if (path / "pyproject.toml").exists():
                folder = path.relative_to(REPO_ROOT).as_posix()
                members[tomllib.loads((path / "pyproject.toml").read_text())[
                    "project"]["name"]] = folder
    assert set(root["tool"]["uv"]["sources"]) <= set(members)
    for image in load().images.values():
        if image.package is None:
            continue
        needed, queue = set(), [members[image.package]]
        while queue:
            folder = queue.pop()
            needed.add(folder)
            queue += [members[d] for d in _workspace_deps(folder) if d in members
                      and members[d] not in needed]  # fmt: skip
        assert needed == set(image.members), image.name
        # the CLI's libraries stay out of service images (the SDK has them as its `cli` extra)
        assert not {d for f in needed for d in _workspace_deps(f)} & {"typer", "rich"}, image.name


def _build_context_allows(path: str) -> bool:
    """`.dockerignore` as the image builds read it: the last matching rule wins."""
    allowed = False
    for rule in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        rule = rule.strip()
        if not rule or rule.startswith("#"):
            continue
        negated, pattern = rule.startswith("!"), rule.lstrip("!")
        if pattern == "*" or path == pattern or path.startswith(pattern.rstrip("/") + "/"):
            allowed = negated
    return allowed


def test_every_folder_a_dockerfile_copies_is_in_the_build_context():
    copied = {line.split()[1] for text in render_dockerfiles(load()).values()
              for line in text.splitlines()
              if line.startswith("COPY ") and not line.startswith("COPY --from")}
    assert copied
    assert [path for path in sorted(copied) if not _build_context_allows(path)] == []


def test_prometheus_config_scrapes_every_service_metrics_port_once():
    from deploy.observability import render_prometheus, scrape_targets

    topology = load()
    local = scrape_targets(render_prometheus(topology, Placement(port_offset=3)))
    services = [s for s in topology.services.values() if s.module]
    assert sorted(local) == sorted(
        (s.name, f"127.0.0.1:{s.ports['metrics'] + 3}") for s in services
    )
    compose = scrape_targets(render_prometheus(topology, Placement(compose=True)))
    assert sorted(compose) == sorted((s.name, f"{s.name}:{s.ports['metrics']}") for s in services)


def _exported(package: str) -> set[str]:
    """The third-party distributions an image of `package` installs (as deploy/images.py
    exports them)."""
    listed = subprocess.run(
        ["uv", "export", "--frozen", "--package", package, "--no-dev", "--no-emit-workspace",
         "--no-hashes", "--quiet"], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return {line.split("==")[0] for line in listed.stdout.splitlines()
            if line and not line.startswith((" ", "#"))}


def test_the_two_gateway_images_carry_only_their_own_dependencies():
    http, grpc_gateway = _exported("tidemq-gateway"), _exported("tidemq-gateway-grpc")
    assert {"flask", "gunicorn"} <= http and "rocketmq-python-client" not in http
    assert "rocketmq-python-client" in grpc_gateway
    assert not {"flask", "gunicorn", "apispec", "pydantic"} & grpc_gateway
