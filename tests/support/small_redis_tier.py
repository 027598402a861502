"""A small replicated Redis for tests and benchmarks of the control plane: one master, some
replicas (`--replicaof`) and optionally one Sentinel, each a real process on an ephemeral port
in its own folder. Ready means observed: every replica's link to the master is up, and the
Sentinel answers and lists every replica.

The Sentinel's quorum defaults to 2 with one Sentinel, so it flags a dead master s_down but
never reaches o_down and never fails over: what it reports stays still while a test looks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.support.processes import RedisServer, wait_until
from tests.support.redis_tier import SentinelServer

MASTER_NAME = "tidemq-cc"
DOWN_AFTER_MS = 1000


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1,
                       decode_responses=True)


def link_up(replica: RedisServer) -> bool:
    try:
        return _client(replica.port).info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False


def _knows(sentinel: SentinelServer, replicas: int) -> bool:
    try:
        return len(_client(sentinel.port).sentinel_slaves(MASTER_NAME)) >= replicas
    except redis.RedisError:
        return False


@dataclass
class SmallTier:
    master: RedisServer
    replicas: list[RedisServer]
    sentinel: SentinelServer | None

    def sentinel_url(self, db: int = 0) -> str:
        assert self.sentinel is not None, "this tier has no Sentinel"
        return f"redis+sentinel://{self.sentinel.addr}/{MASTER_NAME}/{db}"

    def kill(self) -> None:
        if self.sentinel is not None:
            self.sentinel.kill()
        for server in (*self.replicas, self.master):
            server.kill()


@contextmanager
def small_tier(folder: Path, *, replicas: int = 1, sentinel: bool = True,
               quorum: int = 2) -> Iterator[SmallTier]:
    """A master with `replicas` replicas (links up) and, with `sentinel`, one Sentinel that
    knows them all; every process is killed on exit."""
    folder = Path(folder)
    # Redis waits 5 s by default before a diskless full sync, for more replicas to join it
    tier = SmallTier(RedisServer(folder / "master",
                                 extra_args=["--repl-diskless-sync-delay", "0"]), [], None)
    try:
        tier.master.start()
        for index in range(replicas):
            replica = RedisServer(folder / f"replica-{index}", extra_args=[
                "--replicaof", "127.0.0.1", str(tier.master.port)])
            tier.replicas.append(replica.start())
        for replica in tier.replicas:
            wait_until(lambda r=replica: link_up(r), 30,
                       message=f"replica on {replica.port} to sync from the master")
        if sentinel:
            tier.sentinel = SentinelServer(folder / "sentinel", monitor=tier.master.addr,
                                           master_name=MASTER_NAME, quorum=quorum,
                                           down_after_ms=DOWN_AFTER_MS).start()
            wait_until(lambda: _knows(tier.sentinel, replicas), 30,
                       message=f"the Sentinel to list {replicas} replica(s)")
        yield tier
    finally:
        tier.kill()
