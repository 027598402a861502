"""Name-server settings (see services/name-server/README.md for the table)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting


@dataclass
class NameServerSettings(ServiceSettings):
    """TideMQ name server: the routing registry brokers register with and clients ask."""

    port: int = setting(9876, "gRPC port of NameServerService (0 = pick a free port)")
    data_dir: str = setting("./.data/name-server", "unused: the name server keeps no state on disk")
    scan_interval_s: float = setting(10.0, "how often silent brokers are looked for (ref 10 s)")
    broker_expiry_s: float = setting(
        120.0, "a broker silent this long is removed from every table (ref 120 s)"
    )
    config_center: str = setting(
        "", "config-center host:port to follow broker_expiry_s / scan_interval_s live from "
        "('' = off: the name server needs no other service)")
    cluster_name: str = setting("DefaultCluster", "config-center cluster scope of those settings")
    config_group: str = setting("name-server", "config-center group scope (overrides cluster)")
    controller_enabled: bool = setting(
        True, "run the replication controller (needs config_center; one name server acts, "
        "the others stand by)")
    controller_lease_ttl_s: int = setting(
        10, "TTL in seconds of the controller's lease: a dead controller is replaced after "
        "this (ref 10 s)")
    failover_detection: bool = setting(
        True, "replace a master that stopped serving before its lease expires, once it is "
        "fenced (docs/replication.md, \"Detecting a failed master\"); false = the lease only")
    failover_probe_interval_ms: int = setting(
        500, "health check of every master this often (ms)")
    failover_probe_timeout_ms: int = setting(
        1000, "a master's health check not answered within this failed (ms)")
    failover_probe_failing_ms: int = setting(
        1000, "a frozen master is replaced only once its health checks failed this long (ms)")
    failover_slave_silence_ms: int = setting(
        2000, "a frozen master is replaced only once every in-sync slave reported its HA "
        "stream silent this long (ms)")
    failover_margin_ms: int = setting(
        500, "a frozen master is replaced only once its last live-key renewal is older than "
        "its fence (master_fence_s) by this margin (ms)")
    unclean_election: bool = setting(
        False, "elect a replica outside the in-sync set when no in-sync replica is live "
        "(may lose acknowledged messages; per group: /tidemq/replication/settings/<name>)")

    def detection(self):
        """The controller's failure-detection settings (controller/detection.py)."""
        from tidemq.nameserver.controller.detection import DetectionSettings

        return DetectionSettings(self.failover_detection, self.failover_probe_interval_ms / 1000,
                                 self.failover_probe_timeout_ms / 1000,
                                 self.failover_probe_failing_ms / 1000,
                                 self.failover_slave_silence_ms / 1000,
                                 self.failover_margin_ms / 1000)
