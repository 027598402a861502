"""free_port: below the kernel's ephemeral range, never the same port twice in a run, never a
port a live test process holds, and a killed process's ports are given back."""

from __future__ import annotations

import fcntl
import signal
import socket
import subprocess
import sys

from tests.support import processes

CHILD = ("from tests.support.processes import free_port; import sys; "
         "print(free_port(), flush=True); sys.stdin.read()")


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable():
    ports = [processes.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port in processes._port_range() for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def _registered() -> set[int]:
    with open(processes.PORTS_DIR / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return processes.registered_ports()


def test_a_live_process_ports_are_held_and_a_killed_one_s_pruned():
    mine = processes.free_port()
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        entry = processes.PORTS_DIR / str(child.pid)
        assert entry.exists()
        assert {port, mine} <= _registered()
        child.send_signal(signal.SIGKILL)   # no exit handler runs: the kernel drops its lock
        child.wait(timeout=30)
        assert port not in _registered()
        assert not entry.exists()
        assert mine in _registered()
    finally:
        child.kill()
        child.wait(timeout=30)
