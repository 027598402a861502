"""`make up` for real: the whole topology under supervisord on shifted ports and a temporary
data dir (so it runs beside a developer's `make up`), kill -9 of a broker answered by a restart."""

from __future__ import annotations

import os
import signal
import time

import pytest

from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset, missing_service_modules
from deploy.topology import load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

VICTIM = "broker-a"


def _poll(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s")


def test_local_topology_comes_up_and_survives_kill_9(tmp_path):
    topology = load()
    missing = missing_service_modules(topology)
    if missing:
        pytest.skip(f"services not written yet (no __main__): {', '.join(missing)}")
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

        victim = topology.services[VICTIM]
        first_pid = deployment.pid(VICTIM)
        assert first_pid
        os.kill(first_pid, signal.SIGKILL)
        _poll(
            lambda: deployment.pid(VICTIM) not in (None, first_pid),
            60,
            f"supervisord did not restart {VICTIM}",
        )
        _poll(
            lambda: probe(victim, deployment.placement)[0],
            60,
            f"{VICTIM} did not become healthy again",
        )
    finally:
        deployment.down()
    assert deployment.supervisord_pid() is None
