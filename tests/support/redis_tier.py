"""RedisTier: the config center's Redis as production runs it — a master, two replicas and
three Sentinels — as real processes on 127.0.0.1 (ephemeral ports, temp dirs), with faults.

Every Redis node sits behind its own FaultProxy and announces the proxy's address
(`replica-announce-ip/-port`): Sentinels monitor proxy addresses, replicas replicate through
the master's proxy, and a client that asks the Sentinels gets the master's proxy. So
`partition(node)` (cutting that node's proxy) isolates it from Sentinels, replicas and
clients at once, while the tier itself still inspects every node on its real port. A
partitioned *replica* keeps its own outgoing replication link (it dials the master's proxy,
not its own): Sentinels and clients lose it, but it goes on receiving the stream.

Every node runs `appendonly yes`, `appendfsync always`, `min-replicas-to-write 1` and a small
`min-replicas-max-lag`: a master cut off from its replicas stops taking writes (NOREPLICAS).
Nodes start as the deployment starts them, through `deploy/redis/tidemq-redis` (LaunchedNode):
their config file, written on the first start, is rewritten by Sentinel with each REPLICAOF
(CONFIG REWRITE), so a restarted node comes back in the role Sentinel last gave it; a master
restarted while the Sentinels still name it waits for their failover and starts as the new
master's replica. A master that is paused or partitioned (not restarted) is still master when
it returns, until Sentinel converts it (`+convert-to-slave`, ~2-3 s with the periods below).

>>> with redis_tier(tmp_path) as tier:
...     store = redisconn.connect(tier.url(), socket_timeout=1.0)
...     old = tier.master()
...     tier.kill(old)
...     new = tier.wait_for_new_master(old, timeout=15)
...     tier.restart(old)
...     tier.wait_healthy()          # the old master is a replica of `new` again
"""

from __future__ import annotations

import math
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.faultproxy import FaultProxy
from tests.support.processes import REDIS_SERVER, RedisServer, free_port, wait_until

LAUNCHER = Path(__file__).resolve().parent / "tidemq-redis"   # was deploy/redis/ (issue #35)

REDIS_SENTINEL = os.environ.get("TIDEMQ_TEST_REDIS_SENTINEL", "redis-sentinel")
MASTER_NAME = "tidemq"
_PROBE_TIMEOUT_S = 0.5   # a paused or dead process must not stall an inspection


def failover_wait_s(down_after_ms: int, failover_timeout_ms: int) -> int:
    """How long a node back before the Sentinels noticed its crash waits for their failover.

    They need down-after to see it down, and an election that splits its votes is retried only
    2 x failover-timeout after it began; one retried failover then takes up to failover-timeout.
    Waiting less starts the node as master again before the retry, the Sentinels see it up and
    never fail over, and the supervisor rather than Sentinel has decided who is master.
    (Moved here from deploy/redis_tier.py when the deployment's control plane became etcd.)
    """
    return math.ceil((down_after_ms + 3 * failover_timeout_ms) / 1000)


@dataclass
class SentinelServer(RedisServer):
    """One redis-sentinel; its config file is written on the first start and then belongs to
    Sentinel (it rewrites it with what it learns), so a restart resumes its view."""

    monitor: str = ""          # the address it first monitors the master at
    master_name: str = MASTER_NAME
    quorum: int = 2
    down_after_ms: int = 1000
    failover_timeout_ms: int = 3000

    def __post_init__(self) -> None:
        self.log = self.data_dir / "sentinel.log"
        self.config_file = self.data_dir / "sentinel.conf"

    def command(self) -> list[str]:
        assert self.config_file is not None
        if not self.config_file.exists():
            host, _, port = self.monitor.rpartition(":")
            name = self.master_name
            self.config_file.write_text("\n".join([
                f"dir {self.data_dir}",
                f"sentinel monitor {name} {host} {port} {self.quorum}",
                f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
                f"sentinel failover-timeout {name} {self.failover_timeout_ms}",
                f"sentinel parallel-syncs {name} 1",
                "",
            ]))
        return [REDIS_SENTINEL, str(self.config_file), "--port", str(self.port),
                "--bind", "127.0.0.1", "--logfile", str(self.log), *self.extra_args]


@dataclass
class LaunchedNode(RedisServer):
    """A Redis node started as the deployment starts it: through `deploy/redis/tidemq-redis`,
    which writes its config file from the directives on its first start only (Sentinel
    rewrites it later) and, before a restart, asks the Sentinels: a node they still name the
    master waits until they have promoted a replica and then starts as its replica, so a
    crashed master coming back mid-failover never takes writes the failover will discard."""

    directives: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    served: bool = field(default=False, init=False)

    def start(self, timeout: float = 15.0) -> LaunchedNode:
        super().start(timeout)
        self.served = True
        return self

    def _discard_failed_start(self) -> None:
        """The launcher writes the config file on the first start only, port included: a first
        start that found its port taken leaves a file naming that port, and every try after it
        would bind it again. Nothing else is in it yet, so it goes and the next try gets a new
        port. (A node that has served keeps its file, Sentinel's roles in it, and its port.)"""
        if not self.served:
            assert self.config_file is not None
            self.config_file.unlink(missing_ok=True)
            super()._discard_failed_start()

    def command(self) -> list[str]:
        assert self.config_file is not None
        return ["sh", str(LAUNCHER), REDIS_SERVER, str(self.config_file),
                "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
                "--logfile", str(self.log), *self.directives]

    def popen_env(self) -> dict[str, str] | None:
        return {**os.environ, **self.env}

    def output_file(self) -> Path:
        return self.data_dir / "launcher.log"   # what it decided at each start


@dataclass(eq=False)
class TierProcess:
    """A Redis node (behind `proxy`) or a Sentinel (`proxy` None) of the tier."""

    name: str
    server: RedisServer
    proxy: FaultProxy | None = None
    paused: bool = False

    @property
    def announced_port(self) -> int:
        """The port the rest of the tier knows this process by (its proxy's, for a node)."""
        return self.proxy.port if self.proxy else self.server.port

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.announced_port}"

    @property
    def running(self) -> bool:
        proc = self.server.proc
        return proc is not None and proc.poll() is None

    def direct(self, db: int = 0) -> redis.Redis:
        """A client on the real port (past the proxy): inspection works during a partition."""
        return redis.Redis(host="127.0.0.1", port=self.server.port, db=db,
                           decode_responses=True,
                           socket_timeout=_PROBE_TIMEOUT_S,
                           socket_connect_timeout=_PROBE_TIMEOUT_S)

    def __repr__(self) -> str:
        return f"{self.name}({self.addr})"


@dataclass
class RedisTier:
    base_dir: Path
    master_name: str = MASTER_NAME
    replicas: int = 2
    sentinel_count: int = 3
    quorum: int = 2
    down_after_ms: int = 1000
    failover_timeout_ms: int = 3000
    min_replicas_max_lag_s: int = 2
    # Sentinel's internal periods (SENTINEL DEBUG; not kept across its restarts, so set after
    # each start). Sentinel pings every min(ping-period, down-after): with a 1 s down-after and
    # its own 1 s ping period, a link it has just opened (to a master it has just switched to)
    # looks down before its first PING is even sent, and it fails over a second time; 200 ms
    # pings (and asks) keep a small down-after meaningful. Its own info/publish periods
    # (10000/2000) convert a returning old master ~10-20 s after it is back; these make that
    # ~2-3 s. Pass {} for Sentinel's own periods (then keep down-after well above 1 s).
    sentinel_periods_ms: dict[str, int] = field(default_factory=lambda: {
        "ping-period": 200, "ask-period": 200, "info-period": 1000, "publish-period": 500})
    nodes: list[TierProcess] = field(default_factory=list)
    sentinels: list[TierProcess] = field(default_factory=list)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> RedisTier:
        try:
            self._start_nodes()
            self._start_sentinels()
            self.wait_healthy(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _start_nodes(self) -> None:
        sentinel_ports = [free_port() for _ in range(self.sentinel_count)]
        self._sentinel_ports = sentinel_ports
        for index in range(1 + self.replicas):
            port = free_port()
            proxy = FaultProxy(f"127.0.0.1:{port}", f"redis-{index}").start()
            data_dir = self.base_dir / f"redis-{index}"
            directives = self._node_args(proxy.port)
            if index:
                directives += ["--replicaof", "127.0.0.1", str(self.nodes[0].announced_port)]
            server = LaunchedNode(data_dir, port, config_file=data_dir / "redis.conf",
                                  directives=directives, env={
                                      "TIDEMQ_SENTINELS": ",".join(
                                          f"127.0.0.1:{p}" for p in sentinel_ports),
                                      "TIDEMQ_SENTINEL_MASTER": self.master_name,
                                      "TIDEMQ_REDIS_ADDRESS": f"127.0.0.1 {proxy.port}",
                                      "TIDEMQ_FAILOVER_WAIT_S": str(failover_wait_s(
                                          self.down_after_ms, self.failover_timeout_ms))})
            self.nodes.append(TierProcess(f"redis-{index}", server, proxy))
            self._start(self.nodes[-1])

    def _node_args(self, proxy_port: int) -> list[str]:
        return ["--appendonly", "yes", "--appendfsync", "always",
                "--min-replicas-to-write", "1",
                "--min-replicas-max-lag", str(self.min_replicas_max_lag_s),
                "--replica-announce-ip", "127.0.0.1",
                "--replica-announce-port", str(proxy_port),
                # a full sync starts at once (Redis waits 5 s for more replicas to share it)
                "--repl-diskless-sync-delay", "0"]

    def _start_sentinels(self) -> None:
        monitor = self.nodes[0].addr
        for index, port in enumerate(self._sentinel_ports):
            server = SentinelServer(
                self.base_dir / f"sentinel-{index}", port, monitor=monitor,
                master_name=self.master_name, quorum=self.quorum,
                down_after_ms=self.down_after_ms, failover_timeout_ms=self.failover_timeout_ms)
            sentinel = TierProcess(f"sentinel-{index}", server)
            self.sentinels.append(sentinel)
            self._start(sentinel)

    def _start(self, process: TierProcess) -> None:
        process.server.start()
        if process.proxy is not None:   # start() moves to another port if its was taken
            process.proxy.target = ("127.0.0.1", process.server.port)
        elif self.sentinel_periods_ms:
            settings = [item for pair in self.sentinel_periods_ms.items() for item in pair]
            process.direct().execute_command("SENTINEL", "DEBUG", *settings)

    def close(self) -> None:
        """Kill every process (resuming paused ones first) and close every proxy."""
        for process in [*self.sentinels, *self.nodes]:
            self.resume(process)
            process.server.kill()
        for node in self.nodes:
            if node.proxy is not None:
                node.proxy.close()

    def __enter__(self) -> RedisTier:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- addresses ---------------------------------------------------------------------------
    def url(self, db: int = 0) -> str:
        """`redis+sentinel://` naming every Sentinel (see tidemq.common.redisconn)."""
        sentinels = ",".join(s.addr for s in self.sentinels)
        return f"redis+sentinel://{sentinels}/{self.master_name}/{db}"

    def node_at(self, port: int) -> TierProcess | None:
        return next((n for n in self.nodes if n.announced_port == port), None)

    # -- what the Sentinels say --------------------------------------------------------------
    def reported_masters(self) -> dict[str, str | None]:
        """Each running Sentinel's answer to get-master-addr-by-name ("host:port", None if it
        did not answer)."""
        answers: dict[str, str | None] = {}
        for sentinel in self.sentinels:
            if not sentinel.running or sentinel.paused:
                continue
            try:
                found = sentinel.direct().sentinel_get_master_addr_by_name(self.master_name)
            except redis.RedisError:
                found = None
            answers[sentinel.name] = f"{found[0]}:{found[1]}" if found else None
        return answers

    def master(self) -> TierProcess | None:
        """The node most of the answering Sentinels name as master (None if none answers or
        they name an address that is no node's proxy)."""
        named = Counter(a for a in self.reported_masters().values() if a)
        if not named:
            return None
        addr = named.most_common(1)[0][0]
        return self.node_at(int(addr.rpartition(":")[2]))

    def role(self, node: TierProcess) -> dict:
        """The node's own INFO replication, read on its real port ({} if it does not answer)."""
        if not node.running or node.paused:
            return {}
        try:
            return node.direct().info("replication")
        except redis.RedisError:
            return {}

    def masters_by_role(self) -> list[TierProcess]:
        """The running nodes that say they are masters (more than one: a split brain the
        Sentinels have not repaired yet)."""
        return [n for n in self.nodes if self.role(n).get("role") == "master"]

    def wait_for_new_master(self, old: TierProcess | None, timeout: float = 20.0) -> TierProcess:
        """Poll until every answering Sentinel names one node other than `old` and that node
        says it is a master."""
        def promoted() -> TierProcess | None:
            answers = [a for a in self.reported_masters().values()]
            if not answers or None in answers or len(set(answers)) != 1:
                return None
            node = self.node_at(int(answers[0].rpartition(":")[2]))
            if node is None or node is old or self.role(node).get("role") != "master":
                return None
            return node

        try:
            return wait_until(promoted, timeout, interval=0.05,
                              message=f"the Sentinels to promote a replica other than {old}")
        except TimeoutError as exc:
            logs = [(f"{s.name} logged", s.server.log) for s in self.sentinels]
            if old is not None:
                logs.insert(0, (f"{old.name}'s launcher said", old.server.output_file()))
            raise TimeoutError(f"{exc}; they say {self.reported_masters()}" + "".join(
                f"\n{title}:\n" + "\n".join(_tail_lines(path, 20)) for title, path in logs
                if path is not None)) from None

    def health_problem(self) -> str | None:
        """None when the tier is healthy — every Sentinel running and naming one master, that
        master with every other node as an online replica through its proxy, and every
        Sentinel seeing the replicas and the other Sentinels up — else what is missing."""
        answers = self.reported_masters()
        if len(answers) != len(self.sentinels) or len(set(answers.values())) != 1 \
                or None in answers.values():
            return f"Sentinels disagree or are down: {answers}"
        master = self.master()
        if master is None:
            return f"Sentinels name no node of the tier: {answers}"
        info = self.role(master)
        if info.get("role") != "master" or info.get("connected_slaves") != self.replicas:
            return f"{master} is not a master with {self.replicas} replicas: {info}"
        for node in self.nodes:
            if node is master:
                continue
            info = self.role(node)
            if (info.get("role"), info.get("master_port"), info.get("master_link_status")) \
                    != ("slave", master.announced_port, "up"):
                return f"{node} is not an up-to-date replica of {master}: {info}"
        return self._sentinel_view_problem(master)

    def _sentinel_view_problem(self, master: TierProcess) -> str | None:
        for sentinel in self.sentinels:
            try:
                client = sentinel.direct()
                state = client.sentinel_master(self.master_name)
                replicas = client.sentinel_slaves(self.master_name)
            except redis.RedisError as exc:
                return f"{sentinel} does not answer: {exc}"
            if not state.get("is_master") or state.get("is_sdown") or state.get("is_odown") \
                    or state.get("num-other-sentinels") != len(self.sentinels) - 1:
                return f"{sentinel} sees the master as {state}"
            up = {r["port"] for r in replicas
                  if not (r.get("is_sdown") or r.get("is_disconnected"))}
            wanted = {n.announced_port for n in self.nodes if n is not master}
            if not wanted <= up:
                return f"{sentinel} does not see replicas {sorted(wanted - up)} up: {replicas}"
        return None

    def wait_healthy(self, timeout: float = 30.0) -> TierProcess:
        """Poll until `health_problem()` is None; the master."""
        problem: list[str | None] = [None]

        def healthy() -> bool:
            problem[0] = self.health_problem()
            return problem[0] is None

        try:
            wait_until(healthy, timeout, interval=0.1, message="a healthy Redis tier")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {problem[0]}") from None
        master = self.master()
        assert master is not None
        return master

    # -- faults (on a node or a Sentinel) ----------------------------------------------------
    def kill(self, process: TierProcess) -> None:
        """SIGKILL (a paused process too)."""
        process.server.kill()
        process.paused = False

    def restart(self, process: TierProcess) -> None:
        """Start again (killing it first if it runs): same port, same data dir, same config
        file (as Sentinel last rewrote it)."""
        self.resume(process)
        process.server.kill()
        self._start(process)

    def pause(self, process: TierProcess) -> None:
        """SIGSTOP: the process holds its sockets but answers nothing."""
        if process.running and not process.paused:
            os.kill(process.server.proc.pid, signal.SIGSTOP)
            process.paused = True

    def resume(self, process: TierProcess) -> None:
        if process.paused:
            if process.running:
                os.kill(process.server.proc.pid, signal.SIGCONT)
            process.paused = False

    def partition(self, node: TierProcess) -> None:
        """Black-hole the node's proxy: Sentinels, replicas and clients lose it (silence)."""
        if node.proxy is None:
            raise ValueError(f"{node} has no proxy to cut (Sentinels are not proxied)")
        node.proxy.cut()

    def heal(self, node: TierProcess) -> None:
        if node.proxy is not None:
            node.proxy.heal()

    def undo_all(self) -> None:
        """Resume, heal and restart whatever a fault left stopped, cut or dead."""
        for process in [*self.nodes, *self.sentinels]:
            self.resume(process)
            self.heal(process)
            if not process.running:
                self._start(process)

    def explain(self, lines: int = 15) -> str:
        """What each process says about itself and its last log lines (for failures)."""
        parts = [f"sentinels say: {self.reported_masters()}"]
        for node in self.nodes:
            parts.append(f"--- {node}{' (paused)' if node.paused else ''}"
                         f"{' (cut)' if node.proxy and node.proxy.is_cut else ''}: "
                         f"{self.role(node) or 'no answer'}")
            parts.extend(_tail_lines(node.server.log, lines))
        for sentinel in self.sentinels:
            parts.append(f"--- {sentinel}{' (paused)' if sentinel.paused else ''}"
                         f"{'' if sentinel.running else ' (down)'}")
            parts.extend(_tail_lines(sentinel.server.log, lines))
        return "\n".join(parts)


def _tail_lines(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ["(no log)"]


@contextmanager
def redis_tier(base_dir: Path, **options) -> Iterator[RedisTier]:
    """A healthy tier under `base_dir`, always torn down (every process killed, paused ones
    resumed first, proxies closed). `options`: RedisTier's timings and sizes."""
    tier = RedisTier(Path(base_dir), **options)
    with tier:
        yield tier
