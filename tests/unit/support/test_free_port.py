"""deploy.ports (tests' free_port): below the kernel's ephemeral range, never the same port
twice, never a port a live process holds, and a killed process's ports are given back."""

from __future__ import annotations

import fcntl
import random
import signal
import socket
import subprocess
import sys

from deploy import ports
from tests.support import processes

CHILD = ("from tests.support.processes import free_port; import sys; "
         "print(free_port(), flush=True); sys.stdin.read()")


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable():
    claimed = [processes.free_port() for _ in range(50)]
    assert len(set(claimed)) == 50
    assert all(ports.FLOOR <= port < ports.ephemeral_low() for port in claimed)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", claimed[-1]))


def _claimed() -> set[int]:
    with open(ports.REGISTRY / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return ports.claimed_ports()


def test_a_live_process_ports_are_held_and_a_killed_one_s_pruned():
    mine = processes.free_port()
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        entry = ports.REGISTRY / str(child.pid)
        assert entry.exists()
        assert {port, mine} <= _claimed()
        child.send_signal(signal.SIGKILL)   # no exit handler runs: the kernel drops its lock
        child.wait(timeout=30)
        assert port not in _claimed()
        assert not entry.exists()
        assert mine in _claimed()
    finally:
        child.kill()
        child.wait(timeout=30)


def test_a_claimed_port_is_never_drawn_again():
    """Offered again first (it is still free: nothing bound it), the claim alone turns it
    down."""
    first = processes.free_port()
    offered = [first]
    second = ports.claim(lambda: {offered.pop()} if offered else
                         {random.randrange(ports.FLOOR, ports.ephemeral_low())})
    assert not offered and second is not None and first not in second
