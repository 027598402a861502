"""supervisord mechanics with real processes (Redis and etcd only, so this runs without the
services): tiered start waits for health, kill -9 is answered by a restart, down stops
everything; a killed etcd leader is replaced by an election, and the member restarted by
supervisord rejoins and catches up (what `make status` shows of it)."""

from __future__ import annotations

import os
import re
import signal

import grpc
import pytest
import yaml
from tidemq.etcd import rpc_pb2, rpc_pb2_grpc

from deploy.etcd_cluster import observe, status_lines
from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset
from deploy.pidfiles import runs
from deploy.topology import TOPOLOGY_FILE, parse
from tests.support.processes import wait_until
from tests.support.tools import needs_tool

REDIS_ONLY = {
    "images": {"redis": {"dockerfile_dir": "deploy/redis"}},
    "services": {
        "redis": {"image": "redis", "ports": {"redis": 6379}, "health": {"kind": "redis"}},
    },
}


@needs_tool("redis-server")
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



@needs_tool("redis-server")
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

    from deploy.ports import port_free as _port_free

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

    from deploy.ports import port_free as _port_free

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        assert not _port_free(squatter.getsockname()[1])


# Three etcd members as the default topology runs them, with its settings (heartbeat 100 ms,
# election timeout 1 s, the same token and --initial-cluster on every start)
ETCD_CLUSTER = {
    "images": {"etcd": {"dockerfile_dir": "deploy/etcd"}},
    "control_plane": {**yaml.safe_load(TOPOLOGY_FILE.read_text())["control_plane"],
                      "config_centers": 1},
    "services": {
        "etcd": {"image": "etcd", "program": "etcd", "control_plane": "etcd",
                 "ports": {"client": 2379, "peer": 2380},
                 "health": {"kind": "http", "port": "client", "path": "/health"},
                 "stateful": True},
    },
}


def _kv(deployment: LocalDeployment, name: str) -> tuple[grpc.Channel, rpc_pb2_grpc.KVStub]:
    port = deployment.placement.port(deployment.topology.services[name], "client")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel, rpc_pb2_grpc.KVStub(channel)


def _put(deployment: LocalDeployment, name: str, key: bytes, value: bytes) -> bool:
    channel, kv = _kv(deployment, name)
    with channel:
        try:
            kv.Put(rpc_pb2.PutRequest(key=key, value=value), timeout=2)
        except grpc.RpcError:  # no leader yet
            return False
    return True


@pytest.mark.slow
@needs_tool("etcd")
def test_a_killed_etcd_leader_is_replaced_and_rejoins_as_a_follower(tmp_path):
    topology = parse(ETCD_CLUSTER)
    deployment = LocalDeployment(
        data_dir=tmp_path, port_offset=free_port_offset(topology), topology=topology
    )
    try:
        deployment.up(timeout=30, progress=lambda line: None)
        state = wait_until(lambda: (s := observe(topology, deployment.placement)).leader and s,
                           20, interval=0.1, message="a leader all members agree on")
        assert all(m.reachable and m.raft_term >= 1 for m in state.members)
        assert oct((tmp_path / "etcd-1").stat().st_mode & 0o777) == "0o700"
        assert (tmp_path / "etcd-1" / "member" / "wal").is_dir()   # its own data directory
        leader = state.leader
        assert _put(deployment, leader, b"before", b"kill")

        old_pid = deployment.pid(leader)
        os.kill(old_pid, signal.SIGKILL)
        # the two others elect one of them (supervisord may have restarted the victim by then,
        # and etcd can elect it again only after it caught up: either way a leader, a new term)
        after = wait_until(lambda: (s := observe(topology, deployment.placement)).leader
                           and s.members and max(m.raft_term for m in s.members if m.reachable)
                           > max(m.raft_term for m in state.members) and s, 30, interval=0.1,
                           message="a new leader after the kill")
        wait_until(lambda: deployment.pid(leader) not in (None, old_pid), 30, interval=0.2,
                   message="supervisord to restart the killed member")
        survivor = next(m.name for m in after.members if m.name != leader)
        wait_until(lambda: _put(deployment, survivor, b"after", b"kill"), 30, interval=0.2,
                   message="writes through the new leader")
        # the restarted member rejoins from its data directory and catches up
        wait_until(lambda: (s := observe(topology, deployment.placement)).leader and
                   all(m.reachable and s.lag(m) == 0 for m in s.members), 30, interval=0.2,
                   message="every member caught up")
        channel, kv = _kv(deployment, leader)
        with channel:
            reply = kv.Range(rpc_pb2.RangeRequest(key=b"after"), timeout=2)
        assert [kvs.value for kvs in reply.kvs] == [b"kill"]

        status = status_lines(topology, deployment.placement)
        assert re.match(r"etcd members \(3/3 answering, leader etcd-\d, raft term \d+\):",
                        status[0]), status
        assert sum(" leader " in line for line in status[1:]) == 1
        assert sum(" follower " in line for line in status[1:]) == 2
        assert all("lag 0 entries" in line for line in status[1:]), status

        stopped = next(m.name for m in observe(topology, deployment.placement).members
                       if not m.leader)
        deployment.supervisorctl("stop", stopped)
        state = observe(topology, deployment.placement)
        assert not next(m for m in state.members if m.name == stopped).reachable
        assert state.leader is not None   # two of three: still a quorum
        line = next(line for line in status_lines(topology, deployment.placement)
                    if line.split()[0] == stopped)
        assert line.split()[2] == "DOWN"
        assert status_lines(topology, deployment.placement)[0].startswith(
            "etcd members (2/3 answering, leader ")
    finally:
        deployment.down()
