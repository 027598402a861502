"""One replica group as real processes, wired for faults.

Redis, a config center, two name servers (either may hold the controller lease) and three
brokers of one group (`broker_name` "chaos-a", replica ids 0..2). Each broker reaches the
config center and the name servers through its own FaultProxy, and its HA endpoint is
advertised through one too, so `partition(i)` cuts replica i off from the controller, the
routes and its peers while producers can still reach it (the gray failure of a deposed
master). Everything on 127.0.0.1 with ephemeral ports and temporary data dirs.
(`tests.support.cluster.ReplicaGroup` is the plain group the integration tests start; this
one adds the fault proxies and reads the controller's keys.)
"""

from __future__ import annotations

import json
import os
import signal
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cluster import (
    BROKER_TEST_FLAGS,
    CONTROLLER_TEST_FLAGS,
    REPLICATION_TEST_FLAGS,
    process_group,
)
from tests.support.faultproxy import FaultProxy
from tests.support.processes import ServiceProcess, free_port, start_redis, wait_until

GROUP = "chaos-a"
REPLICAS = 3
LEASE_TTL_S = 2   # broker lease (the controller's: CONTROLLER_TEST_FLAGS)


@dataclass
class Replica:
    replica_id: int
    process: ServiceProcess
    proxies: list[FaultProxy]
    paused: bool = False

    @property
    def commitlog_dir(self) -> Path:
        return self.process.workdir / "data" / "store" / "commitlog"

    @property
    def running(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None


@dataclass
class ChaosGroup:
    config_center: ServiceProcess
    namesrvs: list[ServiceProcess]
    replicas: list[Replica] = field(default_factory=list)

    @property
    def namesrv_addrs(self) -> str:
        return ";".join(n.addr for n in self.namesrvs)

    # -- what the controller says ------------------------------------------------------------
    def _config(self):
        from tidemq.configclient.client import ConfigClient

        return ConfigClient(self.config_center.addr, timeout=2.0)

    def state(self) -> dict:
        with self._config() as config:
            kv = config.get(f"/tidemq/replication/groups/{GROUP}")
        return json.loads(kv.value) if kv else {}

    def live(self) -> dict[int, dict]:
        with self._config() as config:
            found = config.range(f"/tidemq/replication/live/{GROUP}/")
        return {int(kv.key.rsplit("/", 1)[1]): json.loads(kv.value) for kv in found.kvs}

    def master(self) -> Replica | None:
        master = self.state().get("master", -1)
        return self.replicas[master] if 0 <= master < len(self.replicas) else None

    def controller(self) -> ServiceProcess | None:
        with self._config() as config:
            kv = config.get("/tidemq/controller/leader")
        addr = json.loads(kv.value).get("addr") if kv else None
        return next((n for n in self.namesrvs if n.addr == addr), None)

    def healthy(self, in_sync: int) -> bool:
        """A live master with at least `in_sync` in-sync replicas: writes can be acknowledged."""
        try:
            state, live = self.state(), self.live()
        except Exception:   # the config center may be unreachable for a moment
            return False
        master = state.get("master", -1)
        return master in live and len(set(state.get("in_sync", ())) & set(live)) >= in_sync

    def converged(self) -> int | None:
        """Every replica live, in sync and at the same log end: that end, else None."""
        try:
            state, live = self.state(), self.live()
        except Exception:
            return None
        ends = {info.get("log_end") for info in live.values()}
        if len(live) == len(self.replicas) and len(state.get("in_sync", ())) == len(
                self.replicas) and len(ends) == 1:
            return ends.pop()
        return None

    def explain(self, lines: int = 25) -> str:
        """The group key, the live keys and the last lines of every process's log."""
        parts = []
        try:
            parts.append(f"group state: {self.state()}")
            parts.append(f"live replicas: {self.live()}")
        except Exception as exc:
            parts.append(f"config center unreadable: {exc}")
        processes = [(f"replica-{r.replica_id}"
                      f"{' (paused)' if r.paused else ''}", r.process) for r in self.replicas]
        processes += [(f"name-server {n.addr}", n) for n in self.namesrvs]
        for name, process in processes:
            running = process.proc is not None and process.proc.poll() is None
            tail = process.log.read_text(errors="replace").splitlines()[-lines:] \
                if process.log.exists() else []
            parts.append(f"--- {name} ({'running' if running else 'down'}), last log lines:")
            parts.extend(tail)
        return "\n".join(parts)

    # -- faults ------------------------------------------------------------------------------
    def kill(self, replica: Replica) -> None:
        replica.process.kill()

    def restart(self, replica: Replica) -> None:
        if not replica.running:
            replica.process.start(timeout=60)

    def pause(self, replica: Replica) -> None:
        os.kill(replica.process.pid, signal.SIGSTOP)
        replica.paused = True

    def resume(self, replica: Replica) -> None:
        if replica.paused:
            os.kill(replica.process.pid, signal.SIGCONT)
            replica.paused = False

    def partition(self, replica: Replica) -> None:
        for proxy in replica.proxies:
            proxy.cut()

    def heal(self, replica: Replica) -> None:
        for proxy in replica.proxies:
            proxy.heal()

    def undo_all(self) -> None:
        for replica in self.replicas:
            self.resume(replica)
            self.heal(replica)
            self.restart(replica)
        for namesrv in self.namesrvs:
            if namesrv.proc is None or namesrv.proc.poll() is not None:
                namesrv.start(timeout=60)


def broker_args(replica_id: int, addrs: dict[str, str], ha_port: int,
                flush_mode: str) -> list[str]:
    """`addrs`: where this broker reaches "config", "namesrv0", "namesrv1" and where its peers
    reach its HA endpoint ("ha"): a FaultProxy's address each, or the real ones."""
    return [
        "--cluster-name", "ChaosCluster", "--broker-name", GROUP,
        "--broker-id", str(replica_id),
        "--namesrv-addrs", ";".join(addr for name, addr in addrs.items()
                                    if name.startswith("namesrv")),
        "--config-center", addrs["config"],
        *BROKER_TEST_FLAGS, *REPLICATION_TEST_FLAGS,
        "--broker-role", "SYNC_MASTER", "--min-in-sync-replicas", "2",
        "--broker-lease-ttl-s", str(LEASE_TTL_S), "--sync-replication-timeout-ms", "3000",
        "--replica-lag-max-ms", "3000", "--flush-mode", flush_mode,
        "--ha-port", str(ha_port), "--ha-advertised-addr", addrs["ha"],
    ]


def start_group(tmp_path: Path, stack: ExitStack, *, flush_mode: str = "sync",
                proxied: bool = True) -> ChaosGroup:
    """The group, healthy; `flush_mode` "sync" makes every acknowledged message durable on the
    master's disk too (the chaos suite), "async" is RocketMQ's usual SYNC_MASTER pairing.
    `proxied=False` wires the brokers directly (no partitions possible): what benchmarks
    measure, without the proxies' extra hop and CPU."""
    redis = start_redis(tmp_path)
    stack.callback(redis.kill)
    start = stack.enter_context(process_group(tmp_path))
    config_center = start("tidemq.configcenter", ["--redis-url", redis.url])
    namesrvs = [start("tidemq.nameserver", ["--config-center", config_center.addr,
                                            *CONTROLLER_TEST_FLAGS])
                for _ in range(2)]
    group = ChaosGroup(config_center, namesrvs)
    for replica_id in range(REPLICAS):
        ha_port = free_port()
        addrs = {"config": config_center.addr,
                 **{f"namesrv{i}": n.addr for i, n in enumerate(namesrvs)},
                 "ha": f"127.0.0.1:{ha_port}"}
        proxies = {name: stack.enter_context(FaultProxy(addr, name))
                   for name, addr in addrs.items()} if proxied else {}
        process = start("tidemq.broker", broker_args(
            replica_id, {name: proxies[name].addr if proxied else addr
                         for name, addr in addrs.items()}, ha_port, flush_mode))
        group.replicas.append(Replica(replica_id, process, list(proxies.values())))
    wait_until(lambda: group.healthy(in_sync=2), 60, interval=0.2,
               message=f"{GROUP} to have a master and 2 in-sync replicas")
    return group
