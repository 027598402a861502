"""`make up` for real: the whole topology under supervisord on shifted ports and a temporary
data dir (so it runs beside a developer's `make up`), kill -9 of a broker answered by a restart."""

from __future__ import annotations

import os
import signal

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset
from deploy.observability import dashboard_files, dashboard_metric_names, scrape_targets
from deploy.topology import load
from tests.support.processes import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

VICTIM = "broker-a"


_SAMPLE_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def _check_scrape_targets_serve_the_dashboards_metrics(deployment: LocalDeployment) -> None:
    """Every target of the rendered Prometheus config answers /metrics in the text format, and
    every metric a dashboard queries is exported by some service (labelled counters with no
    sample yet still announce their family)."""
    exported: set[str] = set()
    targets = scrape_targets(deployment.prometheus_file.read_text())
    assert {service for service, _ in targets} == {
        s.name for s in deployment.topology.services.values() if s.module
    }
    for service, target in targets:
        reply = requests.get(f"http://{target}/metrics", timeout=10)
        assert reply.status_code == 200, f"{service}: {reply.status_code}"
        for family in text_string_to_metric_families(reply.text):
            exported.add(family.name)
            exported.update(sample.name for sample in family.samples)
    assert dashboard_files()
    for dashboard in dashboard_files():
        missing = {
            name for name in dashboard_metric_names(dashboard)
            if name not in exported and name.removesuffix(
                next((x for x in _SAMPLE_SUFFIXES if name.endswith(x)), "")) not in exported
        }  # fmt: skip
        assert not missing, f"{dashboard.name} queries metrics no service exports: {missing}"


def test_local_topology_comes_up_and_survives_kill_9(tmp_path):
    topology = load()
    deployment = LocalDeployment(
        data_dir=tmp_path, port_offset=free_port_offset(topology), topology=topology
    )
    try:
        try:
            deployment.up(timeout=120, progress=print)
        except Exception as exc:
            name = getattr(getattr(exc, "service", None), "name", None)
            tail = deployment.tail(name, 60) if name else ""
            raise AssertionError(f"{exc}\n{tail}") from exc
        for service in topology.services.values():
            assert probe(service, deployment.placement)[0], service.name
        _check_scrape_targets_serve_the_dashboards_metrics(deployment)

        victim = topology.services[VICTIM]
        first_pid = deployment.pid(VICTIM)
        assert first_pid
        os.kill(first_pid, signal.SIGKILL)
        wait_until(lambda: deployment.pid(VICTIM) not in (None, first_pid), 60, interval=0.2,
                   message=f"supervisord did not restart {VICTIM}")
        wait_until(lambda: probe(victim, deployment.placement)[0], 60, interval=0.2,
                   message=f"{VICTIM} did not become healthy again")
    finally:
        deployment.down()
    assert deployment.supervisord_pid() is None
