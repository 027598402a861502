"""Start real TideMQ processes and a real Redis for tests: ephemeral ports, temp dirs, no sleeps.

The Redis is the gateways' (shared circuit-breaker state and rate limits) and the peer some
benchmarks measure against; the config center's store is etcd (tests/support/etcd.py).

Readiness is observed, never assumed: services write a ready file once serving (see
tidemq.common.server), Redis answers INFO with its own process id; both are polled with a
deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

REDIS_SERVER = os.environ.get("TIDEMQ_TEST_REDIS_SERVER", "redis-server")
_counter = itertools.count()


def _check(predicate: Callable[[], object], deadline: float, timeout: float,
           message: str) -> object:
    """One poll: the predicate's value, or TimeoutError naming `message` past the deadline."""
    value = predicate()
    if not value and time.monotonic() > deadline:
        raise TimeoutError(f"timed out after {timeout:g} s waiting for {message}")
    return value


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.02,
               message: str = "condition") -> object:
    """Poll `predicate` until it returns a truthy value; fail with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    while not (value := _check(predicate, deadline, timeout, message)):
        time.sleep(interval)
    return value


async def wait_until_async(predicate: Callable[[], object], timeout: float = 30.0,
                           interval: float = 0.001, message: str = "condition") -> object:
    """`wait_until` for a coroutine: polls without blocking its event loop."""
    deadline = time.monotonic() + timeout
    while not (value := _check(predicate, deadline, timeout, message)):
        await asyncio.sleep(interval)
    return value


def freeze(pid: int, timeout: float = 10.0, *, group: bool = False) -> None:
    """SIGSTOP `pid` (`group`: every process of the process group `pid` leads) and wait until
    every thread of it has stopped: the signal is only queued when kill returns, and a thread
    running on the other core can still answer (an HA ack, say) until the kernel stops it."""
    (os.killpg if group else os.kill)(pid, signal.SIGSTOP)

    def pids() -> list[int]:
        if not group:
            return [pid]
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):  # a process that just ended
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[2]) == pid:  # its process group
                        found.append(int(entry.name))
        return found

    def stopped() -> bool:
        states = []
        for member in pids():
            with contextlib.suppress(OSError):  # a process or thread that just ended
                for task in Path(f"/proc/{member}/task").iterdir():
                    with contextlib.suppress(OSError):
                        states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        # a zombie (a child that ended, which its stopped parent cannot reap now) never runs
        return bool(states) and all(state in ("T", "t", "Z", "X") for state in states)

    wait_until(stopped, timeout, interval=0.005, message=f"process {pid} to stop")


PORTS_DIR = Path(tempfile.gettempdir()) / "tidemq-test-ports"
# This process's registry file, opened with a shared flock held until the process ends: the
# kernel drops the lock however it ends (a crash, SIGKILL, a zombie not reaped yet), so a file
# nobody holds is a dead process's, whatever its id became since.
_registry: dict[int, TextIO] = {}


@functools.cache
def _port_range() -> range:
    """Below the kernel's ephemeral range: a port the kernel hands out (to a `bind(0)` or as
    an outgoing connection's local port) may be taken by then, and a process restarted on its
    fixed port (a chaos run's new master reopening its HA port) would find it in use. Below
    deploy.local's shifted topologies (offsets from 20000 up)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = min(20000, low)
    return range(10000 if top > 12000 else 1024, top)


def registered_ports() -> set[int]:
    """The ports live test processes were handed (this one's included); a dead process's
    file is removed. Call with PORTS_DIR/lock held."""
    taken: set[int] = set()
    for entry in PORTS_DIR.glob("[0-9]*"):
        with open(entry) as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:   # its process lives (holds the shared lock)
                taken.update(int(port) for port in held.read().split())
                continue
        entry.unlink(missing_ok=True)
    return taken


def free_port() -> int:
    """A loopback port free now, outside the kernel's ephemeral range, and never handed to
    another live test process (each registers its ports in PORTS_DIR, under a lock)."""
    PORTS_DIR.mkdir(exist_ok=True)
    with open(PORTS_DIR / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pid = os.getpid()   # per process: a forked child registers under its own id
        if pid not in _registry:
            # "w": a file under this id now is a dead process's (a live one would hold it)
            mine = _registry[pid] = open(PORTS_DIR / str(pid), "w")  # noqa: SIM115 (held)
            fcntl.flock(mine, fcntl.LOCK_SH)
        taken = registered_ports()
        for port in random.sample(_port_range(), len(_port_range())):
            if port in taken:
                continue
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _registry[pid].write(f"{port}\n")
            _registry[pid].flush()
            return port
    raise RuntimeError(f"no free port in {_port_range()} that no live test process holds")


def dead_endpoint() -> str:
    """A loopback address nothing listens on and that this process has no circuit breaker for
    yet: breakers are per address and live for the process, so a port an earlier test used
    would bring that test's breaker (its thresholds, its failure count) along."""
    from tidemq.common import rpc

    while True:
        addr = f"127.0.0.1:{free_port()}"
        if addr not in rpc._breakers:
            return addr


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _PortTaken(Exception):
    """A server exited because another process had bound its port first."""


@dataclass
class RedisServer:
    """One redis-server: the defaults, then `extra_args` (which override them:
    `["--appendfsync", "always"]`). Restarting keeps the port and the data dir."""

    data_dir: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    extra_args: list[str] = field(default_factory=list)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.data_dir / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--logfile", str(self.log), *self.extra_args]

    def start(self, timeout: float = 15.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = self.port or free_port()
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.STDOUT)
            try:
                wait_until(self._serving, timeout,
                           message=f"{self.command()[0]} on port {self.port}")
                return self
            except (TimeoutError, _PortTaken):
                self.kill()
                self.port = 0  # the port was taken between probe and bind: try another
        raise RuntimeError(f"{self.command()[0]} would not start:\n{_tail(self.log)}")

    def _serving(self) -> bool:
        """This process answers on the port: asked by its process id, since another test's
        server may hold the port (it was free when probed, then taken before this bind)."""
        if self.proc is not None and self.proc.poll() is not None:
            if "Address already in use" in _tail(self.log):
                raise _PortTaken(self.port)
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{_tail(self.log)}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"INFO server\r\n")
                reply = b""
                while not reply.endswith(b"\r\n\r\n") and len(reply) < 1 << 16:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return False
        return self.proc is None or f"process_id:{self.proc.pid}\r\n".encode() in reply

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)

    def restart(self) -> None:
        self.stop()
        self.start()


def start_redis(tmp_path: Path) -> RedisServer:
    return RedisServer(Path(tmp_path) / f"redis-{next(_counter)}").start()


@dataclass
class ServiceProcess:
    module: str
    args: list[str]
    workdir: Path
    env: dict[str, str] | None = None
    port: int = 0
    metrics_port: int = 0
    info: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def log(self) -> Path:
        return self.workdir / "service.log"

    @property
    def ready_file(self) -> Path:
        return self.workdir / "ready.json"

    def start(self, timeout: float = 30.0) -> ServiceProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        command = [
            sys.executable, "-m", self.module, "--host", "127.0.0.1", "--port", str(self.port),
            "--metrics-port", "0", "--ready-file", str(self.ready_file),
            "--data-dir", str(self.workdir / "data"), *self.args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_until(self._ready, timeout, message=f"{self.module} to become ready")
        self.info = json.loads(self.ready_file.read_text())
        self.port = self.info["port"]
        self.metrics_port = self.info.get("metrics_port", 0)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.module} exited with {self.proc.returncode}:\n{_tail(self.log)}"
            )
        return self.ready_file.exists()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (graceful drain); SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError(
                f"{self.module} ignored SIGTERM for {timeout} s:\n{_tail(self.log)}"
            ) from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout: float = 30.0) -> ServiceProcess:
        """Start again on the same port (clients keep their address)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        return self.start(timeout)


def start_service(module: str, args: list[str], tmp_path: Path, env: dict[str, str] | None = None,
                  name: str | None = None) -> ServiceProcess:
    workdir = Path(tmp_path) / f"{name or module.rsplit('.', 1)[-1]}-{next(_counter)}"
    return ServiceProcess(module, list(args), workdir, env).start()
