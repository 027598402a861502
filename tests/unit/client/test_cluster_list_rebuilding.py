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
    assert _replication_cells(entry) == [1, 3, "rebuilding", 900, "2.5"]


def test_an_ordinary_lagging_slave_shows_as_out_of_sync():
    assert _replication_cells(slave_entry(rebuilding=False))[2] == "no"
