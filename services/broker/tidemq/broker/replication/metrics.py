"""Prometheus metrics of the role layer (the stream's lag, in-sync size and epoch are the
store's: store/ha). Registered by every broker, replicated or not, so dashboards and scrape
checks see the same families everywhere (zero / empty without replication)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

ROLE = Gauge("tidemq_broker_replica_role", "1 while this replica is its group's master, else 0")
ROLE_CHANGES = Counter("tidemq_broker_replica_role_changes_total",
                       "Role changes this replica carried out", ["role"])
LEASE_LOSSES = Counter("tidemq_broker_replica_lease_losses_total",
                       "Live-key leases lost (a master steps down at once)")


Progress = Callable[[], list[tuple[int, int, int, int, bool]]]


class ReplicaLagCollector(Collector):
    """Master: each slave's lag in seconds (since it last had the master's log end), read at
    scrape time from the in-sync tracker — nothing on the append path."""

    def __init__(self) -> None:
        self.progress: Progress = list  # no replication: no slaves

    def collect(self):
        family = GaugeMetricFamily("tidemq_broker_replication_lag_seconds",
                                   "Master: how long each slave has not had the master's log end",
                                   labels=["replica"])
        for replica, _end, _lag_bytes, lag_ms, _in_sync in self.progress():
            family.add_metric([str(replica)], lag_ms / 1000)
        yield family


LAG = ReplicaLagCollector()
REGISTRY.register(LAG)


def watch_replicas(progress: Progress) -> None:
    LAG.progress = progress


RebuildProgress = Callable[[], tuple[int, "int | None"]]


class RebuildCollector(Collector):
    """Slave: rebuilds from the master's oldest segment (store/ha/client.py) and how many
    bytes the current one still has to copy, read at scrape time from the HA client."""

    def __init__(self) -> None:
        self.progress: RebuildProgress = lambda: (0, None)   # no replication: no rebuild

    def collect(self):
        rebuilds, remaining = self.progress()
        yield CounterMetricFamily("tidemq_broker_replica_rebuilds",
                                  "Times this replica discarded its data to rebuild from its "
                                  "master's oldest retained offset", value=rebuilds)
        yield GaugeMetricFamily("tidemq_broker_replica_rebuilding",
                                "1 while this replica rebuilds from its master",
                                value=0 if remaining is None else 1)
        yield GaugeMetricFamily("tidemq_broker_replica_rebuild_remaining_bytes",
                                "Bytes the current rebuild still copies to reach the master's "
                                "log end at its start (0 when not rebuilding)",
                                value=remaining or 0)


REBUILD = RebuildCollector()
REGISTRY.register(REBUILD)


def watch_rebuild(progress: RebuildProgress) -> None:
    REBUILD.progress = progress
