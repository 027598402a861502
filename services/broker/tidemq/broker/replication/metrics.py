"""Prometheus metrics of the role layer (the stream's lag, in-sync size and epoch are the
store's: store/ha). Registered by every broker, replicated or not, so dashboards and scrape
checks see the same families everywhere (zero / empty without replication)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
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
