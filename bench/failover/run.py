"""Replication cost and failover time, in one run (see README.md).

1. Produce throughput of 1 KiB messages into a 3-replica SYNC_MASTER group
   (min_in_sync_replicas 2), beside the same run's figure for a single broker with
   replication off, both ASYNC_FLUSH; target: at least 50 % of it.
2. Replication lag under that load (bytes between the master's log end and the slowest
   slave's, sampled from the replicas' live keys).
3. Write outage after a master fault — from the fault until a send is acknowledged by
   another replica — over several SIGKILLs (a crashed process: the controller's probe is
   refused and the slaves' HA streams close) and several SIGSTOPs (a frozen process: probes
   time out, the streams go silent, and the master's renewals stop; it is replaced once its
   fence has passed). The group runs with the DEFAULT timings of brokers and name servers
   (lease 10 s, refresh 1 s, fence 3 s, probes every 0.5 s), not the tests' short ones.
   Targets: SIGKILL median < 2 s, SIGSTOP median < 6 s.
4. False failovers: elections in a run with no fault, under the produce load plus CPU hogs
   (busy processes, one per core by default) — target: none.

    uv run --frozen python -m bench.failover [--quick] [--faults N] [--loaded-s S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.group import GROUP, REPLICAS, ChaosGroup, Replica
from tests.chaos.run import TOPIC, _create_topic
from tests.support.cluster import BROKER_TEST_FLAGS, process_group
from tests.support.etcd import start_etcd
from tests.support.processes import free_port, wait_until

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

        # The SDK's send timeout (3 s): a send caught by a SIGSTOP waits that long at most.
        self.producer = Producer(namesrv, route_refresh_s=1.0)
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


ETCD_MEMBERS = 3   # the config center's store as deployed (docs/deployment.md)


def start_default_group(tmp: Path, stack: ExitStack) -> ChaosGroup:
    """A 3-member etcd cluster (the config center's store, as deployed), one config center,
    two name servers and a 3-replica SYNC_MASTER group (min_in_sync_replicas 2, ASYNC_FLUSH)
    with every timing at its default: only storage sizes are the tests' (BROKER_TEST_FLAGS),
    so start-up stays quick."""
    etcd = start_etcd(tmp, ETCD_MEMBERS)
    stack.callback(etcd.kill)
    start = stack.enter_context(process_group(tmp))
    config_center = start("tidemq.configcenter", ["--etcd-endpoints", etcd.endpoints])
    namesrvs = [start("tidemq.nameserver", ["--config-center", config_center.addr])
                for _ in range(2)]
    group = ChaosGroup([config_center], namesrvs)
    for replica_id in range(REPLICAS):
        ha_port = free_port()
        process = start("tidemq.broker", [
            "--cluster-name", "BenchCluster", "--broker-name", GROUP,
            "--broker-id", str(replica_id), "--namesrv-addrs", group.namesrv_addrs,
            "--config-center", config_center.addr, *BROKER_TEST_FLAGS,
            "--replication-enabled", "true", "--broker-role", "SYNC_MASTER",
            "--min-in-sync-replicas", "2", "--flush-mode", "async", "--ha-port", str(ha_port)])
        group.replicas.append(Replica(replica_id, process, []))
    wait_until(lambda: group.healthy(in_sync=2), 60, interval=0.2,
               message=f"{GROUP} to have a master and 2 in-sync replicas")
    return group


@dataclass(frozen=True)
class Outage:
    """Seconds from a master's fault until: the controller recorded a new master, a name
    server routed to it, and a send was acknowledged by it (the write outage)."""

    elected: float
    routed: float
    acked: float


def outage_after(group: ChaosGroup, namesrv: str, fault: str) -> Outage:
    """SIGKILL ("kill") or SIGSTOP ("stop") the master under load and time the failover's
    steps (polled every 20 ms); then restart or resume it and wait until it caught up."""
    from tidemq.client.routes import NameServerClient

    routes = NameServerClient(namesrv)
    with Load(namesrv, 2) as load:
        wait_until(lambda: load.acked, 60, message="traffic before the fault")
        master = group.master()
        assert master is not None
        old_addr = routes.route(TOPIC).master_addr(GROUP)
        old_host = next(iter(load.first_ack_by_host))
        fault_at = time.monotonic()
        (group.kill if fault == "kill" else group.pause)(master)
        elected = routed = acked = None
        deadline = fault_at + 60
        try:
            while acked is None or elected is None or routed is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no failover within 60 s of the {fault}:\n"
                                       + group.explain())
                now = time.monotonic()
                if elected is None and group.master() not in (None, master):
                    elected = now
                if routed is None and _routed_master(routes) not in ("", old_addr):
                    routed = now
                acked = acked or load.first_ack_not_from(old_host, fault_at)
                time.sleep(0.02)  # the polling period of this measurement
        finally:
            group.resume(master)
    group.restart(master)
    wait_until(group.converged, 120, interval=0.2, message="replicas in sync again")
    return Outage(elected - fault_at, routed - fault_at, acked - fault_at)


def false_failovers(group: ChaosGroup, namesrv: str, seconds: float, hogs: int,
                    threads: int) -> tuple[int, float, float]:
    """Elections (epoch changes) during `seconds` of produce load plus `hogs` busy processes,
    with no fault; also the load average at the end and the produce rate meanwhile."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(hogs)]
    try:
        epoch = group.state()["epoch"]
        rate, _ = throughput(namesrv, seconds, threads)
        elections = group.state()["epoch"] - epoch
        load_average = os.getloadavg()[0]
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return elections, load_average, rate


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
    parser.add_argument("--quick", action="store_true",
                        help="short load, 3 faults of each kind, 20 s loaded run")
    parser.add_argument("--faults", type=int, default=0,
                        help="SIGKILLs and SIGSTOPs each (default 20; 3 quick)")
    parser.add_argument("--loaded-s", type=float, default=0,
                        help="seconds of the no-fault loaded run (default 120; 20 quick)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2,
                        help="busy processes during the loaded run (default: one per core)")
    args = parser.parse_args()
    seconds = 4.0 if args.quick else 15.0
    faults = args.faults or (3 if args.quick else 20)
    loaded_s = args.loaded_s or (20.0 if args.quick else 120.0)
    threads = 8
    print(f"2-core machine shared with other work; load average at start "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-failover-") as tmp:
        single = single_broker_rate(Path(tmp) / "single", seconds, threads)
        with ExitStack() as stack:
            group = start_default_group(Path(tmp) / "group", stack)
            _create_topic(group)
            replicated, lags = throughput(group.namesrv_addrs, seconds, threads,
                                          replication_lag(group))
            elections, loaded_avg, loaded_rate = false_failovers(
                group, group.namesrv_addrs, loaded_s, args.hogs, threads)
            print(f"  loaded run: {elections} elections in {loaded_s:.0f} s, load average "
                  f"{loaded_avg:.1f}", flush=True)
            steps: dict[str, list[Outage]] = {"kill": [], "stop": []}
            for number in range(faults):
                for fault in ("kill", "stop"):   # interleaved: both see the same conditions
                    step = outage_after(group, group.namesrv_addrs, fault)
                    steps[fault].append(step)
                    print(f"  {fault} {number + 1}/{faults}: elected after {step.elected:.2f} s,"
                          f" routed {step.routed:.2f} s, write outage {step.acked:.2f} s "
                          f"(load average {os.getloadavg()[0]:.1f})", flush=True)
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
    print("write outage after a master fault, default timings (lease 10 s, fence 3 s; "
          f"the controller's store: one config center on {ETCD_MEMBERS} etcd members):")
    for fault, label, target in (("kill", "SIGKILL", 2.0), ("stop", "SIGSTOP", 6.0)):
        outages = [step.acked for step in steps[fault]]
        median = statistics.median(outages)
        print(f"  {label} x{len(outages)}: median {median:.2f} s, p99 "
              f"{percentile(outages, 99):.2f} s, max {max(outages):.2f} s "
              f"(target: median < {target:g} s: {'met' if median < target else 'MISSED'})")
        print(f"    of which: new master recorded after median "
              f"{statistics.median(s.elected for s in steps[fault]):.2f} s, routed after median "
              f"{statistics.median(s.routed for s in steps[fault]):.2f} s")
    print(f"false failovers: {elections} elections in {loaded_s:.0f} s without a fault, under "
          f"{threads} producers ({loaded_rate:.0f} msgs/s) and {args.hogs} CPU hogs, load "
          f"average {loaded_avg:.1f} (target: none: {'met' if elections == 0 else 'MISSED'})")


if __name__ == "__main__":
    main()
