"""supervisord mechanics with a real process (Redis only, so this runs without the services):
tiered start waits for health, kill -9 is answered by a restart, down stops everything."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset, process_alive
from deploy.topology import parse
from tests.support.processes import wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")

REDIS_ONLY = {
    "images": {"redis": {"dockerfile_dir": "deploy/redis"}},
    "services": {
        "redis": {"image": "redis", "ports": {"redis": 6379}, "health": {"kind": "redis"}},
    },
}


def test_up_restart_after_kill_and_down(tmp_path):
    topology = parse(REDIS_ONLY)
    deployment = LocalDeployment(
        data_dir=tmp_path, port_offset=free_port_offset(topology), topology=topology
    )
    try:
        deployment.up(timeout=30, progress=lambda line: None)
        redis = topology.services["redis"]
        assert probe(redis, deployment.placement)[0]
        first_pid = deployment.pid("redis")
        assert first_pid

        os.kill(first_pid, signal.SIGKILL)
        new_pid = wait_until(lambda: (p := deployment.pid("redis")) and p != first_pid and p,
                             message="redis restarted")
        wait_until(lambda: probe(redis, deployment.placement)[0], message="redis healthy")
        assert new_pid != first_pid
        assert (tmp_path / "redis" / "appendonlydir").exists()
    finally:
        supervisord = deployment.supervisord_pid()
        assert deployment.down()
    assert supervisord is not None and not process_alive(supervisord)
    assert not probe(topology.services["redis"], deployment.placement)[0]



def test_up_refuses_ports_held_by_another_program(tmp_path):
    import socket

    from deploy.local import DeployError

    topology = parse(REDIS_ONLY)
    offset = free_port_offset(topology)
    deployment = LocalDeployment(data_dir=tmp_path, port_offset=offset, topology=topology)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 6379 + offset))
        squatter.listen()
        with pytest.raises(DeployError, match=f"{6379 + offset} \\(redis redis\\)"):
            deployment.up(timeout=5, progress=lambda line: None)
    assert deployment.supervisord_pid() is None


def test_a_port_left_in_time_wait_counts_as_free(tmp_path):
    """`make down` then `make up`: the previous run's closed connections sit in TIME_WAIT on
    the service ports for a minute; the servers bind over them, so the probe must too."""
    import socket

    from deploy.local import _port_free

    with socket.socket() as listener:
        # as the servers listen: Linux lets a new bind reuse a TIME_WAIT port only when both
        # the old socket and the new one set SO_REUSEADDR
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the side that closes first keeps the port in TIME_WAIT
        client.close()
    assert _port_free(port)


def test_a_live_listener_still_counts_as_busy():
    import socket

    from deploy.local import _port_free

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        assert not _port_free(squatter.getsockname()[1])
