"""Prometheus metrics of the role layer (the stream's lag, in-sync size and epoch are the
store's: store/ha)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

ROLE = Gauge("tidemq_broker_replica_role", "1 while this replica is its group's master, else 0")
ROLE_CHANGES = Counter("tidemq_broker_replica_role_changes_total",
                       "Role changes this replica carried out", ["role"])
LEASE_LOSSES = Counter("tidemq_broker_replica_lease_losses_total",
                       "Live-key leases lost (a master steps down at once)")
