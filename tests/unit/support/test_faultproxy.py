"""The partition tool of the chaos suite must really cut and really heal."""

from __future__ import annotations

import socket
import socketserver
import threading

import pytest

from tests.support.faultproxy import FaultProxy
from tests.support.processes import wait_until


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo_server():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _connect(addr: str) -> socket.socket:
    host, port = addr.split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def _echoes(sock: socket.socket, payload: bytes) -> bool:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            return False
        received += chunk
    return received == payload


def test_forwards_until_cut_then_drops_and_heal_reconnects(echo_server):
    with FaultProxy(echo_server) as proxy:
        sock = _connect(proxy.addr)
        assert _echoes(sock, b"x" * 100_000)

        proxy.cut()
        sock.settimeout(0.3)
        sock.sendall(b"lost")
        with pytest.raises(TimeoutError):   # silence, as a partition looks: no reset, no data
            sock.recv(10)
        during = _connect(proxy.addr)        # a connection made during the cut goes nowhere
        during.settimeout(0.3)
        during.sendall(b"also lost")
        with pytest.raises(TimeoutError):
            during.recv(10)

        proxy.heal()
        sock.settimeout(5)
        try:                                 # the stream with a hole is closed at heal
            closed = sock.recv(10) == b""
        except ConnectionResetError:
            closed = True
        assert closed
        wait_until(lambda: _echoes(_connect(proxy.addr), b"back"), 5, message="echo after heal")
        for s in (sock, during):
            s.close()


def test_throttle_slows_new_connections_until_unthrottled(echo_server):
    with FaultProxy(echo_server) as proxy:
        before = _connect(proxy.addr)
        wait_until(lambda: len(proxy._links) == 1, 5, message="the proxy to accept it")
        proxy.throttle(1000)                 # bytes a second: 100 kB would take 100 s
        slow = _connect(proxy.addr)
        assert _echoes(before, b"y" * 100_000)   # a connection made before keeps its speed
        slow.sendall(b"z" * 100_000)
        slow.settimeout(0.5)
        received = slow.recv(65536)
        assert 0 < len(received) < 100_000       # it flows, slowly
        proxy.unthrottle()
        slow.settimeout(5)
        while len(received) < 100_000:
            chunk = slow.recv(65536)
            assert chunk, "the throttled connection closed"
            received += chunk
        assert received == b"z" * 100_000
        before.close()
        slow.close()
