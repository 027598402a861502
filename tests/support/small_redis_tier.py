"""A small replicated Redis for tests and benchmarks of the control plane: one master, some
replicas (`--replicaof`) and optionally one Sentinel, each a real process on an ephemeral port
in its own folder. Ready means observed: every replica's link to the master is up, and the
Sentinel answers and lists every replica.

The Sentinel's quorum defaults to 2 with one Sentinel, so it flags a dead master s_down but
never reaches o_down and never fails over: what it reports stays still while a test looks.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.processes import RedisServer, free_port, wait_until

REDIS_SENTINEL = os.environ.get("TIDEMQ_TEST_REDIS_SENTINEL", "redis-sentinel")
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


@dataclass
class SentinelServer:
    data_dir: Path
    master_port: int
    quorum: int = 2
    port: int = 0
    proc: subprocess.Popen | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.data_dir / "sentinel.log"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, replicas: int) -> SentinelServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        conf = self.data_dir / "sentinel.conf"   # Sentinel rewrites it: its own copy
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.data_dir}\nlogfile {self.log}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} {self.quorum}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n")
        self.proc = subprocess.Popen([REDIS_SENTINEL, str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        wait_until(lambda: self._knows(replicas), 30,
                   message=f"redis-sentinel on {self.port} to list {replicas} replica(s)")
        return self

    def _knows(self, replicas: int) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"redis-sentinel exited with {self.proc.returncode}: see "
                               f"{self.log}")
        try:
            return len(_client(self.port).sentinel_slaves(MASTER_NAME)) >= replicas
        except redis.RedisError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)


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
            tier.sentinel = SentinelServer(folder / "sentinel", tier.master.port, quorum)
            tier.sentinel.start(replicas)
        yield tier
    finally:
        tier.kill()
