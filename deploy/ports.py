"""Ports for processes that run beside others on one machine (tests' clusters, a second
deployment beside `make up`), claimed so that two never share one.

Why not the kernel's `bind(0)`: a port from its ephemeral range may be taken again before the
process that was given it binds, or while that process restarts on it (a new master reopening
its HA port) — by any outgoing connection's local port, which the kernel draws from the same
range. So claimed ports lie between FLOOR and that range, and each claim is written to this
process's file in REGISTRY, which it holds with a shared flock until it ends: the kernel drops
the lock however a process ends (a crash, SIGKILL, a zombie not reaped yet), so a file nobody
holds is a dead process's, whatever its id became since, and its ports are free again.
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

REGISTRY = Path(tempfile.gettempdir()) / "tidemq-ports"
FLOOR = 10000   # below: well-known services and `make up`'s own ports
_held: dict[tuple[Path, int], TextIO] = {}   # (registry, pid) -> this process's file, locked


@functools.cache
def ephemeral_low() -> int:
    """Where the kernel's ephemeral range starts (Linux; 32768 when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_free(port: int) -> bool:
    """Whether a server could listen on `port` now. The probe binds as the servers do (gRPC,
    gunicorn and redis all set SO_REUSEADDR), so the TIME_WAIT connections a `make down` leaves
    behind do not count as busy, while a live listener still does."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def claim(pick: Callable[[], set[int]], attempts: int = 200) -> set[int] | None:
    """The first set `pick()` draws whose ports are all free and claimed by no live process,
    claimed for this process; None after `attempts` draws."""
    REGISTRY.mkdir(exist_ok=True)
    with open(REGISTRY / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mine = _own_file()
        taken = claimed_ports()
        for _ in range(attempts):
            ports = pick()
            if not ports & taken and all(port_free(p) for p in ports):
                mine.write(" ".join(map(str, sorted(ports))) + "\n")
                mine.flush()
                return ports
    return None


def free_port() -> int:
    """One claimed loopback port."""
    top = ephemeral_low()
    claimed = claim(lambda: {random.randrange(FLOOR, top)})
    if claimed is None:
        raise RuntimeError(f"no free port in {FLOOR}..{top} that no live process claimed")
    return claimed.pop()


def claimed_ports() -> set[int]:
    """Every port a live process claimed, this one's included (a file nobody holds is a dead
    process's: removed). Call with REGISTRY/lock held."""
    taken: set[int] = set()
    for entry in REGISTRY.iterdir():
        if not entry.name.isdigit():
            continue
        with open(entry) as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:   # its process lives (holds the shared lock)
                taken.update(int(port) for port in held.read().split())
                continue
        entry.unlink(missing_ok=True)
    return taken


def _own_file() -> TextIO:
    """This process's registry file, held with a shared lock (per process id: a forked child
    claims under its own)."""
    key = (REGISTRY, os.getpid())
    if key not in _held:
        # "w": a file under this id now is a dead process's (a live one would hold it)
        mine = _held[key] = open(REGISTRY / str(os.getpid()), "w")  # noqa: SIM115 (held)
        fcntl.flock(mine, fcntl.LOCK_SH)
    return _held[key]
