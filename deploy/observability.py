"""Prometheus and Grafana for the topology: the scrape configuration, how the two programs
run (under supervisord for `make up`, as compose services of the `observability` profile),
and the PromQL the dashboards use.

The committed `observability/prometheus.yml` scrapes the compose deployment (service names);
`make up` writes the same configuration for local processes to `.data/run/prometheus.yml`.
Both come from deploy/topology.yaml, so a new service or port is scraped without hand edits,
and both load the alert rules of `observability/alerts.yml`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import yaml

from deploy.topology import REPO_ROOT, Placement, Service, Topology

OBSERVABILITY_DIR = REPO_ROOT / "observability"
PROMETHEUS_FILE = OBSERVABILITY_DIR / "prometheus.yml"
ALERTS_FILE = OBSERVABILITY_DIR / "alerts.yml"
DASHBOARD_DIR = OBSERVABILITY_DIR / "grafana"
METRICS_PORT = "metrics"
SCRAPE_INTERVAL = "15s"
PROFILE = "observability"
# Inside the compose containers
PROMETHEUS_CONFIG_DIR = "/etc/prometheus"
GRAFANA_DASHBOARDS = "/etc/tidemq/dashboards"
_METRIC_NAME = re.compile(r"\b(?:tidemq|process|python)_[a-z0-9_]+\b")

GRAFANA_UNAVAILABLE = (
    "Grafana is not run by `make up`: it has no Debian package or PyPI release on these "
    "machines. Use the compose profile where a registry is reachable (image {image}), or "
    "import observability/grafana/*.json into your own Grafana."
)


def job_name(module: str) -> str:
    """`tidemq.broker` -> `broker`: one job per kind of service, one target per instance."""
    return module.rpartition(".")[2]


def scrape_config(jobs: dict[str, list[tuple[str, str]]], *, interval: str = SCRAPE_INTERVAL,
                  rule_files: Iterable[str] = ()) -> dict:
    """A Prometheus configuration: job -> [(service label, host:port)], one target each."""
    document: dict = {"global": {"scrape_interval": interval, "evaluation_interval": interval}}
    if rule_files := list(rule_files):
        document["rule_files"] = rule_files
    document["scrape_configs"] = [
        {"job_name": job, "metrics_path": "/metrics", "static_configs": [
            {"targets": [addr], "labels": {"service": service}} for service, addr in targets]}
        for job, targets in jobs.items()
    ]
    return document


def render_prometheus(topology: Topology, placement: Placement, *,
                      interval: str = SCRAPE_INTERVAL) -> str:
    jobs: dict[str, list[tuple[str, str]]] = {}
    for service in topology.services.values():
        if service.module is None or METRICS_PORT not in service.ports:
            continue
        jobs.setdefault(job_name(service.module), []).append(
            (service.name, placement.addr(service, METRICS_PORT)))
    rules = f"{PROMETHEUS_CONFIG_DIR}/alerts.yml" if placement.compose else str(ALERTS_FILE)
    document = scrape_config(jobs, interval=interval, rule_files=[rules])
    where = "the compose deployment" if placement.compose else "local processes (`make up`)"
    header = f"# Prometheus scrape configuration for {where}.\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def scrape_targets(config_text: str) -> list[tuple[str, str]]:
    """(service, host:port) of every target in a rendered configuration."""
    document = yaml.safe_load(config_text)
    return [
        (group["labels"]["service"], target)
        for job in document["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    ]


# --- the programs ----------------------------------------------------------------------------


def prometheus_argv(*, config_file: str, data_dir: str, listen: str,
                    binary: str = "prometheus") -> list[str]:
    return [
        binary, f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
        f"--web.listen-address={listen}", "--storage.tsdb.retention.time=15d",
    ]


def compose_extras(service: Service) -> dict:
    """Mounts, environment and data path of a program's compose service."""
    if service.program == "prometheus":
        return {"data": "/data", "volumes": [
            f"./observability/prometheus.yml:{PROMETHEUS_CONFIG_DIR}/prometheus.yml:ro",
            f"./observability/alerts.yml:{PROMETHEUS_CONFIG_DIR}/alerts.yml:ro"]}
    if service.program == "grafana":
        return {"data": "/var/lib/grafana", "volumes": [
            "./observability/grafana/provisioning:/etc/grafana/provisioning:ro",
            f"./observability/grafana:{GRAFANA_DASHBOARDS}:ro"],
            "environment": {
                "GF_SERVER_HTTP_PORT": str(service.ports[service.main_port]),
                "GF_AUTH_ANONYMOUS_ENABLED": "true",  # read-only viewers need no login
                "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer",
                "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH":
                    f"{GRAFANA_DASHBOARDS}/tidemq-overview.json",
            }}
    return {}


def program_health_argv(service: Service, url: str) -> list[str]:
    """The probe run inside a program's container (no tidemq package there)."""
    if service.program == "grafana":
        return ["wget", "-q", "--spider", url]   # busybox wget in the upstream image
    return ["python3", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], "
            "timeout=8)", url]   # the base image's Python; 8 s of compose's 10


def local_unavailable(topology: Topology) -> dict[str, str]:
    """Services `make up` cannot run here, with the reason to print."""
    reasons = {}
    for service in topology.services.values():
        if service.program == "grafana":
            image = topology.images[service.image].upstream
            reasons[service.name] = GRAFANA_UNAVAILABLE.format(image=image)
        elif service.program == "prometheus" and shutil.which("prometheus") is None:
            reasons[service.name] = ("Prometheus is not installed: `apt-get install prometheus` "
                                     "(Debian/Ubuntu) and run `make up OBSERVABILITY=1` again")
    return reasons


# --- dashboards ------------------------------------------------------------------------------


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARD_DIR.glob("*.json"))


def _panels(panels: list[dict]) -> Iterable[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))   # a collapsed row holds its panels


def dashboard_queries(path: Path) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of a Grafana dashboard."""
    return [(panel["title"], target["expr"])
            for panel in _panels(json.loads(path.read_text())["panels"])
            for target in panel.get("targets", []) if target.get("expr")]


def dashboard_metric_names(path: Path) -> set[str]:
    """Every metric name used in the PromQL of a Grafana dashboard's panels."""
    names: set[str] = set()
    for _title, expr in dashboard_queries(path):
        names.update(_METRIC_NAME.findall(expr))
    return names
