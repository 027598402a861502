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
