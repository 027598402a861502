"""One replica group as real processes, wired for faults.

The config center's store (a 3-member etcd cluster: tests.support.etcd), two config centers
given every member, two name servers (either may hold the controller lease) and three brokers
of one group (`broker_name` "chaos-a", replica ids 0..2). Brokers and name servers are given
both config centers. Each broker reaches each config center and each name server through its
own FaultProxy, and its HA endpoint is advertised through one too, so `partition(i)` cuts
replica i off from the controller, the routes and its peers while producers can still reach
it (the gray failure of a deposed master). etcd members are stopped (SIGSTOP), resumed and
killed by their process ids, and partitioned from each other where they run in network
namespaces of their own (root, `ip`, `nft`: tests/support/netns.py; else on 127.0.0.1).
Everything else on 127.0.0.1 with ephemeral ports and temporary data dirs. (`tests.support.cluster.ReplicaGroup` is the plain group the integration tests start;
this one adds the fault proxies and reads the controller's keys.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.compacted import BROKER_FLAGS as COMPACTION_FLAGS
from tests.chaos.faults import PARTITION_UNAVAILABLE
from tests.chaos.verify import controller_writes, master_grants, store_master_ends
from tests.support.cluster import (
    BROKER_TEST_FLAGS,
    CONTROLLER_TEST_FLAGS,
    REPLICATION_TEST_FLAGS,
    process_group,
)
from tests.support.damage import lose_tail, written_end
from tests.support.etcd import EtcdCluster, EtcdMember
from tests.support.faultproxy import FaultProxy
from tests.support.processes import ServiceProcess, free_port, freeze, wait_until

GROUP = "chaos-a"
REPLICAS = 3
LEASE_TTL_S = 2   # broker lease (the controller's: CONTROLLER_TEST_FLAGS)
CONFIG_CENTERS = 2
ETCD_MEMBERS = 3   # etcd's defaults: 100 ms heartbeat, 1 s election timeout


@dataclass
class Replica:
    replica_id: int
    process: ServiceProcess
    proxies: list[FaultProxy]
    paused: bool = False

    @property
    def store_dir(self) -> Path:
        """The broker's store (CommitLog, queues, epochs, its store id): what a disk holds."""
        return self.process.workdir / "data" / "store"

    @property
    def commitlog_dir(self) -> Path:
        return self.store_dir / "commitlog"

    @property
    def running(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None


@dataclass
class ChaosGroup:
    config_centers: list[ServiceProcess]
    namesrvs: list[ServiceProcess]
    replicas: list[Replica] = field(default_factory=list)
    etcd: EtcdCluster | None = None   # None: a store the run does not fault
    stopped_members: set[str] = field(default_factory=set)   # etcd members under SIGSTOP
    partitioned_members: set[str] = field(default_factory=set)   # cut from the other members
    # Brokers that died on their own while restarting (a signal or an error exit): each is
    # started once more so the run reaches its verdicts, and the run fails on them at the end.
    crashes: list[str] = field(default_factory=list)
    # (monotonic time, replica id) of every kill and planned stop: when a master was gone
    # (verify.masterless_spans), before the controller can know it.
    downs: list[tuple[float, int]] = field(default_factory=list)
    # The gateway-kafka instances in front of the group (tests.chaos.kafka_clients).
    kafka_gateways: list[ServiceProcess] = field(default_factory=list)

    @property
    def config_center(self) -> ServiceProcess:
        return self.config_centers[0]

    @property
    def config_addrs(self) -> str:
        """Every config center, as brokers and name servers are given them."""
        return ",".join(c.addr for c in self.config_centers)

    @property
    def namesrv_addrs(self) -> str:
        return ";".join(n.addr for n in self.namesrvs)

    # -- what the controller says ------------------------------------------------------------
    def _config(self):
        from tidemq.configclient.client import ConfigClient

        return ConfigClient(self.config_addrs, timeout=2.0)

    def state(self, timeout: float = 30.0) -> dict:
        """The group state; a config center that does not answer yet (its etcd just got
        its quorum back from the previous fault's undo) is asked again until `timeout`."""
        from tidemq.common import errors

        deadline = time.monotonic() + timeout
        while True:
            try:
                with self._config() as config:
                    kv = config.get(f"/tidemq/replication/groups/{GROUP}")
                return json.loads(kv.value) if kv else {}
            except errors.TideMQError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)   # a poll interval, bounded by the deadline

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

    def control_plane_problem(self) -> str | None:
        """None when every config center runs and the etcd cluster is whole (every member
        running, none stopped, each answering and naming the same leader), else what is
        missing."""
        down = [c.addr for c in self.config_centers if c.proc is None or c.proc.poll() is not None]
        if down:
            return f"config centers down: {down}"
        if self.etcd is None:
            return None
        if self.stopped_members:
            return f"etcd members stopped: {sorted(self.stopped_members)}"
        if self.partitioned_members:
            return f"etcd members partitioned: {sorted(self.partitioned_members)}"
        leaders = {}
        for member in self.etcd.members:
            if not member.running:
                return f"etcd member {member.name} is down"
            status = member.status(timeout=1.0)
            if status is None:
                return f"etcd member {member.name} does not answer"
            leaders[member.name] = status.leader
        if len(set(leaders.values())) != 1 or not next(iter(leaders.values())):
            return f"etcd members disagree on the leader: {leaders}"
        return None

    # -- the etcd cluster --------------------------------------------------------------------
    def _answering(self) -> list[EtcdMember]:
        assert self.etcd is not None
        return [m for m in self.etcd.members if m.running and m.name not in self.stopped_members]

    def etcd_leader(self) -> EtcdMember | None:
        """The member the answering members name leader (None during an election)."""
        statuses = {m.name: m.status(timeout=1.0) for m in self._answering()}
        ids = {s.leader for s in statuses.values() if s is not None and s.leader}
        for member in self._answering():
            status = statuses.get(member.name)
            if status is not None and status.header.member_id in ids:
                return member
        return None

    def etcd_follower(self, rng, leader: EtcdMember | None = None) -> EtcdMember:
        """A running, answering member other than the leader (drawn with `rng`)."""
        leader = leader or self.wait_etcd_leader()
        return rng.choice([m for m in self._answering() if m is not leader])

    def wait_etcd_leader(self, timeout: float = 30.0) -> EtcdMember:
        return wait_until(self.etcd_leader, timeout, interval=0.1,
                          message="an etcd leader among the answering members")

    def stop_member(self, member: EtcdMember) -> None:
        """SIGSTOP, and wait until every thread of it is stopped."""
        freeze(member.proc.pid)
        self.stopped_members.add(member.name)

    def resume_member(self, member: EtcdMember) -> None:
        if member.name in self.stopped_members:
            member.signal(signal.SIGCONT)
            self.stopped_members.discard(member.name)

    def partition_member(self, member: EtcdMember, timeout: float = 30.0) -> None:
        """Cut `member` from the other members (it runs, its clients still reach it), and wait
        until the cut shows: the others name a leader among themselves and `member` leads no
        longer (etcd's check-quorum). A cut that changed nothing would leave the fault's row
        judging a whole cluster."""
        assert self.etcd is not None
        self.etcd.partition(member)
        self.partitioned_members.add(member.name)
        others = [m for m in self.etcd.members if m is not member]

        def took() -> bool:
            cut = member.status(timeout=1.0)
            if cut is None or cut.leader == cut.header.member_id:
                return False
            statuses = [m.status(timeout=1.0) for m in others]
            if None in statuses:
                return False
            named = {status.leader for status in statuses}
            return len(named) == 1 and named <= {status.header.member_id for status in statuses}

        wait_until(took, timeout, interval=0.1,
                   message=f"{member.name} cut off: the others elect, it stops leading")

    def heal_member(self, member: EtcdMember) -> None:
        if member.name in self.partitioned_members:
            assert self.etcd is not None
            self.etcd.heal(member)
            self.partitioned_members.discard(member.name)

    def kill_member(self, member: EtcdMember) -> None:
        member.kill()   # SIGCONT first, so a stopped member dies too
        self.stopped_members.discard(member.name)

    def restart_member(self, member: EtcdMember) -> None:
        """Start a killed member again with its data and ports (it rejoins the cluster)."""
        assert self.etcd is not None
        if not member.running:
            self.etcd.restart_member(member)

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

    def master_grants(self) -> list[tuple[int, int]]:
        """(replica, epoch) of every BecomeMaster in every broker's log (restarts append)."""
        return [grant for replica in self.replicas if replica.process.log.exists()
                for grant in master_grants(replica.process.log.read_text(errors="replace"))]

    def store_master_ends(self) -> dict[tuple[int, int], int]:
        """(replica, epoch) -> the log end its store had when it became master of that epoch
        (its logs: restarts append)."""
        return {(replica.replica_id, epoch): end for replica in self.replicas
                if replica.process.log.exists()
                for epoch, end in store_master_ends(
                    replica.process.log.read_text(errors="replace")).items()}

    def controller_writes(self) -> list[tuple[int, int]]:
        """(revision, lease) of every write the name servers' logs record (restarts append)."""
        return [write for namesrv in self.namesrvs if namesrv.log.exists()
                for write in controller_writes(namesrv.log.read_text(errors="replace"))]

    def verdict_client(self):
        """A config client for the reads after the run (long histories: a long deadline)."""
        from tidemq.configclient.client import ConfigClient

        return ConfigClient(self.config_addrs, timeout=60.0)

    def lease_losses(self) -> int:
        """How many times a broker lost its live-key lease so far (its logs say so)."""
        return sum(replica.process.log.read_text(errors="replace").count("replica lease lost")
                   for replica in self.replicas if replica.process.log.exists())

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
        processes += [(f"config-center {c.addr}", c) for c in self.config_centers]
        for name, process in processes:
            running = process.proc is not None and process.proc.poll() is None
            tail = process.log.read_text(errors="replace").splitlines()[-lines:] \
                if process.log.exists() else []
            parts.append(f"--- {name} ({'running' if running else 'down'}), last log lines:")
            parts.extend(tail)
        parts.append(f"control plane: {self.control_plane_problem() or 'whole'}")
        for member in self.etcd.members if self.etcd is not None else ():
            state = ("stopped" if member.name in self.stopped_members
                     else "partitioned" if member.name in self.partitioned_members
                     else "running" if member.running else "down")
            tail = member.log.read_text(errors="replace").splitlines()[-8:] \
                if member.log.exists() else []
            parts.append(f"--- etcd {member.name} {member.addr} ({state}), last log lines:")
            parts.extend(tail)
        return "\n".join(parts)

    # -- faults ------------------------------------------------------------------------------
    def kill(self, replica: Replica) -> None:
        replica.process.kill()
        self.downs.append((time.monotonic(), replica.replica_id))

    def restart(self, replica: Replica) -> None:
        if replica.running:
            return
        try:
            replica.process.start(timeout=60)
        except RuntimeError as exc:   # it exited while starting (see `crashes`)
            if replica.running or replica.process.proc.returncode is None:
                raise
            self.crashes.append(f"replica-{replica.replica_id} exited with "
                                f"{replica.process.proc.returncode} while restarting: "
                                f"{str(exc).splitlines()[-1]} (log: {replica.process.log})")
            replica.process.start(timeout=60)

    def stop(self, replica: Replica) -> None:
        """A planned stop: SIGTERM, the broker drains and revokes its lease."""
        self.downs.append((time.monotonic(), replica.replica_id))   # it serves no more
        replica.process.stop()

    def wipe(self, replica: Replica) -> None:
        """Its disk replaced: the store deleted (a new store id at the next start). Only a
        replica that is down."""
        assert not replica.running, f"replica-{replica.replica_id} is running"
        shutil.rmtree(replica.store_dir, ignore_errors=True)

    def drop_tail(self, replica: Replica, length: int) -> int:
        """A power loss: the last `length` bytes of its active CommitLog segment never reached
        the disk (zeroed). Only a replica that is down. Returns the bytes dropped."""
        assert not replica.running, f"replica-{replica.replica_id} is running"
        return lose_tail(replica.commitlog_dir, written_end(replica.commitlog_dir), length)

    def wait_out_of_sync(self, replica: Replica, timeout: float = 30.0) -> None:
        """Until the recorded in-sync set no longer holds it (a stopped slave: the master
        shrinks the set after `replica_lag_max_ms` and writes go on without it)."""
        def out() -> bool:
            try:
                return replica.replica_id not in self.state().get("in_sync", ())
            except Exception:
                return False

        wait_until(out, timeout, interval=0.1,
                   message=f"replica-{replica.replica_id} out of the in-sync set")

    def incarnation(self, replica: Replica) -> str | None:
        """The incarnation its live key shows (None: no live key, or unreadable)."""
        try:
            return self.live().get(replica.replica_id, {}).get("incarnation")
        except Exception:
            return None

    def wait_new_incarnation(self, replica: Replica, old: str | None,
                             timeout: float = 30.0) -> str:
        """Until its live key shows an incarnation other than `old`: the controller has seen
        the restarted replica (what the faults that kill a master after a restart wait for,
        as an operator's sequence would)."""
        return wait_until(lambda: (found := self.incarnation(replica)) not in (None, old)
                          and found, timeout, interval=0.1,
                          message=f"replica-{replica.replica_id}'s new live key")

    def restart_all(self, replicas: list[Replica]) -> None:
        """`restart` of each, at the same time."""
        with ThreadPoolExecutor(max(1, len(replicas))) as pool:
            list(pool.map(self.restart, replicas))

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

    def cut_ha(self, replica: Replica) -> None:
        """Its slaves cut off its HA stream only (it keeps its lease and the controller): a
        replica that restarts empty cannot copy from it, as a disk replaced in production
        takes minutes to fill, not the milliseconds of loopback."""
        for proxy in replica.proxies:
            if proxy.name == "ha":
                proxy.cut()

    def undo_all(self) -> None:
        for member in self.etcd.members if self.etcd is not None else ():
            self.resume_member(member)
            self.heal_member(member)
            self.restart_member(member)
        for process in [*self.config_centers, *self.namesrvs, *self.kafka_gateways]:
            if process.proc is None or process.proc.poll() is not None:
                process.start(timeout=60)
        for replica in self.replicas:
            self.resume(replica)
            self.heal(replica)
            self.restart(replica)


def broker_args(replica_id: int, addrs: dict[str, str], ha_port: int,
                lease_ttl_s: float = LEASE_TTL_S) -> list[str]:
    """`addrs`: where this broker reaches "config0", "config1"..., "namesrv0", "namesrv1" and
    where its peers reach its HA endpoint ("ha"): a FaultProxy's address each."""
    def joined(prefix: str, separator: str) -> str:
        return separator.join(addr for name, addr in addrs.items() if name.startswith(prefix))

    return [
        "--cluster-name", "ChaosCluster", "--broker-name", GROUP,
        "--broker-id", str(replica_id),
        "--namesrv-addrs", joined("namesrv", ";"),
        "--config-center", joined("config", ","),
        *BROKER_TEST_FLAGS, *REPLICATION_TEST_FLAGS,
        "--broker-role", "SYNC_MASTER", "--min-in-sync-replicas", "2",
        "--broker-lease-ttl-s", f"{lease_ttl_s:g}", "--sync-replication-timeout-ms", "3000",
        "--replica-lag-max-ms", "3000", "--flush-mode", "sync",
        "--ha-port", str(ha_port), "--ha-advertised-addr", addrs["ha"], *COMPACTION_FLAGS,
    ]


def start_group(tmp_path: Path, stack: ExitStack, *,
                lease_ttl_s: float = LEASE_TTL_S) -> ChaosGroup:
    """The group, healthy: SYNC_FLUSH brokers (every acknowledged message durable on the
    master's disk too), each reaching the control plane and its peers through fault proxies."""
    # Members in network namespaces where they can be partitioned (faults.PARTITION_UNAVAILABLE
    # says why not): the partition_etcd_leader row needs it.
    etcd = EtcdCluster(Path(tmp_path), ETCD_MEMBERS, network=not PARTITION_UNAVAILABLE)
    stack.callback(etcd.kill)
    etcd.start()
    start = stack.enter_context(process_group(tmp_path))
    with ThreadPoolExecutor(CONFIG_CENTERS) as pool:   # Python start-up dominates
        config_centers = list(pool.map(
            lambda _: start("tidemq.configcenter", ["--etcd-endpoints", etcd.endpoints]),
            range(CONFIG_CENTERS)))
        config_addrs = ",".join(c.addr for c in config_centers)
        namesrvs = list(pool.map(
            lambda _: start("tidemq.nameserver", ["--config-center", config_addrs,
                                                  *CONTROLLER_TEST_FLAGS]), range(2)))
    group = ChaosGroup(config_centers, namesrvs, etcd=etcd)
    commands = []
    for replica_id in range(REPLICAS):
        ha_port = free_port()
        addrs = {**{f"config{i}": c.addr for i, c in enumerate(config_centers)},
                 **{f"namesrv{i}": n.addr for i, n in enumerate(namesrvs)},
                 "ha": f"127.0.0.1:{ha_port}"}
        proxies = {name: stack.enter_context(FaultProxy(addr, name))
                   for name, addr in addrs.items()}
        commands.append((list(proxies.values()), broker_args(
            replica_id, {name: proxy.addr for name, proxy in proxies.items()}, ha_port,
            lease_ttl_s)))
    with ThreadPoolExecutor(REPLICAS) as pool:
        processes = list(pool.map(lambda command: start("tidemq.broker", command[1]), commands))
    group.replicas.extend(Replica(replica_id, process, proxies) for replica_id, (process, (
        proxies, _)) in enumerate(zip(processes, commands, strict=True)))
    wait_until(lambda: group.healthy(in_sync=2), 60, interval=0.2,
               message=f"{GROUP} to have a master and 2 in-sync replicas")
    return group
