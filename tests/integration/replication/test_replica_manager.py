"""ReplicaManager against a real config center (Redis behind it): the live key and its lease,
role changes driven by the group key, and a master that steps down when its lease cannot be
renewed (config center frozen with SIGSTOP). The test writes the group key as the controller
would; the role host records what the manager asked of the broker."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest
from tidemq.broker.replication.controller_client import ControllerClient
from tidemq.broker.replication.manager import ReplicaManager
from tidemq.client.cli import app as cli_app
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key, live_key
from typer.testing import CliRunner

from tests.support.processes import wait_until

GROUP = "broker-r"


class RecordingHost:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.end = 0
        self.epoch = 0   # what the store's epoch history would say
        self._lock = threading.Lock()

    def log_end(self) -> int:
        return self.end

    def last_epoch(self) -> int:
        return self.epoch

    def incarnation(self) -> str:
        return "fake-store:1"

    def confirmed_offset(self) -> int:
        return -1


    def _record(self, *call) -> None:
        with self._lock:
            self.calls.append(call)

    def become_master(self, epoch, in_sync):
        self._record("master", epoch, tuple(sorted(in_sync)))

    def become_slave(self, epoch, master_addr, master_ha_addr):
        self._record("slave", epoch, master_ha_addr)

    def update_in_sync(self, in_sync):
        self._record("in_sync", tuple(sorted(in_sync)))

    def step_down(self):
        self._record("step_down")

    def master_contact(self):
        return None

    def last(self):
        with self._lock:
            return self.calls[-1] if self.calls else None


@pytest.fixture
def config_center(etcd_server, services):
    return services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])


def manager(config_center, replica, host, ttl=2):
    return ReplicaManager(config_center.addr, GROUP, replica, addr=f"10.0.0.{replica}:10911",
                          ha_addr=f"10.0.0.{replica}:10912", host=host, lease_ttl_s=ttl,
                          refresh_s=0.2).start()


def write_group(client, master, epoch, in_sync):
    doc = {"master": master, "epoch": epoch, "in_sync": in_sync,
           "master_addr": f"10.0.0.{master}:10911" if master >= 0 else "",
           "master_ha_addr": f"10.0.0.{master}:10912" if master >= 0 else ""}
    client.put(group_key(GROUP), json.dumps(doc))


def test_roles_follow_the_group_key_and_the_live_key_carries_log_end(config_center):
    client = ConfigClient(config_center.addr)
    hosts = [RecordingHost(), RecordingHost()]
    managers = [manager(config_center, r, hosts[r]) for r in (0, 1)]
    try:
        wait_until(lambda: all(h.last() == ("slave", 0, "") for h in hosts), 10,
                   message="both wait as slaves before the group exists")
        hosts[1].end = 4096
        wait_until(lambda: (kv := client.get(live_key(GROUP, 1))) is not None
                   and json.loads(kv.value)["log_end"] == 4096, 10, message="log end published")
        assert json.loads(client.get(live_key(GROUP, 0)).value)["ha_addr"] == "10.0.0.0:10912"

        write_group(client, 0, 1, [0, 1])
        wait_until(lambda: hosts[0].last() == ("master", 1, (0, 1)), 10, message="0 master")
        wait_until(lambda: hosts[1].last() == ("slave", 1, "10.0.0.0:10912"), 10,
                   message="1 follows 0")
        assert managers[1].master_addr == "10.0.0.0:10911" and managers[0].master_addr == ""

        write_group(client, 0, 1, [0])  # the master's in-sync set shrank
        wait_until(lambda: hosts[0].last() == ("in_sync", (0,)), 10, message="in-sync update")

        write_group(client, 1, 2, [1])  # failover to replica 1 in epoch 2
        wait_until(lambda: hosts[1].last() == ("master", 2, (1,)), 10, message="1 master")
        wait_until(lambda: hosts[0].last() == ("slave", 2, "10.0.0.1:10912"), 10,
                   message="0 follows 1")
        write_group(client, 0, 1, [0])  # a stale write of an older epoch changes nothing
        wait_until(lambda: json.loads(client.get(group_key(GROUP)).value)["epoch"] == 1, 5)
        assert hosts[1].last() == ("master", 2, (1,))
    finally:
        for m in managers:
            m.stop()
    # A clean stop revokes the lease: the controller sees the replica leave at once.
    assert client.get(live_key(GROUP, 0)) is None and client.get(live_key(GROUP, 1)) is None


def test_a_master_that_cannot_renew_its_lease_steps_down(config_center):
    client = ConfigClient(config_center.addr)
    host = RecordingHost()
    m = manager(config_center, 0, host, ttl=2)
    try:
        write_group(client, 0, 1, [0])
        wait_until(lambda: host.last() == ("master", 1, (0,)), 10, message="master")
        assert m.lease_valid()
        os.kill(config_center.pid, signal.SIGSTOP)  # no keep-alive can get through
        try:
            wait_until(lambda: host.last() == ("step_down",), 15, message="step down")
            assert not m.lease_valid()
        finally:
            os.kill(config_center.pid, signal.SIGCONT)
        # Back with a new lease; the controller (here: nobody) kept it master: it serves again.
        wait_until(lambda: host.last() == ("master", 1, (0,)), 15, message="master again")
        assert m.lease_losses >= 1
    finally:
        m.stop()



def test_the_controller_initialises_the_group_and_elects_when_the_master_leaves(
        config_center, services):
    """The controller (two name servers) against two managers: the contract between
    the live keys, the group key, AlterInSyncSet and the roles."""
    name_servers = [services("tidemq.nameserver", ["--config-center", config_center.addr,
                                                   "--controller-lease-ttl-s", "3"])
                    for _ in range(2)]
    controller = ControllerClient([ns.addr for ns in name_servers])
    hosts = [RecordingHost(), RecordingHost()]
    first = manager(config_center, 0, hosts[0])
    wait_until(lambda: hosts[0].last() == ("master", 1, (0,)), 20,
               message="the controller makes the first live replica master in epoch 1")
    second = manager(config_center, 1, hosts[1])
    try:
        wait_until(lambda: hosts[1].last() == ("slave", 1, "10.0.0.0:10912"), 20,
                   message="replica 1 follows replica 0")
        # The master proposes replica 1 into the in-sync set, as its HA server would.
        assert not controller.alter_in_sync(GROUP, 0, 0, {0, 1})  # stale epoch: refused
        assert controller.alter_in_sync(GROUP, 1, 0, {0, 1})
        wait_until(lambda: hosts[0].last() == ("in_sync", (0, 1)), 10, message="in-sync")
        first.stop()  # revokes its lease: the controller elects replica 1 at once
        wait_until(lambda: hosts[1].last() == ("master", 2, (1,)), 20,
                   message="replica 1 elected in epoch 2")
        assert hosts[0].last() == ("step_down",)
    finally:
        first.stop()
        second.stop()


def test_preferred_replica_election_moves_leadership(config_center, services):
    """`tidemq broker elect GROUP --replica ID` (Admin.elect): the controller moves the master
    to an in-sync replica; the old master follows it. An out-of-sync replica is refused."""
    from tidemq.client.admin import Admin
    from tidemq.common import errors

    name_servers = [services("tidemq.nameserver", ["--config-center", config_center.addr,
                                                   "--controller-lease-ttl-s", "3"])
                    for _ in range(2)]
    addrs = ";".join(ns.addr for ns in name_servers)
    hosts = [RecordingHost(), RecordingHost(), RecordingHost()]
    managers = [manager(config_center, 0, hosts[0])]
    try:
        wait_until(lambda: hosts[0].last() == ("master", 1, (0,)), 20, message="0 master")
        managers += [manager(config_center, r, hosts[r]) for r in (1, 2)]
        wait_until(lambda: all(h.last() == ("slave", 1, "10.0.0.0:10912") for h in hosts[1:]),
                   20, message="1 and 2 follow 0")
        assert ControllerClient([ns.addr for ns in name_servers]).alter_in_sync(
            GROUP, 1, 0, {0, 1})
        with Admin(addrs, config_center=config_center.addr) as admin:
            with pytest.raises(errors.TideMQError) as refused:
                admin.elect(GROUP, 2)  # not in sync: electing it could lose messages
            assert refused.value.code == "NO_ELIGIBLE_REPLICA"
        # The command line, as an operator types it.
        result = CliRunner().invoke(cli_app, ["--namesrv", addrs, "-o", "json", "broker",
                                              "elect", GROUP, "--replica", "1"])
        assert result.exit_code == 0, result.output
        # (the in-process managers' logs share stdout: the reply is the indented JSON block)
        state = json.loads(result.stdout[result.stdout.index("{\n"):])
        assert (state["master"], state["epoch"], state["in_sync"]) == (1, 2, [0, 1])
        wait_until(lambda: hosts[1].last() == ("master", 2, (0, 1)), 20, message="1 master")
        wait_until(lambda: hosts[0].last() == ("slave", 2, "10.0.0.1:10912"), 20,
                   message="0 follows 1")
        wait_until(lambda: hosts[2].last() == ("slave", 2, "10.0.0.1:10912"), 20,
                   message="2 follows 1")
    finally:
        for m in managers:
            m.stop()
