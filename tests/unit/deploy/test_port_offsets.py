"""free_port_offset: deployments chosen while others are still starting never share a port."""

from __future__ import annotations

from deploy import local
from deploy import ports as port_
from deploy.topology import load


def test_offsets_chosen_one_after_another_share_no_port():
    """Nothing binds between the choices (as when parallel test workers start deployments at
    once): each is registered, so the next one avoids its ports."""
    topology = load()
    ports = [p for s in topology.services.values() for p in s.ports.values()]
    chosen = [local.free_port_offset(topology) for _ in range(6)]
    sets = [{p + offset for p in ports} for offset in chosen]
    assert all(min(s) >= port_.FLOOR and max(s) < port_.ephemeral_low() for s in sets)
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            assert not a & b


def test_an_offset_a_live_process_claimed_is_not_chosen_again(tmp_path, monkeypatch):
    """The next choice is offered the first one's offset first (its ports are still free:
    nothing bound them): the claim alone must turn it down. Random offsets rarely collide,
    so the test above can pass without the registry; this one cannot."""
    monkeypatch.setattr(port_, "REGISTRY", tmp_path)
    topology = load()
    ports = [p for s in topology.services.values() for p in s.ports.values()]
    first = local.free_port_offset(topology)
    randrange, offered = local.random.randrange, [first]
    monkeypatch.setattr(local.random, "randrange",
                        lambda *args: offered.pop() if offered else randrange(*args))
    second = local.free_port_offset(topology)
    assert not offered, "the first offset was offered again"
    assert not {p + first for p in ports} & {p + second for p in ports}
