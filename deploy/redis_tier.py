"""The control plane's Redis tier: how its nodes and Sentinels run, and what `make status` says
about them.

Under Sentinel (the default topology) every node and Sentinel starts through
`deploy/redis/tidemq-redis` (the redis image's entrypoint; `sh` runs it for `make up`) with the
directives of its own config file; the launcher writes that file into the data directory only
when it is missing, because Sentinel rewrites it with what it learns and a restart must keep
that. A single Redis (`make up REDIS=single`) runs as `redis-server` with flags, as before.
"""

from __future__ import annotations

import dataclasses
import math

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from deploy.topology import REPO_ROOT, Placement, Service, Topology

LAUNCHER = REPO_ROOT / "deploy" / "redis" / "tidemq-redis"
NODE_CONFIG = "redis.conf"
SENTINEL_CONFIG = "sentinel.conf"


def argv(service: Service, topology: Topology, placement: Placement, *, data_dir: str,
         programs: dict[str, str] | None = None) -> list[str]:
    """The command line of a Redis node or a Sentinel. `programs` maps redis-server /
    redis-sentinel to the executables (`make up` finds them on the PATH)."""
    program = "redis-sentinel" if service.is_sentinel else "redis-server"
    executable = (programs or {}).get(program, program)
    bind = "0.0.0.0" if placement.compose else "127.0.0.1"
    common = ["--bind", bind, "--port", str(placement.port(service, service.main_port)),
              "--dir", data_dir, "--protected-mode", "no"]
    if service.is_sentinel:
        directives = common + _sentinel_directives(service, topology, placement)
        config = SENTINEL_CONFIG
    else:
        directives = common + ["--appendonly", "yes", "--appendfsync", "always"]
        if not topology.control_plane.replicated:
            return [executable, *directives]
        directives += _node_directives(service, topology, placement)
        config = NODE_CONFIG
    launcher = [] if placement.compose else ["sh", str(LAUNCHER)]  # compose: the ENTRYPOINT
    return [*launcher, executable, f"{data_dir}/{config}", *directives]


def _node_directives(service: Service, topology: Topology, placement: Placement) -> list[str]:
    """Every node may become master: all of them refuse writes no replica follows."""
    plane = topology.control_plane
    directives = [
        "--min-replicas-to-write", str(plane.min_replicas_to_write),
        "--min-replicas-max-lag", str(plane.min_replicas_max_lag),
        # a replica's first sync starts at once (Redis waits 5 s for more replicas by default,
        # and until one has synced the master takes no writes)
        "--repl-diskless-sync-delay", "0",
    ]  # fmt: skip
    if placement.compose:  # the Sentinels and the other nodes reach it by service name
        directives += ["--replica-announce-ip", service.name]
    if service.replica_of:
        master = topology.services[service.replica_of]
        directives += ["--replicaof", placement.host(master),
                       str(placement.port(master, master.main_port))]
    return directives


def _sentinel_directives(service: Service, topology: Topology,
                         placement: Placement) -> list[str]:
    plane = topology.control_plane
    name = plane.sentinel_master
    master = topology.redis_master()
    directives = []
    if placement.compose:  # nodes and Sentinels are known by service name, not container IP
        directives += ["--sentinel", "resolve-hostnames", "yes",
                       "--sentinel", "announce-hostnames", "yes",
                       "--sentinel", "announce-ip", service.name]
    return directives + [
        "--sentinel", "monitor", name, placement.host(master),
        str(placement.port(master, master.main_port)), str(plane.quorum),
        "--sentinel", "down-after-milliseconds", name, str(plane.down_after_milliseconds),
        "--sentinel", "failover-timeout", name, str(plane.failover_timeout),
        "--sentinel", "parallel-syncs", name, str(plane.parallel_syncs),
    ]  # fmt: skip


def launcher_env(service: Service, topology: Topology, placement: Placement) -> dict[str, str]:
    """What the launcher of a node under Sentinel needs to ask them where the master is."""
    if not (service.is_redis and topology.control_plane.replicated):
        return {}
    plane = topology.control_plane
    return {
        "TIDEMQ_SENTINELS": ",".join(placement.addr(s) for s in topology.sentinels()),
        "TIDEMQ_SENTINEL_MASTER": plane.sentinel_master,
        "TIDEMQ_REDIS_ADDRESS": f"{placement.host(service)} "
                                f"{placement.port(service, service.main_port)}",
        "TIDEMQ_FAILOVER_WAIT_S": str(failover_wait_s(plane.down_after_milliseconds,
                                                      plane.failover_timeout)),
    }


def failover_wait_s(down_after_ms: int, failover_timeout_ms: int) -> int:
    """How long a node back before the Sentinels noticed its crash waits for their failover.

    They need down-after to see it down, and an election that splits its votes is retried only
    2 x failover-timeout after it began; one retried failover then takes up to failover-timeout.
    Waiting less starts the node as master again before the retry, the Sentinels see it up and
    never fail over, and the supervisor rather than Sentinel has decided who is master.
    """
    return math.ceil((down_after_ms + 3 * failover_timeout_ms) / 1000)


# --- make status -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodeState:
    """One Redis node as it answers `INFO replication`; role "down" when it does not."""

    name: str
    addr: str
    role: str  # master | replica | down
    error: str = ""
    offset: int = 0  # its replication offset
    replicas: int = 0  # a master: replicas connected
    master: str = ""  # a replica: its master (service name, else host:port)
    lag: int | None = None  # a replica: bytes behind its master (None: master not answering)
    link: str = ""  # a replica: master_link_status


@dataclasses.dataclass(frozen=True)
class SentinelState:
    name: str
    addr: str
    master: str | None  # the master it names (service name, else host:port); None: unknown
    error: str = ""  # it did not answer


def observe(topology: Topology, placement: Placement, timeout: float = 1.0
            ) -> tuple[list[NodeState], list[SentinelState]]:
    """Every Redis node's role and lag, and the master each Sentinel names (redis-py, through
    `placement`'s addresses: 127.0.0.1 and the local or published ports)."""
    # nodes and Sentinels name a node by its address in the deployment: 127.0.0.1:port
    # locally, service:port inside compose
    names = {where.addr(node): node.name for node in topology.redis_nodes()
             for where in (placement, Placement(compose=True))}
    infos: dict[str, dict | str] = {}
    for node in topology.redis_nodes():
        try:
            with _client(placement, node, timeout) as client:
                infos[node.name] = client.info("replication")
        except redis.RedisError as exc:
            infos[node.name] = str(exc) or type(exc).__name__
    offsets = {name: info["master_repl_offset"] for name, info in infos.items()
               if isinstance(info, dict) and info["role"] == "master"}
    nodes = []
    for node in topology.redis_nodes():
        info, addr = infos[node.name], placement.addr(node)
        if isinstance(info, str):
            nodes.append(NodeState(node.name, addr, "down", error=info))
        elif info["role"] == "master":
            nodes.append(NodeState(node.name, addr, "master", offset=info["master_repl_offset"],
                                   replicas=info["connected_slaves"]))
        else:
            master_addr = f"{info['master_host']}:{info['master_port']}"
            master = names.get(master_addr, master_addr)
            offset = info["slave_repl_offset"]
            nodes.append(NodeState(
                node.name, addr, "replica", offset=offset, master=master,
                # (the master answered first: a write since then puts the replica ahead)
                lag=max(0, offsets[master] - offset) if master in offsets else None,
                link=info["master_link_status"]))
    sentinels = []
    for sentinel in topology.sentinels():
        addr = placement.addr(sentinel)
        try:
            with _client(placement, sentinel, timeout) as client:
                answer = client.sentinel_get_master_addr_by_name(
                    topology.control_plane.sentinel_master)
        except redis.RedisError as exc:
            sentinels.append(SentinelState(sentinel.name, addr, None,
                                           error=str(exc) or type(exc).__name__))
            continue
        named = f"{answer[0]}:{answer[1]}" if answer else None
        sentinels.append(SentinelState(sentinel.name, addr, names.get(named, named)))
    return nodes, sentinels


def status_lines(topology: Topology, placement: Placement, timeout: float = 1.0) -> list[str]:
    """What `make status` prints about the Redis tier; a node that does not answer is DOWN."""
    nodes, sentinels = observe(topology, placement, timeout)
    lines = ["Redis nodes:"] if nodes else []
    for node in nodes:
        where = f"  {node.name:<16} {node.addr:<16}"
        if node.role == "down":
            lines.append(f"{where} DOWN     {node.error}")
        elif node.role == "master":
            lines.append(f"{where} master   offset {node.offset}, "
                         f"{node.replicas} replica(s) connected")
        else:
            lag = "master not answering" if node.lag is None else f"{node.lag} bytes behind"
            lines.append(f"{where} replica  of {node.master}, {lag} (link {node.link})")
    if sentinels:
        lines.append(f"Sentinels (master {topology.control_plane.sentinel_master!r}):")
    for sentinel in sentinels:
        where = f"  {sentinel.name:<16} {sentinel.addr:<16}"
        if sentinel.error:
            lines.append(f"{where} DOWN     {sentinel.error}")
        elif sentinel.master is None:
            lines.append(f"{where} knows no such master")
        else:
            lines.append(f"{where} says the master is {sentinel.master}")
    return lines


def _client(placement: Placement, service: Service, timeout: float) -> redis.Redis:
    # no retries: redis-py's default backoff would spend seconds on each node that is down
    return redis.Redis(host="127.0.0.1", port=placement.port(service, service.main_port),
                       socket_timeout=timeout, socket_connect_timeout=timeout,
                       retry=Retry(NoBackoff(), 0), decode_responses=True)
