"""SubscriptionGroupManager against a real config center that is away at first: the persisted
table is enforced meanwhile, and once the config center answers the table becomes exactly what
it holds (definitions deleted while away are dropped, changed ones applied)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tidemq.broker.group_manager import SubscriptionGroupManager
from tidemq.broker.store.metadata import MetadataFile
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.common.errors import PreconditionFailed, ServiceUnavailable
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.groups import SubscriptionGroupConfig

from tests.support.processes import ServiceProcess, free_port, wait_until


def test_persisted_groups_are_enforced_until_the_config_center_answers(etcd_server, tmp_path):
    file = MetadataFile(Path(tmp_path) / "subscription_groups.json")
    seeded = SubscriptionGroupTable(file)
    seeded.put(SubscriptionGroupConfig("billing", consume_enable=False))
    seeded.put(SubscriptionGroupConfig("gone", consume_enable=False))

    port = free_port()
    table = SubscriptionGroupTable(file)  # what a restarted broker loads
    manager = SubscriptionGroupManager(table, f"127.0.0.1:{port}", retry_interval_s=0.2).start()
    center = ServiceProcess("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints],
                            Path(tmp_path) / "center", port=port)
    try:
        assert manager.wait_synced(0.3) is False
        with pytest.raises(PreconditionFailed):
            table.check_consume("billing")

        center.start()
        client = ConfigClient(center.addr)

        def put_once_reachable() -> bool:
            try:  # this process's manager opened the per-address breaker while nothing listened
                client.put("/tidemq/groups/billing",
                           json.dumps({"consume_enable": False, "retry_max_times": 2}).encode())
            except ServiceUnavailable:
                return False
            return True

        wait_until(put_once_reachable, 30, interval=0.2, message="the config center to answer")
        assert manager.wait_synced(30)
        wait_until(lambda: table.get("gone") is None, 15, message="the vanished group dropped")
        wait_until(lambda: table.effective("billing").retry_max_times == 2, 15,
                   message="the changed definition")
        with pytest.raises(PreconditionFailed):
            table.check_consume("billing")
        table.check_consume("gone")  # back to the defaults

        client.put("/tidemq/groups/billing", b"{}")
        wait_until(lambda: table.effective("billing").consume_enable, 15, message="live update")
        assert SubscriptionGroupTable(file).get("billing") == SubscriptionGroupConfig("billing")
        client.close()
    finally:
        manager.stop()
        center.kill()
