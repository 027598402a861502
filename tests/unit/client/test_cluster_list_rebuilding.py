"""`tidemq cluster list` marks a slave its master is rebuilding from its oldest segment
(ReplicaProgress.rebuilding) instead of showing it merely out of sync."""

from __future__ import annotations

from tidemq.client.admin_replication import _with_replication
from tidemq.client.admin_types import BrokerEntry
from tidemq.client.cli import _replication_cells
from tidemq.v1 import broker_pb2, nameserver_pb2


def slave_entry(rebuilding: bool) -> BrokerEntry:
    seen = nameserver_pb2.BrokerLiveInfo(replica_id=1, epoch=3,
                                         role=nameserver_pb2.REPLICA_SLAVE)
    progress = {("g", 1): broker_pb2.ReplicaProgress(replica_id=1, log_end=10, lag_bytes=900,
                                                     lag_ms=2500, in_sync=False,
                                                     rebuilding=rebuilding)}
    return _with_replication(BrokerEntry("c", "g", 2, "127.0.0.1:1", 0), seen, progress)


def test_a_rebuilding_slave_shows_as_rebuilding_with_its_lag():
    entry = slave_entry(rebuilding=True)
    assert entry.rebuilding and entry.in_sync is False
    assert _replication_cells(entry) == [3, "rebuilding", 900, "2.5", None]


def test_an_ordinary_lagging_slave_shows_as_out_of_sync():
    assert _replication_cells(slave_entry(rebuilding=False))[1] == "no"


def test_a_replica_shows_its_incarnation_short_and_json_has_it_whole():
    from tidemq.client.cli import short_incarnation

    entry = BrokerEntry("c", "g", 2, "127.0.0.1:1", 0, 1, 3, True, 0, 0.0,
                        incarnation="5f0c9a7e21d84b3f9c0d6a1e2b3c4d5e:12")
    assert _replication_cells(entry)[-1] == "5f0c9a7e:12"
    assert short_incarnation("") is None


def test_cluster_list_says_what_a_waiting_group_waits_for(monkeypatch):
    import json

    from tidemq.client import admin as admin_module
    from tidemq.client import cli, cli_common
    from typer.testing import CliRunner

    from tests.unit.client.test_cli import StubAdmin

    waiting = BrokerEntry("c", "broker-w", 2, "127.0.0.1:1", 0, 1, 5, False, None, None,
                          incarnation="0a1b2c3d4e5f60718293a4b5c6d7e8f9:1",
                          group_waiting_for=(0, 2))

    class WaitingAdmin(StubAdmin):
        def cluster_info(self):
            return [waiting]

    StubAdmin.calls, StubAdmin.fail_with = [], None
    monkeypatch.setattr(admin_module, "Admin", WaitingAdmin)
    monkeypatch.setattr(cli_common.out, "width", 120)
    text = " ".join(CliRunner().invoke(cli.app, ["cluster", "list"]).stdout.split())
    assert "broker-w has no master" in text and "waiting for replica(s) [0, 2]" in text
    assert "0a1b2c3d:1" in text
    rows = json.loads(CliRunner().invoke(cli.app, ["-o", "json", "cluster", "list"]).stdout)
    assert rows[0]["incarnation"] == "0a1b2c3d4e5f60718293a4b5c6d7e8f9:1"
    assert rows[0]["group_waiting_for"] == [0, 2]
