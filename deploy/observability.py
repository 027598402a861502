"""Prometheus scrape configuration for the topology, and the metric names the dashboards use.

The committed `observability/prometheus.yml` scrapes the compose deployment (service names);
`make up` writes the same configuration for local processes to `.data/run/prometheus.yml`.
Both come from deploy/topology.yaml, so a new service or port is scraped without hand edits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from deploy.topology import REPO_ROOT, Placement, Topology

PROMETHEUS_FILE = REPO_ROOT / "observability" / "prometheus.yml"
DASHBOARD_DIR = REPO_ROOT / "observability" / "grafana"
METRICS_PORT = "metrics"
SCRAPE_INTERVAL = "15s"
_METRIC_NAME = re.compile(r"\b(?:tidemq|process|python)_[a-z0-9_]+\b")


def job_name(module: str) -> str:
    """`tidemq.broker` -> `broker`: one job per kind of service, one target per instance."""
    return module.rpartition(".")[2]


def render_prometheus(topology: Topology, placement: Placement) -> str:
    jobs: dict[str, list[dict]] = {}
    for service in topology.services.values():
        if service.module is None or METRICS_PORT not in service.ports:
            continue
        jobs.setdefault(job_name(service.module), []).append(
            {"targets": [placement.addr(service, METRICS_PORT)], "labels": {"service": service.name}}
        )
    document = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": targets}
            for job, targets in jobs.items()
        ],
    }
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


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARD_DIR.glob("*.json"))


def dashboard_metric_names(path: Path) -> set[str]:
    """Every metric name used in the PromQL of a Grafana dashboard's panels."""
    names: set[str] = set()
    for panel in json.loads(path.read_text())["panels"]:
        for target in panel.get("targets", []):
            names.update(_METRIC_NAME.findall(target.get("expr", "")))
    return names
