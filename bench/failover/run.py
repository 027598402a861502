"""Replication cost and failover time, in one run (see README.md).

1. Produce throughput of 1 KiB messages into a 3-replica SYNC_MASTER group
   (min_in_sync_replicas 2), beside the same run's figure for a single broker with
   replication off, both ASYNC_FLUSH; target: at least 50 % of it.
2. Replication lag under that load (bytes between the master's log end and the slowest
   slave's, sampled from the replicas' live keys).
3. Write outage after a master SIGKILL — from the kill until the producer's sends are
   acknowledged again — over several kills; targets: median < 3 s, p99 < 5 s. The group
   runs with the test lease (`broker_lease_ttl_s` 2 s): a SIGKILLed master is noticed when
   its lease expires, so the outage is about the lease TTL plus one route refresh.

    uv run --frozen python -m bench.failover [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from tests.chaos.group import ChaosGroup, start_group
from tests.chaos.run import TOPIC, _create_topic
from tests.support.processes import wait_until

BODY = b"x" * 1024
BATCH = 32
PEERS = [  # measured earlier on this machine (1 KiB messages, publish, replicated)
    ("RabbitMQ quorum queues (earlier)", "~17 700 msgs/s"),
    ("NATS JetStream (earlier)", "~23 000 msgs/s"),
]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Load:
    """`threads` producers sending batches of 1 KiB messages until stopped; counts acks and
    remembers when each acknowledged batch came back."""

    def __init__(self, namesrv: str, threads: int) -> None:
        from tidemq.client import Producer

        self.producer = Producer(namesrv, send_timeout=5.0, route_refresh_s=1.0)
        self.acked = 0
        self.last_ack = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self.producer.close()

    def _run(self) -> None:
        from tidemq.client import Message, SendStatus
        from tidemq.common.errors import TideMQError

        batch = [Message(TOPIC, BODY) for _ in range(BATCH)]
        while not self._stop.is_set():
            try:
                results = self.producer.send_batch(batch)
            except TideMQError:
                continue
            if all(r.status is SendStatus.SEND_OK for r in results):
                with self._lock:
                    self.acked += len(results)
                    self.last_ack = time.monotonic()


def throughput(namesrv: str, seconds: float, threads: int,
               sample=lambda: None) -> tuple[float, list]:
    samples = []
    with Load(namesrv, threads) as load:
        wait_until(lambda: load.acked, 60, message="the first acknowledged batch")
        start_count, started = load.acked, time.monotonic()
        while time.monotonic() - started < seconds:
            value = sample()
            if value is not None:
                samples.append(value)
            time.sleep(0.2)   # sampling period of the lag, not a synchronisation
        rate = (load.acked - start_count) / (time.monotonic() - started)
    return rate, samples


def replication_lag(group: ChaosGroup):
    def sample():
        try:
            ends = [info["log_end"] for info in group.live().values()]
        except Exception:
            return None
        return max(ends) - min(ends) if len(ends) > 1 else None
    return sample


def outage_after_kill(group: ChaosGroup, namesrv: str) -> float:
    """SIGKILL the master under load; seconds until a send is acknowledged again."""
    with Load(namesrv, 2) as load:
        wait_until(lambda: load.acked, 60, message="traffic before the kill")
        master = group.master()
        assert master is not None
        killed_at = time.monotonic()
        group.kill(master)
        wait_until(lambda: load.last_ack > killed_at, 60, interval=0.01,
                   message="an acknowledged send after the kill")
        outage = load.last_ack - killed_at
    group.restart(master)
    wait_until(group.converged, 120, interval=0.2, message="replicas in sync again")
    return outage


def single_broker_rate(tmp: Path, seconds: float, threads: int) -> float:
    from tests.support.cluster import running_cluster

    with running_cluster(tmp, broker_names=("solo",)) as cluster:
        from tests.support.cluster import create_topic_in_config_center, wait_for_route

        create_topic_in_config_center(cluster, TOPIC, 4)
        wait_for_route(cluster, TOPIC, 1)
        rate, _ = throughput(cluster.namesrv_addrs, seconds, threads)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short load, 3 kills")
    parser.add_argument("--kills", type=int, default=0, help="master kills (default 20; 3 quick)")
    args = parser.parse_args()
    seconds = 4.0 if args.quick else 15.0
    kills = args.kills or (3 if args.quick else 20)
    threads = 8
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-failover-") as tmp:
        single = single_broker_rate(Path(tmp) / "single", seconds, threads)
        with ExitStack() as stack:
            group = start_group(Path(tmp) / "group", stack, flush_mode="async")
            _create_topic(group)
            replicated, lags = throughput(group.namesrv_addrs, seconds, threads,
                                          replication_lag(group))
            outages = []
            for number in range(kills):
                outages.append(outage_after_kill(group, group.namesrv_addrs))
                print(f"  kill {number + 1}/{kills}: write outage {outages[-1]:.2f} s",
                      flush=True)
    print(f"produce, 1 KiB, {threads} producers x batch {BATCH}:")
    print(f"  single broker, replication off, ASYNC_FLUSH (same run): {single:10.0f} msgs/s")
    print(f"  3 replicas SYNC_MASTER, min in-sync 2, ASYNC_FLUSH:     {replicated:10.0f} msgs/s "
          f"= {replicated / single:.0%} of single (target >= 50 %)")
    for name, figure in PEERS:
        print(f"  {name}: {figure}")
    if lags:
        print(f"replication lag under load: median {statistics.median(lags) / 1024:.0f} KiB, "
              f"max {max(lags) / 1024:.0f} KiB "
              f"(~{statistics.median(lags) / max(replicated * len(BODY), 1) * 1000:.0f} ms at "
              "this rate)")
    print(f"write outage after master SIGKILL over {len(outages)} kills: "
          f"median {statistics.median(outages):.2f} s, p99 {percentile(outages, 99):.2f} s, "
          f"max {max(outages):.2f} s (targets: median < 3 s, p99 < 5 s)")


if __name__ == "__main__":
    main()
