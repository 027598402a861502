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
    unclean_election: bool = setting(
        False, "elect a replica outside the in-sync set when no in-sync replica is live "
        "(may lose acknowledged messages; per group: /tidemq/replication/settings/<name>)")
