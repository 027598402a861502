"""Dynamic settings: config-center scopes reach the store's live settings without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from tidemq.broker.dynamic import DynamicSettings
from tidemq.broker.store import StoreConfig
from tidemq.common.errors import InvalidArgument, ServiceUnavailable
from tidemq.configclient.client import ConfigClient

from tests.support.processes import ServiceProcess, free_port, wait_until

CLUSTER_RETENTION = "/tidemq/config/cluster/C1/retention_hours"
BROKER_RETENTION = "/tidemq/config/broker/broker-a-0/retention_hours"
BROKER_RATIO = "/tidemq/config/broker/broker-a-0/disk_max_used_ratio"
GROUP_RATIO = "/tidemq/config/group/broker-a/disk_max_used_ratio"


def follow(addr: str, store_config: StoreConfig, **kwargs) -> DynamicSettings:
    dynamic = DynamicSettings(addr, store_config, cluster="C1", broker_name="broker-a",
                              broker_id=0, **kwargs)
    dynamic.start()
    return dynamic


def test_most_specific_scope_applies_live_and_bad_values_are_refused(etcd_server, services,
                                                                     tmp_path):
    center = services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])
    store_config = StoreConfig(data_dir=Path(tmp_path), retention_hours=72.0,
                               disk_max_used_ratio=0.75)
    client = ConfigClient(center.addr)
    client.put(CLUSTER_RETENTION, b"12")
    dynamic = follow(center.addr, store_config)
    try:
        wait_until(lambda: store_config.retention_hours == 12.0, 15, message="cluster value")
        client.put(BROKER_RETENTION, b"6")
        wait_until(lambda: store_config.retention_hours == 6.0, 15, message="broker scope wins")

        # A value no service takes is refused when written; one that only another reader of
        # the name takes (retention_hours 0 is the trace collector's "no age bound") is
        # written, and refused by the broker, which keeps what it had. Changes are applied in
        # revision order, so once the later write shows, the earlier was handled.
        with pytest.raises(InvalidArgument) as refused:
            client.put(BROKER_RATIO, b"1.5")
        assert refused.value.code == "INVALID_SETTING" and "(0, 1]" in str(refused.value)
        client.put(BROKER_RETENTION, b"0")
        client.put(GROUP_RATIO, b"0.6")
        wait_until(lambda: store_config.disk_max_used_ratio == 0.6, 15, message="a later change")
        assert store_config.retention_hours == 6.0  # never 0
        client.put(BROKER_RETENTION, b"5")
        wait_until(lambda: store_config.retention_hours == 5.0, 15, message="a legal value")

        client.delete(BROKER_RETENTION)
        wait_until(lambda: store_config.retention_hours == 12.0, 15, message="cluster fallback")
        client.delete(CLUSTER_RETENTION)
        wait_until(lambda: store_config.retention_hours == 72.0, 15,
                   message="fallback to the static setting")
    finally:
        dynamic.stop()
        client.close()


def test_follows_a_config_center_that_starts_later(etcd_server, tmp_path):
    port = free_port()
    store_config = StoreConfig(data_dir=Path(tmp_path), retention_hours=72.0)
    dynamic = follow(f"127.0.0.1:{port}", store_config, retry_interval_s=0.2)  # must not block
    center = ServiceProcess("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints],
                            Path(tmp_path) / "center", port=port)
    try:
        center.start()
        client = ConfigClient(center.addr)

        def put_once_reachable() -> bool:
            # This process's follower opened the per-address breaker while nothing listened.
            try:
                client.put(CLUSTER_RETENTION, b"24")
            except ServiceUnavailable:
                return False
            return True

        wait_until(put_once_reachable, 30, interval=0.2, message="the config center to answer")
        wait_until(lambda: store_config.retention_hours == 24.0, 30,
                   message="the value once the config center appears")
        client.close()
    finally:
        dynamic.stop()
        center.kill()
