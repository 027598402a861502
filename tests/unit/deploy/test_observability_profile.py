"""The `observability` profile: Prometheus and Grafana in both deployments, alert rules checked
by promtool, dashboards and Grafana provisioning consistent with the topology."""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.local import local_topology
from deploy.observability import (
    ALERTS_FILE,
    DASHBOARD_DIR,
    GRAFANA_DASHBOARDS,
    OBSERVABILITY_DIR,
    PROFILE,
    dashboard_files,
    dashboard_queries,
    render_prometheus,
)
from deploy.render import COMPOSE_FILE, render_compose, render_supervisor
from deploy.topology import ALL_PROFILES, REPO_ROOT, Placement, TopologyError, load, parse
from tests.support.tools import needs_tool

PROMTOOL = shutil.which("promtool")
needs_promtool = needs_tool("promtool", "prometheus")


@pytest.fixture
def promtool() -> str:
    assert PROMTOOL, "CI must check the alert rules: `apt-get install prometheus` (.ci/run)"
    return PROMTOOL


def test_profile_services_run_only_when_their_profile_is_enabled():
    assert not {"prometheus", "grafana"} & set(load().services)
    assert {"prometheus", "grafana"} <= set(load(profiles=(PROFILE,)).services)
    everything = load(profiles=ALL_PROFILES)
    assert PROFILE in everything.profiles()
    assert set(everything.select((PROFILE,), drop=("grafana",)).services) == \
        set(load().services) | {"prometheus"}


def _raw(**services) -> dict:
    return {"images": {"x": {"dockerfile_dir": "x", "package": "p"},
                       "g": {"upstream": "grafana/grafana-oss:1"}}, "services": services}


def _program(**extra) -> dict:
    return {"image": "g", "program": "grafana", "ports": {"http": 3000},
            "health": {"kind": "http"}, **extra}


def test_a_service_may_not_need_one_that_only_runs_with_a_profile():
    app = {"image": "x", "module": "m", "ports": {"grpc": 1, "metrics": 2},
           "health": {"kind": "grpc"}, "depends_on": ["grafana"]}
    with pytest.raises(TopologyError, match="of a profile"):
        parse(_raw(grafana=_program(profile="observability"), app=app))
    with pytest.raises(TopologyError, match="module or a program"):
        parse(_raw(grafana=_program(program="nginx")))
    bad_image = _raw(grafana=_program())
    bad_image["images"]["g"]["dockerfile_dir"] = "g"
    with pytest.raises(TopologyError, match="dockerfile_dir or upstream"):
        parse(bad_image)


def test_compose_observability_services():
    services = yaml.safe_load(render_compose(load(profiles=ALL_PROFILES)))["services"]
    assert list(services)[-2:] == ["prometheus", "grafana"]  # appended after the core services
    prometheus, grafana = services["prometheus"], services["grafana"]
    assert prometheus["profiles"] == grafana["profiles"] == [PROFILE]
    assert prometheus["build"]["dockerfile"] == "deploy/prometheus/Dockerfile"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert "build" not in grafana and grafana["image"].startswith("grafana/grafana-oss:")
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}
    for service in (prometheus, grafana):
        for mount in service["volumes"][1:]:  # bind mounts of the repo's files, read-only
            source, target, mode = mount.split(":")
            assert (REPO_ROOT / source).exists() and mode == "ro", mount
    assert "/etc/prometheus/alerts.yml" in "".join(prometheus["volumes"])
    committed = yaml.safe_load((OBSERVABILITY_DIR / "prometheus.yml").read_text())
    assert committed["rule_files"] == ["/etc/prometheus/alerts.yml"]


@needs_tool("docker-compose")
def test_docker_compose_accepts_the_observability_profile():
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "COMPOSE_PROFILES": PROFILE}
    listed = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config", "--services"],
                            capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert listed.returncode == 0, listed.stderr
    assert {"prometheus", "grafana", "broker-a-0"} <= set(listed.stdout.split())
    full = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config"],
                          capture_output=True, text=True, cwd=REPO_ROOT, env={"PATH": env["PATH"]})
    assert full.returncode == 0, full.stderr
    services = yaml.safe_load(full.stdout)["services"]
    assert services["prometheus"]["profiles"] == services["grafana"]["profiles"] == [PROFILE]
    assert "profiles" not in services["broker-a-0"]


def test_make_up_runs_prometheus_under_supervisord_with_the_local_scrape_config(tmp_path: Path):
    topology = load(profiles=(PROFILE,)).select((PROFILE,), drop=("grafana",))
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(topology, Placement(port_offset=500), run_dir=tmp_path,
                                         data_dir=tmp_path, prometheus="/usr/bin/prometheus"))
    command = config["program:prometheus"]["command"]
    assert command.startswith("/usr/bin/prometheus ")
    assert f"--config.file={tmp_path / 'prometheus.yml'}" in command
    assert "--web.listen-address=127.0.0.1:9590" in command
    assert f"--storage.tsdb.path={tmp_path / 'prometheus'}" in command
    local = yaml.safe_load(render_prometheus(topology, Placement(port_offset=500)))
    assert local["rule_files"] == [str(ALERTS_FILE)]


def test_make_up_says_why_grafana_and_a_missing_prometheus_are_not_started(monkeypatch):
    _, skipped = local_topology(profiles=(PROFILE,))
    assert "Debian package" in skipped["grafana"]
    monkeypatch.setenv("PATH", "/nonexistent")
    topology, skipped = local_topology(profiles=(PROFILE,))
    assert "apt-get install prometheus" in skipped["prometheus"]
    assert "prometheus" not in topology.services
    assert set(local_topology()[0].services) == set(load().services)


@needs_promtool
def test_alert_rules_are_valid_and_fire_as_intended(promtool):
    checked = subprocess.run([promtool, "check", "rules", str(ALERTS_FILE)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "alerts-test.yml"],
                            capture_output=True, text=True, cwd=OBSERVABILITY_DIR)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    names = {rule["alert"] for group in yaml.safe_load(ALERTS_FILE.read_text())["groups"]
             for rule in group["rules"]}
    assert {"TideMQBrokerDown", "TideMQConsumerLagGrowing", "TideMQDiskUsageHigh"} <= names


@needs_promtool
def test_the_rendered_local_prometheus_config_is_valid(tmp_path: Path, promtool):
    config = tmp_path / "prometheus.yml"
    config.write_text(render_prometheus(load(), Placement()))
    checked = subprocess.run([promtool, "check", "config", str(config)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_dashboards_use_a_datasource_variable_and_grafana_provisions_them():
    for path in dashboard_files():
        dashboard = json.loads(path.read_text())
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource", path.name
        assert dashboard_queries(path), path.name
        for panel in dashboard["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    provisioning = DASHBOARD_DIR / "provisioning"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    prometheus = load(profiles=(PROFILE,)).services["prometheus"]
    assert source["datasources"][0]["url"] == f"http://prometheus:{prometheus.ports['http']}"
    provider = yaml.safe_load((provisioning / "dashboards" / "tidemq.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == GRAFANA_DASHBOARDS
