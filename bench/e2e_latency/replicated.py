"""(d) Send→listener latency through a 3-replica SYNC_MASTER group, beside (a)'s single
broker in the same run.

With replication on, a send is acknowledged once the in-sync slaves hold it, and a consumer
sees it only then (the read fence, docs/replication.md "What consumers can see"): the
listener's latency includes one HA round trip to the slaves and the long poll's wake-up by
the confirmed offset, not by the append. The group runs on its own etcd (one member: the
config center only sets the group up and keeps its controller state here), config center
and name servers (the replication controller), so (a)'s topics and routes are untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

TOPIC = "BenchLatencyReplicated"


def measure(start, tmp: Path, count: int,
            measure_latency: Callable[[str, str, int], list[float]], redis) -> list[float]:
    """Start the group (with `start`: its processes die with the caller's process group) on
    an etcd of its own under `tmp`, and measure `count` sends one at a time. `redis`: the
    run's Redis (the gateways' breaker state; no gateway is started here)."""
    from tests.integration.replication.replica_group import wait_in_sync
    from tests.support.cluster import (
        create_topic_in_config_center,
        start_cluster,
        start_replica_group,
        wait_for_route,
    )
    from tests.support.etcd import start_etcd

    etcd = start_etcd(tmp)
    try:
        cluster = start_cluster(start, etcd, redis, broker_names=(), controller=True)
        group = start_replica_group(start, cluster, "broker-r")   # SYNC_MASTER, min in-sync 2
        create_topic_in_config_center(cluster, TOPIC, 1)
        wait_for_route(cluster, TOPIC, 1)
        group.wait_master()
        wait_in_sync(cluster, {0, 1, 2})
        return measure_latency(cluster.namesrv_addrs, TOPIC, count)
    finally:
        etcd.kill()
