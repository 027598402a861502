"""supervisord mechanics with real processes (Redis and Sentinel only, so this runs without the
services): tiered start waits for health, kill -9 is answered by a restart, down stops
everything; a killed Redis master is failed over by the Sentinels and returns as a replica."""

from __future__ import annotations

import os
import re
import signal

import pytest
import redis
import yaml

from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset
from deploy.pidfiles import runs
from deploy.redis_tier import observe, status_lines
from deploy.topology import TOPOLOGY_FILE, parse
from tests.support.processes import wait_until
from tests.support.tools import needs_tool

pytestmark = needs_tool("redis-server")

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
    assert supervisord is not None and not runs(supervisord, "supervisord")
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


# A Redis master, two replicas and three Sentinels as the default topology runs them, with its
# timings (a down-after of 1 s, the Sentinels' ping period, lets a Sentinel take a new master
# for down right after a failover and fail over again)
REDIS_TIER = {
    "images": {"redis": {"dockerfile_dir": "deploy/redis"}},
    "control_plane": yaml.safe_load(TOPOLOGY_FILE.read_text())["control_plane"],
    "services": {
        "redis": {"image": "redis", "control_plane": "redis", "ports": {"redis": 6379},
                  "health": {"kind": "redis"}, "stateful": True},
        "sentinel": {"image": "redis", "program": "redis-sentinel", "control_plane": "sentinels",
                     "ports": {"sentinel": 26379}, "depends_on": ["redis"],
                     "health": {"kind": "redis"}, "stateful": True},
    },
}


def _tier(deployment: LocalDeployment) -> tuple[dict, set[str | None]]:
    """Each node's state by name, and the set of masters the Sentinels name."""
    nodes, sentinels = observe(deployment.topology, deployment.placement)
    return {node.name: node for node in nodes}, {s.master for s in sentinels}


@pytest.mark.slow
@needs_tool("redis-sentinel")
def test_sentinels_fail_over_a_killed_master_and_it_comes_back_as_a_replica(tmp_path):
    topology = parse(REDIS_TIER)
    deployment = LocalDeployment(
        data_dir=tmp_path, port_offset=free_port_offset(topology), topology=topology
    )

    def connect(name: str) -> redis.Redis:
        port = deployment.placement.port(topology.services[name], "redis")
        return redis.Redis(port=port, socket_timeout=2)

    try:
        deployment.up(timeout=30, progress=lambda line: None)
        nodes, named = wait_until(lambda: (tier := _tier(deployment))[0]["redis"].replicas == 2
                                  and tier, 20, interval=0.1, message="both replicas following")
        assert named == {"redis"}
        assert [(n.role, n.master) for n in nodes.values()] == \
            [("master", ""), ("replica", "redis"), ("replica", "redis")]
        with connect("redis") as master:
            master.set("before", "failover")
            assert master.wait(2, 2000) == 2

        old_pid = deployment.pid("redis")
        os.kill(old_pid, signal.SIGKILL)
        promoted = wait_until(lambda: (named := _tier(deployment)[1]) != {"redis"}
                              and len(named) == 1 and named.pop(), 30, interval=0.2,
                              message="the Sentinels to agree on a promoted replica")
        assert promoted in ("redis-replica-1", "redis-replica-2")
        # supervisord restarted the old master at once, and it waited for the failover
        wait_until(lambda: deployment.pid("redis") not in (None, old_pid), 30, interval=0.2,
                   message="supervisord to restart redis")
        wait_until(lambda: (node := _tier(deployment)[0]["redis"]).role == "replica"
                   and node.master == promoted and node.link == "up", 30, interval=0.2,
                   message="the old master following the promoted replica")
        with connect(promoted) as master:
            assert master.get("before") == b"failover"
            master.set("after", "failover")
            assert master.wait(2, 5000) == 2
        # its own config records the role Sentinel gave, for a restart without the Sentinels
        promoted_port = deployment.placement.port(topology.services[promoted], "redis")
        assert f"replicaof 127.0.0.1 {promoted_port}\n" in \
            (tmp_path / "redis" / "redis.conf").read_text()
        status = "\n".join(status_lines(topology, deployment.placement))
        assert status.count(f"says the master is {promoted}") == 3
        assert len(re.findall(rf"replica  of {promoted}, \d+ bytes behind \(link up\)",
                              status)) == 2

        other = ({"redis-replica-1", "redis-replica-2"} - {promoted}).pop()
        deployment.supervisorctl("stop", other)
        assert _tier(deployment)[0][other].role == "down"
        line = next(line for line in status_lines(topology, deployment.placement)
                    if line.split()[0] == other)
        assert line.split()[2] == "DOWN"
    finally:
        deployment.down()
