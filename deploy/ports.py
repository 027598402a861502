"""Ports for processes that run beside others on one machine (tests' clusters, a second
deployment beside `make up`), claimed so that two never share one.

Why not the kernel's `bind(0)`: a port from its ephemeral range may be taken again before the
process that was given it binds, or while that process restarts on it (a new master reopening
its HA port) — by any outgoing connection's local port, which the kernel draws from the same
range. So claimed ports lie below that range, and each claim is registered in REGISTRY (one
file per claiming process, under a lock) until that process ends: parallel test workers
starting processes at once never hand out the same port twice.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

REGISTRY = Path(tempfile.gettempdir()) / "tidemq-ports"
FLOOR = 10000   # below: well-known services and `make up`'s own ports


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
    registered for this process; None after `attempts` draws."""
    REGISTRY.mkdir(exist_ok=True)
    with open(REGISTRY / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        taken = _claimed()
        for _ in range(attempts):
            ports = pick()
            if not ports & taken and all(port_free(p) for p in ports):
                with open(REGISTRY / str(os.getpid()), "a") as mine:
                    mine.write(" ".join(map(str, sorted(ports))) + "\n")
                return ports
    return None


def free_port() -> int:
    """One claimed loopback port (the kernel's `bind(0)` when the range is crowded)."""
    top = ephemeral_low()
    claimed = claim(lambda: {random.randrange(FLOOR, top)})
    if claimed is not None:
        return claimed.pop()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _claimed() -> set[int]:
    """Every port a live process claimed (a dead one's file is removed)."""
    taken: set[int] = set()
    for entry in REGISTRY.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            os.kill(int(entry.name), 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
            continue
        except PermissionError:
            pass   # alive, another user's
        taken.update(int(port) for port in entry.read_text().split())
    return taken
