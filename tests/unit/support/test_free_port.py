"""deploy.ports: claimed ports lie below the kernel's ephemeral range, are never handed out
twice while their claimer lives, and a dead claimer's ports are free again."""

from __future__ import annotations

import socket

from deploy import ports
from tests.support import processes


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable():
    claimed = [processes.free_port() for _ in range(50)]
    assert len(set(claimed)) == 50
    assert all(ports.FLOOR <= port < ports.ephemeral_low() for port in claimed)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", claimed[-1]))


def test_a_dead_claimers_ports_are_released(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "REGISTRY", tmp_path)
    (tmp_path / "999999999").write_text("12345 12346\n")
    assert ports._claimed() == set()
    assert not (tmp_path / "999999999").exists()


def test_a_live_claimers_ports_are_never_drawn(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "REGISTRY", tmp_path)
    (tmp_path / "1").write_text("12345\n")            # pid 1 is alive
    draws = iter([{12345}, {12346}])
    assert ports.claim(lambda: next(draws)) == {12346}
