"""How the Redis tier behind the config center looks right now, for operators.

For a Sentinel target (`redis+sentinel://...`) every Sentinel named in the URL is asked
`SENTINEL MASTER`, `SENTINEL REPLICAS` and `SENTINEL SENTINELS` for the master name; every
node any of them (or the master's own `INFO replication`) names is then asked
`INFO replication` itself. For a plain `redis://` URL there is the one node.

Everything is read with short timeouts, all Sentinels at once and then all nodes at once, so
a description takes about two timeouts however many peers are down. A node or Sentinel that
does not answer is reported unreachable with the reason; `describe` itself never raises for
one. Lag is measured against the master the replica names, in replication-stream bytes
(the master's `master_repl_offset` minus the replica's `slave_repl_offset`; both are read a
moment apart, so a busy tier shows a few bytes of lag that are only that moment).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from tidemq.common.redisconn import RedisTarget

DEFAULT_TIMEOUT_S = 0.5   # per Sentinel or node: a probe, not a store call
MASTER, REPLICA = "master", "replica"
DOWN_FLAGS = frozenset({"s_down", "o_down"})
T = TypeVar("T")


def _once() -> Retry:
    """No retries: a probe that fails says so at once (redis-py retries with backoff by
    default, seconds for a Sentinel that is down)."""
    return Retry(NoBackoff(), 0)


@dataclass(frozen=True)
class RedisNode:
    address: str
    role: str = ""                 # MASTER or REPLICA as the node itself says; "" = unknown
    reachable: bool = False
    error: str = ""
    replication_offset: int = 0
    lag_bytes: int | None = None   # replicas only; None = unknown (its master did not answer)
    link_status: str = ""          # replicas: master_link_status
    master_address: str = ""       # replicas: the master they follow
    connected_replicas: int = 0


@dataclass(frozen=True)
class SentinelView:
    address: str
    reachable: bool = False
    error: str = ""
    master_address: str = ""
    master_down: bool = False
    master_flags: str = ""
    other_sentinels: int = 0
    quorum: int = 0
    replicas: tuple[str, ...] = field(default=(), compare=False)  # what it knows, for nodes


@dataclass(frozen=True)
class StoreTopology:
    target: str                    # RedisTarget.describe(): no password
    replicated: bool
    master_name: str = ""
    nodes: tuple[RedisNode, ...] = ()
    sentinels: tuple[SentinelView, ...] = ()


def addr(host: str, port: int | str) -> str:
    return f"{host}:{port}"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class TopologyReader:
    """Describes one RedisTarget on demand (`describe()`); holds no connection between calls."""

    def __init__(self, target: RedisTarget, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.target = target
        self.timeout_s = timeout_s

    def describe(self) -> StoreTopology:
        if not self.target.replicated:
            return StoreTopology(self.target.describe(), False,
                                 nodes=(self._plain_node(),))
        sentinels = _each([addr(h, p) for h, p in self.target.sentinels], self._ask_sentinel)
        masters = [s.master_address for s in sentinels if s.master_address]
        # The master most Sentinels name (ties: the first Sentinel's), then every replica any
        # of them knows.
        master = max(masters, key=masters.count) if masters else ""
        known = [master] if master else []
        for sentinel in sentinels:
            known += [r for r in sentinel.replicas if r not in known]
        nodes = _each(known, self._ask_node)
        master_info = next((n for n in nodes if n.address == master and n.reachable), None)
        listed = self._replicas_listed_by(master) if master_info else []
        extra = _each([r for r in listed if r not in known], self._ask_node)
        return StoreTopology(self.target.describe(), True, self.target.master_name,
                             _with_lag([*nodes, *extra]), tuple(sentinels))

    # -- Sentinels -----------------------------------------------------------------------

    def _ask_sentinel(self, address: str) -> SentinelView:
        host, port = _split(address)
        client = redis.Redis(host=host, port=port, socket_timeout=self.timeout_s,
                             socket_connect_timeout=self.timeout_s, decode_responses=True,
                             retry=_once())
        name = self.target.master_name
        try:
            master = client.sentinel_master(name)
            replicas = client.sentinel_slaves(name)
            others = client.sentinel_sentinels(name)
        except (redis.RedisError, OSError) as exc:
            return SentinelView(address, reachable=isinstance(exc, redis.ResponseError),
                                error=_sentinel_error(exc, name))
        finally:
            client.close()
        flags = master.get("flags", "")
        flags = flags if isinstance(flags, str) else ",".join(sorted(flags))
        return SentinelView(
            address, reachable=True, master_address=addr(master["ip"], master["port"]),
            master_down=bool(DOWN_FLAGS & set(flags.split(","))), master_flags=flags,
            other_sentinels=int(master.get("num-other-sentinels", len(others))),
            quorum=int(master.get("quorum", 0)),
            replicas=tuple(addr(r["ip"], r["port"]) for r in replicas))

    # -- nodes ---------------------------------------------------------------------------

    def _client(self, address: str) -> redis.Redis:
        host, port = _split(address)
        return redis.Redis(host=host, port=port, password=self.target.password,
                           socket_timeout=self.timeout_s,
                           socket_connect_timeout=self.timeout_s, retry=_once())

    def _plain_node(self) -> RedisNode:
        client = redis.Redis.from_url(self.target.url, socket_timeout=self.timeout_s,
                                      socket_connect_timeout=self.timeout_s, retry=_once())
        kwargs = client.connection_pool.connection_kwargs
        address = (kwargs.get("path") if "path" in kwargs
                   else addr(kwargs.get("host", "127.0.0.1"), kwargs.get("port", 6379)))
        return _with_lag([self._read_node(address, client)])[0]

    def _ask_node(self, address: str) -> RedisNode:
        return self._read_node(address, self._client(address))

    def _read_node(self, address: str, client: redis.Redis) -> RedisNode:
        try:
            info = client.info("replication")
        except (redis.RedisError, OSError) as exc:
            return RedisNode(address, error=_reason(exc))
        finally:
            client.close()
        if info.get("role") == "master":
            return RedisNode(address, MASTER, True,
                             replication_offset=int(info.get("master_repl_offset", 0)),
                             connected_replicas=int(info.get("connected_slaves", 0)))
        return RedisNode(address, REPLICA, True,
                         replication_offset=int(info.get("slave_repl_offset", 0)),
                         link_status=str(info.get("master_link_status", "")),
                         master_address=addr(info.get("master_host", ""),
                                             info.get("master_port", "")))

    def _replicas_listed_by(self, master: str) -> list[str]:
        """Replicas connected to `master` now (its INFO `slaveN` lines): a replica the
        Sentinels have not discovered yet still shows."""
        client = self._client(master)
        try:
            info = client.info("replication")
        except (redis.RedisError, OSError):
            return []
        finally:
            client.close()
        return [addr(value["ip"], value["port"]) for key, value in info.items()
                if key.startswith("slave") and isinstance(value, dict) and "ip" in value]


def _sentinel_error(exc: Exception, master_name: str) -> str:
    if isinstance(exc, redis.ResponseError):
        return f"answers, but monitors no master named {master_name!r} ({exc})"
    return _reason(exc)


def _with_lag(nodes: list[RedisNode]) -> tuple[RedisNode, ...]:
    """Each replica with its lag behind the master it names; masters first."""
    offsets = {n.address: n.replication_offset for n in nodes if n.role == MASTER}
    with_lag = [replace(n, lag_bytes=max(offsets[n.master_address] - n.replication_offset, 0))
                if n.role == REPLICA and n.master_address in offsets else n for n in nodes]
    return tuple(sorted(with_lag, key=lambda n: n.role != MASTER))


def _each(addresses: list[str], ask: Callable[[str], T]) -> list[T]:
    """`ask(address)` for every address at once, in the given order."""
    if len(addresses) <= 1:
        return [ask(a) for a in addresses]
    with ThreadPoolExecutor(len(addresses), thread_name_prefix="topology") as pool:
        return list(pool.map(ask, addresses))

