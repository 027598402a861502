"""Issue #41: `tidemq cluster list` (and the console, from the same entries) numbers the
replicas of every group 0..n-1 by replica id, whichever replica won the election. The id the
name servers route by is RocketMQ's (0 = the master, replica id + 1 = a slave), so with
broker-a-1 master it read 0/1/3 in one group and 0/1/2 in another."""

from __future__ import annotations

import json

from tidemq.client.admin_replication import replica_entries
from tidemq.client.admin_types import BrokerEntry
from tidemq.common import errors
from tidemq.v1 import nameserver_pb2

MASTER, SLAVE = nameserver_pb2.REPLICA_MASTER, nameserver_pb2.REPLICA_SLAVE


class NoMaster:
    """Broker clients whose master does not answer GetBrokerInfo (no lag figures)."""

    def get(self, addr):
        return self

    def call(self, *args, **kwargs):
        raise errors.TideMQError("not in this test")


def cluster(masters: dict[str, int], replicas: int = 3) -> nameserver_pb2.ClusterInfo:
    """Groups whose replica r listens on 1<group letter><r>, registered as the broker does:
    under id 0 while master, replica id + 1 while slave."""
    info = nameserver_pb2.ClusterInfo()
    for group, master in masters.items():
        data = info.broker_addr_table[group]
        data.cluster, data.broker_name = "DefaultCluster", group
        for replica in range(replicas):
            addr = f"127.0.0.1:{group[-1]}{replica}"
            registered = 0 if replica == master else replica + 1
            data.broker_addrs[registered] = addr
            info.live_brokers.append(nameserver_pb2.BrokerLiveInfo(
                broker_addr=addr, broker_name=group, broker_id=registered, replica_id=replica,
                role=MASTER if replica == master else SLAVE, epoch=2))
    return info


def test_every_group_lists_replica_ids_0_to_n_minus_1_whoever_is_master():
    entries = replica_entries(cluster({"broker-a": 1, "broker-b": 2}), NoMaster())
    for group in ("broker-a", "broker-b"):
        rows = [(b.id, b.role, b.addr) for b in entries if b.broker_name == group]
        assert [row[0] for row in rows] == [0, 1, 2], rows
        for replica_id, _, addr in rows:  # the id is the replica's, as in its process name
            assert addr.endswith(f"{group[-1]}{replica_id}")
    assert [(b.broker_name, b.id) for b in entries if b.role == "master"] == [
        ("broker-a", 1), ("broker-b", 2)]
    # the routed id still says who is master (what clients send to)
    assert {b.broker_id for b in entries if b.broker_name == "broker-a"} == {0, 1, 3}


def test_a_broker_without_replication_keeps_its_configured_id():
    assert BrokerEntry("c", "broker-a", 0, "h:1", 0).id == 0
    assert BrokerEntry("c", "broker-a", 2, "h:1", 0).id == 2


def test_the_cli_table_and_json_show_the_replica_id(monkeypatch):
    from tidemq.client import admin as admin_module
    from tidemq.client import cli, cli_common
    from typer.testing import CliRunner

    from tests.unit.client.test_cli import StubAdmin

    entries = replica_entries(cluster({"broker-a": 1}), NoMaster())

    class ReplicatedAdmin(StubAdmin):
        def cluster_info(self):
            return entries

    StubAdmin.calls, StubAdmin.fail_with = [], None
    monkeypatch.setattr(admin_module, "Admin", ReplicatedAdmin)
    monkeypatch.setattr(cli_common.out, "width", 160)
    lines = CliRunner().invoke(cli.app, ["cluster", "list"]).stdout.splitlines()
    rows = [line.split("│")[1:4] for line in lines if "broker-a" in line]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["broker-a", "0", "slave"], ["broker-a", "1", "master"], ["broker-a", "2", "slave"]]
    listed = json.loads(CliRunner().invoke(cli.app, ["-o", "json", "cluster", "list"]).stdout)
    assert [(b["id"], b["replica_id"], b["broker_id"], b["role"]) for b in listed] == [
        (0, 0, 1, "slave"), (1, 1, 0, "master"), (2, 2, 3, "slave")]
