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
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.group import GROUP, LEASE_TTL_S, ChaosGroup, start_group
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
        self.first_ack_by_host: dict[str, float] = {}  # store host (msg id prefix) -> when
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
                now = time.monotonic()
                with self._lock:
                    self.acked += len(results)
                    self.last_ack = now
                    self.first_ack_by_host.setdefault(results[0].msg_id[:16], now)

    def first_ack_not_from(self, host: str, after: float) -> float | None:
        """When a broker other than `host` first acknowledged a send, if after `after`."""
        with self._lock:
            times = [t for h, t in self.first_ack_by_host.items() if h != host and t > after]
        return min(times, default=None)


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


@dataclass(frozen=True)
class Outage:
    """Seconds from a master's SIGKILL until: the controller recorded a new master, a name
    server routed to it, and a send was acknowledged by it (the write outage)."""

    elected: float
    routed: float
    acked: float


def outage_after_kill(group: ChaosGroup, namesrv: str) -> Outage:
    """SIGKILL the master under load and time the failover's steps (polled every 20 ms)."""
    from tidemq.client.routes import NameServerClient

    routes = NameServerClient(namesrv)
    with Load(namesrv, 2) as load:
        wait_until(lambda: load.acked, 60, message="traffic before the kill")
        master = group.master()
        assert master is not None
        old_addr = routes.route(TOPIC).master_addr(GROUP)
        old_host = next(iter(load.first_ack_by_host))
        killed_at = time.monotonic()
        group.kill(master)
        elected = routed = acked = None
        deadline = killed_at + 60
        while acked is None or elected is None or routed is None:
            if time.monotonic() > deadline:
                raise TimeoutError("no failover within 60 s of the kill:\n" + group.explain())
            now = time.monotonic()
            if elected is None and group.master() not in (None, master):
                elected = now
            if routed is None and _routed_master(routes) not in ("", old_addr):
                routed = now
            acked = acked or load.first_ack_not_from(old_host, killed_at)
            time.sleep(0.02)  # the polling period of this measurement
    group.restart(master)
    wait_until(group.converged, 120, interval=0.2, message="replicas in sync again")
    return Outage(elected - killed_at, routed - killed_at, acked - killed_at)


def _routed_master(routes) -> str:
    from tidemq.common.errors import TideMQError

    try:
        return routes.route(TOPIC).brokers[GROUP].master_addr
    except (TideMQError, KeyError):
        return ""


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
            # One plain Redis and one config center, as the figures below were measured.
            group = start_group(Path(tmp) / "group", stack, flush_mode="async",
                                proxied=False, replicated_store=False)
            _create_topic(group)
            replicated, lags = throughput(group.namesrv_addrs, seconds, threads,
                                          replication_lag(group))
            steps = []
            for number in range(kills):
                steps.append(outage_after_kill(group, group.namesrv_addrs))
                print(f"  kill {number + 1}/{kills}: elected after {steps[-1].elected:.2f} s, "
                      f"routed {steps[-1].routed:.2f} s, write outage {steps[-1].acked:.2f} s",
                      flush=True)
            outages = [step.acked for step in steps]
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
    print(f"  of which: new master recorded after median "
          f"{statistics.median(s.elected for s in steps):.2f} s (broker lease {LEASE_TTL_S} s), "
          f"routed after median {statistics.median(s.routed for s in steps):.2f} s")


if __name__ == "__main__":
    main()
