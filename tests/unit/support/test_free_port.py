"""free_port: below the kernel's ephemeral range, never the same port twice in a run."""

from __future__ import annotations

import socket

from tests.support import processes


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable():
    ports = [processes.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port in processes._port_range() for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
