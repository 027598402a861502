"""A real controller (a name-server process over a real config center) never fences out a
master that returned at the same address and epoch on evidence about its previous process
(issue #36 follow-up; the unit-level sequence is tests/unit/nameserver/test_controller_stale_
events.py). Replicas are played by the test as in test_controller.py: live keys under real
leases, written as brokers write them. A master's address is a real socket: refusing (bound,
not listening: a process whose gRPC server is not up yet, or one that is gone) or a real gRPC
health server that counts the controller's checks.

How the test knows the controller judged: a second group's master is a health server too, and
the prober checks every master in each round, so its count of checks shows rounds passing."""

from __future__ import annotations

import contextlib
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import GroupState, group_key, live_key
from tidemq.v1 import nameserver_pb2 as pb

from tests.integration.nameserver.test_controller import (
    LEASE_TTL_S,
    active_controller,
    name_server,
    rpc,
    stored,
)
from tests.support.processes import wait_until


class CountingHealth(health.HealthServicer):
    def __init__(self) -> None:
        super().__init__()
        self.checks = 0
        self._lock = threading.Lock()

    def Check(self, request, context):
        with self._lock:
            self.checks += 1
        return super().Check(request, context)


class HealthServer:
    """A master's gRPC server as far as the controller's probe sees it (SERVING)."""

    def __init__(self, port: int = 0) -> None:
        self.servicer = CountingHealth()
        self.server = grpc.server(ThreadPoolExecutor(2))
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        assert self.port, f"could not listen on 127.0.0.1:{port}"
        self.servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        self.server.start()

    @property
    def checks(self) -> int:
        return self.servicer.checks

    def stop(self) -> None:
        self.server.stop(0).wait(5)


def refusing() -> socket.socket:
    """A port nothing listens on while the socket is held: connections are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def put_live(config: ConfigClient, lease: int, group: str, replica: int, port: int,
             incarnation: str, *, master: bool, contact: dict | None = None) -> int:
    value = {"addr": f"127.0.0.1:{port}", "ha_addr": f"127.0.0.1:{port}", "epoch": 1,
             "log_end": 1000, "fence_ms": 3000, "quorum_acks": True,
             "incarnation": incarnation, "confirmed": 1000 if master else -1}
    if contact is not None:
        value["contact"] = contact
    return config.put(live_key(group, replica), value, lease=lease).revision


GONE = {"epoch": 1, "silent_ms": 9000, "gone": True}
HEARD = {"epoch": 1, "silent_ms": 50, "gone": False}


def test_a_returned_master_is_judged_on_its_own_incarnation_only(services, center, config):
    leases = [config.lease(LEASE_TTL_S) for _ in range(3)]
    held = refusing()
    other = HealthServer()
    try:
        # Another group whose master answers: its count of checks shows probe rounds passing.
        put_live(config, leases[2].id, "broker-b", 0, other.port, "b:1", master=True)
        # broker-a as the wiped-replica sequence leaves it: slave 2's last report says its
        # master is gone (about the killed process; written before the master's return), the
        # group kept master 0 at epoch 1, and master 0's new process registered at the same
        # address before its gRPC server listens (its checks are refused).
        slave_port = 9   # never dialled: only masters are probed
        put_live(config, leases[1].id, "broker-a", 2, slave_port, "z:1", master=False,
                 contact=GONE)
        config.put(group_key("broker-a"), GroupState(
            0, 1, frozenset({0}), f"127.0.0.1:{held.getsockname()[1]}",
            f"127.0.0.1:{held.getsockname()[1]}", incarnations={0: "a:2"},
            confirmed_offset=1000).to_json())
        registered = put_live(config, leases[0].id, "broker-a", 0, held.getsockname()[1],
                              "a:2", master=True)
        servers = [name_server(services, center)]
        active = active_controller(config, servers)
        wait_until(lambda: stored(config, "broker-b"), 20, message="the controller acting")
        # the returned master copies slave 2 back and puts it in the in-sync set
        reply = rpc(active).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
            broker_name="broker-a", epoch=1, master=0, in_sync=[0, 2],
            incarnations={0: "a:2", 2: "z:1"}))
        assert list(reply.group.in_sync) == [0, 2]

        # Several probe rounds with that evidence: the returned master keeps its key.
        rounds = wait_until(lambda: other.checks or None, 20, message="a first probe round")
        wait_until(lambda: other.checks >= rounds + 4, 20, message="more probe rounds")
        kv = config.get(live_key("broker-a", 0))
        assert kv is not None and kv.create_revision == registered, \
            "the returned master was fenced out on evidence about its previous process"
        state = stored(config, "broker-a")
        assert (state["master"], state["epoch"]) == (0, 1), state

        # Detection is not blind to it: once this process served and is gone, and its slave
        # saw it gone after it registered, it is fenced out at once (gone).
        port = held.getsockname()[1]
        held.close()
        server = HealthServer(port)
        try:
            wait_until(lambda: server.checks >= 2, 20, message="the returned master answering")
            put_live(config, leases[1].id, "broker-a", 2, slave_port, "z:1", master=False,
                     contact=HEARD)
        finally:
            server.stop()   # the returned master dies: refused from now on
        reported = put_live(config, leases[1].id, "broker-a", 2, slave_port, "z:1",
                            master=False, contact=GONE)
        wait_until(lambda: config.get(live_key("broker-a", 0)) is None, 20,
                   message="the dead master fenced out")
        line = wait_until(lambda: next((line for line in active.log.read_text().splitlines()
                                        if "master fenced out before its lease expired" in line),
                                       None), 10, message="the fence-out logged")
        assert "reason='master process gone'" in line and "master=0" in line, line
        fenced_at = int(line.split("revision=")[1].split()[0])
        assert fenced_at > reported, (fenced_at, reported)
    finally:
        other.stop()
        held.close()
        for lease in leases:
            with contextlib.suppress(errors.TideMQError):
                lease.revoke()
