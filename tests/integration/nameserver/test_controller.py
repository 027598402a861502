"""The replication controller in real name servers, over a real config center and Redis.

Broker replicas are played by the test: each holds a real lease and writes its live key
through ConfigClient exactly as the broker's ReplicaManager does, so the controller sees the
same keys, leases and deletions it would see in production.
"""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.common.rpc import RpcClient
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key, live_key
from tidemq.nameserver.controller.lease import LEADER_KEY
from tidemq.nameserver.controller.store import settings_key
from tidemq.v1 import nameserver_pb2 as pb
from tidemq.v1 import nameserver_pb2_grpc

from tests.support.processes import wait_until

LEASE_TTL_S = 2  # brokers' and controllers' leases: deaths are noticed within ~3 s


class Replica:
    """A broker replica's liveness: its live key under its own kept-alive lease.

    `incarnation` ("<store id>:<start>", as a broker publishes it): None = a replica that does
    not say (an older broker), so the log end alone decides whether it holds the copy."""

    def __init__(self, config: ConfigClient, group: str, replica_id: int, log_end: int = 0,
                 incarnation: str | None = None):
        self.config, self.group, self.replica_id = config, group, replica_id
        self.addr = f"10.0.0.{replica_id + 1}:10911"
        self.incarnation = incarnation
        self.lease = None
        self.start(log_end)

    def start(self, log_end: int = 0) -> Replica:
        self.lease = self.config.lease(LEASE_TTL_S)
        self.report(log_end)
        return self

    def report(self, log_end: int, epoch: int = 0, confirmed: int = -1) -> None:
        """`confirmed`: a master's confirmed offset (-1 = none, as a slave says)."""
        value = {"addr": self.addr, "ha_addr": self.addr.replace("10911", "10912"),
                 "epoch": epoch, "log_end": log_end, "confirmed": confirmed}
        if self.incarnation is not None:
            value["incarnation"] = self.incarnation
        self.config.put(live_key(self.group, self.replica_id), value, lease=self.lease.id)

    def crash(self) -> None:
        """Stop renewing: the key goes when the lease expires (SIGKILL of a broker)."""
        self.lease.stop_keepalive()

    def shut_down(self) -> None:
        """Revoke the lease: the key goes at once (a clean shutdown)."""
        self.lease.revoke()


def stored(config: ConfigClient, group: str) -> dict | None:
    kv = config.get(group_key(group))
    return kv.json() if kv else None


def name_server(services, center, *extra: str):
    return services("tidemq.nameserver", ["--config-center", center.addr,
                                          "--controller-lease-ttl-s", str(LEASE_TTL_S), *extra])


def rpc(server) -> RpcClient:
    return RpcClient(server.addr, nameserver_pb2_grpc.NameServerServiceStub, retries=0)


def active_controller(config: ConfigClient, servers):
    addr = wait_until(lambda: (kv := config.get(LEADER_KEY)) and kv.json()["addr"], 20,
                      message="a controller to take the lease")
    return next(s for s in servers if s.addr == addr)


def wait_group(config, group, message, predicate, timeout=20.0) -> dict:
    return wait_until(lambda: (s := stored(config, group)) and predicate(s) and s, timeout,
                      message=message)


@pytest.fixture
def pair(services, center, config):
    """Two name servers with controllers; (active, standby)."""
    servers = [name_server(services, center), name_server(services, center)]
    active = active_controller(config, servers)
    return active, next(s for s in servers if s is not active)


def test_group_initialised_then_in_sync_master_elected_when_master_dies(pair, config):
    active, _ = pair
    replicas = [Replica(config, "broker-a", 0, 100, incarnation="store-a0:1")]
    state = wait_group(config, "broker-a", "the group to be initialised", lambda s: True)
    # The master alone in sync, counted under the incarnation its live key showed; nothing
    # confirmed yet (its first report as master raises it); nobody waited for.
    assert state == {"master": 0, "epoch": 1, "in_sync": [0], "master_addr": "10.0.0.1:10911",
                     "master_ha_addr": "10.0.0.1:10912", "incarnations": {"0": "store-a0:1"},
                     "confirmed_offset": 0, "waiting_for": [],
                     "eligible_leaders": {}}
    replicas.append(Replica(config, "broker-a", 1, 100, incarnation="store-a1:1"))
    replicas[0].report(100, epoch=1, confirmed=100)  # as master of epoch 1
    state = wait_group(config, "broker-a", "the master's confirmed offset recorded",
                       lambda s: s["confirmed_offset"] == 100)
    assert (state["epoch"], state["in_sync"]) == (1, [0])

    reply = rpc(active).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-a", epoch=1, master=0, in_sync=[0, 1],
        incarnations={1: "store-a1:1"}))
    assert list(reply.group.in_sync) == [0, 1] and reply.group.epoch == 1
    outsider = Replica(config, "broker-a", 2, 900,  # longest log, but never in sync
                       incarnation="store-a2:1")

    replicas[0].crash()  # the master's lease expires
    state = wait_group(config, "broker-a", "a new master", lambda s: s["epoch"] == 2)
    # A clean election keeps the confirmed offset (the new master holds it) and records the
    # new master under the incarnation it was counted with; the dead master leaves the set.
    assert state == {"master": 1, "epoch": 2, "in_sync": [1], "master_addr": "10.0.0.2:10911",
                     "master_ha_addr": "10.0.0.2:10912", "incarnations": {"1": "store-a1:1"},
                     "confirmed_offset": 100, "waiting_for": [],
                     "eligible_leaders": {}}
    line = wait_until(lambda: next((line for line in active.log.read_text().splitlines()
                                    if "master elected" in line), None), 10,
                      message="the election to be logged")
    assert all(f in line for f in ("group=broker-a", "old_master=0", "new_master=1",
                                   "epoch=2", "election=clean"))
    outsider.shut_down()


def test_no_live_in_sync_replica_waits_until_one_returns(pair, config):
    active, _ = pair
    master, member = Replica(config, "broker-b", 0, 50), Replica(config, "broker-b", 1, 50)
    wait_group(config, "broker-b", "the group", lambda s: True)
    rpc(active).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-b", epoch=1, master=0, in_sync=[0, 1]))
    Replica(config, "broker-b", 2, 70)
    before = wait_group(config, "broker-b", "the in-sync set", lambda s: s["in_sync"] == [0, 1])

    member.shut_down()
    master.shut_down()
    wait_until(lambda: "group=broker-b" in active.log.read_text()
               and "no eligible replica; waiting" in active.log.read_text(), 20,
               message="the controller to report it waits")
    # Replica 2 is live but not in sync: nobody is elected, the dead master stays recorded at
    # the same epoch with the same set, and the group names the members that could end the
    # wait (what every replica's GROUP_HAS_NO_MASTER refusal and `cluster list` say).
    assert before["waiting_for"] == []
    assert stored(config, "broker-b") == {**before, "waiting_for": [0, 1]}

    member.start(50)
    state = wait_group(config, "broker-b", "the returning member elected",
                       lambda s: s["epoch"] == 2)
    assert state["master"] == 1 and state["in_sync"] == [1] and state["waiting_for"] == []


def test_unclean_election_per_group_elects_the_most_complete_live_replica(pair, config):
    active, _ = pair
    master = Replica(config, "broker-c", 0, 50)
    wait_group(config, "broker-c", "the group", lambda s: True)
    Replica(config, "broker-c", 1, 30)
    Replica(config, "broker-c", 2, 40)
    master.shut_down()
    wait_until(lambda: "group=broker-c" in active.log.read_text(), 20,
               message="the controller to report it waits")
    assert stored(config, "broker-c")["epoch"] == 1

    config.put(settings_key("broker-c"), {"unclean_election": True})
    state = wait_group(config, "broker-c", "an unclean election", lambda s: s["epoch"] == 2)
    assert state["master"] == 2 and state["in_sync"] == [2]
    wait_until(lambda: "master elected uncleanly" in active.log.read_text(), 10,
               message="the possible loss to be logged")


def test_unclean_election_for_every_group_is_a_dynamic_setting(pair, config):
    active, _ = pair
    master = Replica(config, "broker-f", 0, 50)
    wait_group(config, "broker-f", "the group", lambda s: True)
    Replica(config, "broker-f", 1, 30)
    config.put(settings_key("broker-f"), {"unclean_election": False})  # this one opts out
    other = Replica(config, "broker-g", 0, 50)
    wait_group(config, "broker-g", "the group", lambda s: True)
    Replica(config, "broker-g", 1, 30)
    master.shut_down()
    other.shut_down()
    wait_until(lambda: "group=broker-g" in active.log.read_text(), 20,
               message="the controller to report it waits")

    config.put("/tidemq/config/group/name-server/unclean_election", b"true")
    state = wait_group(config, "broker-g", "an unclean election", lambda s: s["epoch"] == 2)
    assert state["master"] == 1
    assert stored(config, "broker-f")["epoch"] == 1  # its own setting still says no


def test_alter_in_sync_refusals_and_operator_election(pair, config):
    active, standby = pair
    replicas = [Replica(config, "broker-d", i, 10) for i in range(3)]
    wait_group(config, "broker-d", "the group", lambda s: True)
    client = rpc(active)

    with pytest.raises(errors.PreconditionFailed) as stale:
        client.call("AlterInSyncSet", pb.AlterInSyncSetRequest(
            broker_name="broker-d", epoch=7, master=0, in_sync=[0, 1]))
    assert stale.value.code == "STALE_EPOCH"
    with pytest.raises(errors.InvalidArgument) as invalid:
        client.call("AlterInSyncSet", pb.AlterInSyncSetRequest(
            broker_name="broker-d", epoch=1, master=0, in_sync=[1]))
    assert invalid.value.code == "INVALID_IN_SYNC_SET"
    client.call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-d", epoch=1, master=0, in_sync=[0, 1]))

    with pytest.raises(errors.PreconditionFailed) as ineligible:
        client.call("ElectMaster", pb.ElectMasterRequest(broker_name="broker-d",
                                                         preferred_replica=2))
    assert ineligible.value.code == "NO_ELIGIBLE_REPLICA"
    moved = client.call("ElectMaster", pb.ElectMasterRequest(broker_name="broker-d",
                                                             preferred_replica=1)).group
    assert (moved.master, moved.epoch, list(moved.in_sync)) == (1, 2, [0, 1])
    assert stored(config, "broker-d")["master"] == 1

    with pytest.raises(errors.PreconditionFailed) as deposed:  # the old master's late shrink
        client.call("AlterInSyncSet", pb.AlterInSyncSetRequest(
            broker_name="broker-d", epoch=1, master=0, in_sync=[0]))
    assert deposed.value.code == "STALE_EPOCH"

    with pytest.raises(errors.PreconditionFailed) as refused:
        rpc(standby).call("ElectMaster", pb.ElectMasterRequest(broker_name="broker-d",
                                                               preferred_replica=0))
    assert refused.value.code == "NOT_CONTROLLER" and active.addr in refused.value.message

    described = rpc(standby).call("DescribeReplication", pb.DescribeReplicationRequest())
    assert described.controller_addr == active.addr
    group = next(g for g in described.groups if g.broker_name == "broker-d")
    assert (group.master, group.epoch) == (1, 2)
    assert sorted(r.replica_id for r in described.live_replicas
                  if r.broker_name == "broker-d") == [0, 1, 2]
    del replicas


def test_standby_takes_over_when_the_active_controller_is_killed(pair, config):
    active, standby = pair
    master = Replica(config, "broker-e", 0, 10)
    Replica(config, "broker-e", 1, 10)
    wait_group(config, "broker-e", "the group", lambda s: True)
    rpc(active).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-e", epoch=1, master=0, in_sync=[0, 1]))

    active.kill()   # SIGKILL: its lease expires, nobody releases it
    master.shut_down()  # and the master dies while no controller acts
    wait_until(lambda: (kv := config.get(LEADER_KEY)) and kv.json()["addr"] == standby.addr,
               20, message="the standby to take the controller lease")
    state = wait_group(config, "broker-e", "the new controller to elect",
                       lambda s: s["epoch"] == 2)
    assert state["master"] == 1
    assert "acting as the replication controller" in standby.log.read_text()  # before writing

    # the new controller follows changes from then on: record a set, lose the new master
    Replica(config, "broker-e", 2, 10)
    rpc(standby).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-e", epoch=2, master=1, in_sync=[1, 2]))
    config.delete(live_key("broker-e", 1))
    state = wait_group(config, "broker-e", "a second election", lambda s: s["epoch"] == 3)
    assert state["master"] == 2


def test_a_name_server_without_controller_answers_not_controller(services, center):
    server = name_server(services, center, "--controller-enabled", "false")
    with pytest.raises(errors.PreconditionFailed) as refused:
        rpc(server).call("DescribeReplication", pb.DescribeReplicationRequest())
    assert refused.value.code == "NOT_CONTROLLER"


def test_a_stopped_controller_hands_over_and_the_next_one_elects(pair, config):
    active, standby = pair
    master = Replica(config, "broker-h", 0, 10)
    wait_group(config, "broker-h", "the group", lambda s: True)
    Replica(config, "broker-h", 1, 10)
    rpc(active).call("AlterInSyncSet", pb.AlterInSyncSetRequest(
        broker_name="broker-h", epoch=1, master=0, in_sync=[0, 1]))

    assert active.stop() == 0  # SIGTERM: the lease is released, not left to expire
    assert "controller lease released" in active.log.read_text()
    wait_until(lambda: (kv := config.get(LEADER_KEY)) and kv.json()["addr"] == standby.addr,
               20, message="the standby to take the released lease")
    master.shut_down()
    state = wait_group(config, "broker-h", "the new controller to elect",
                       lambda s: s["epoch"] == 2)
    assert state["master"] == 1
