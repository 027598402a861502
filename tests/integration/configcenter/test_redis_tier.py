"""The replicated Redis the config center runs on (tests.support.redis_tier): a Sentinel
failover really happens, clients following the redis+sentinel URL follow it, a returning old
master is demoted, and Sentinels only ever speak of proxy addresses (so partitions work)."""

from __future__ import annotations

import pytest
import redis
from tidemq.common import redisconn

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def _reported_ports(tier) -> set[int]:
    """Every Redis port any Sentinel names: the master and the replicas it knows."""
    ports = set()
    for sentinel in tier.sentinels:
        client = sentinel.direct()
        ports.add(int(client.sentinel_get_master_addr_by_name(tier.master_name)[1]))
        ports |= {int(r["port"]) for r in client.sentinel_slaves(tier.master_name)}
    return ports


def _demoted(tier, old, new) -> bool:
    info = tier.role(old)
    return (info.get("role"), info.get("master_port"), info.get("master_link_status")) == (
        "slave", new.announced_port, "up")


def test_a_killed_master_is_replaced_and_returns_as_a_replica(redis_tier):
    tier = redis_tier
    store = redisconn.connect(tier.url(db=3), socket_timeout=1.0, retry_on_timeout=False)
    old = tier.master()
    store.set("before", "kill")
    assert store.wait(1, 2000) >= 1, "no replica confirmed the write"

    tier.kill(old)
    new = tier.wait_for_new_master(old, timeout=20)
    assert new is not old and tier.role(new)["role"] == "master"

    def written() -> bool:   # the client asks the Sentinels again on a new connection
        try:
            return store.set("after", "failover") and store.get("before") == b"kill"
        except redis.RedisError:
            redisconn.drop_connections(store)
            return False

    wait_until(written, 20, interval=0.1, message="a write through the sentinel URL")
    tier.restart(old)
    wait_until(lambda: _demoted(tier, old, new), 20, interval=0.1,
               message=f"Sentinel to demote the returning {old} to a replica of {new}")
    assert tier.wait_healthy(20) is new
    assert old.direct().get("after") is None   # db 0: the test wrote to db 3
    assert old.direct(db=3).get("after") == "failover"
    assert _reported_ports(tier) == {n.announced_port for n in tier.nodes}
    assert tier.masters_by_role() == [new]


def test_a_partitioned_master_stops_writing_is_replaced_and_rejoins_after_heal(redis_tier):
    tier = redis_tier
    old = tier.master()
    tier.partition(old)

    def refuses_writes() -> bool:   # min-replicas-to-write: its replicas' ACKs stopped
        try:
            old.direct().set("split", "brain")
            return False
        except redis.ResponseError as exc:
            return str(exc).startswith("NOREPLICAS")

    wait_until(refuses_writes, 10, interval=0.1,
               message=f"the isolated {old} to refuse writes")
    new = tier.wait_for_new_master(old, timeout=20)
    assert tier.role(old)["role"] == "master"   # it cannot hear the Sentinels yet
    assert _reported_ports(tier) <= {n.announced_port for n in tier.nodes}, \
        "a Sentinel names a real port: clients and replicas would bypass the proxies"

    tier.heal(old)
    wait_until(lambda: _demoted(tier, old, new), 20, interval=0.1,
               message=f"Sentinel to demote the healed {old} to a replica of {new}")
    assert tier.wait_healthy(20) is new
    assert set(tier.reported_masters().values()) == {new.addr}
    assert tier.masters_by_role() == [new]
    assert old.direct().get("split") is None


def test_a_node_whose_first_port_is_taken_starts_on_another(tmp_path):
    """Ports are probed free, then bound: another process can take one in between. The
    launcher writes a node's config on its first start only, so the retry on a new port has to
    drop the file the failed start wrote (a CI run retried the taken port five times)."""
    import socket

    from tests.support.redis_tier import LaunchedNode

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        data_dir = tmp_path / "node"
        node = LaunchedNode(data_dir, taken, config_file=data_dir / "redis.conf",
                            directives=["--appendonly", "no"])
        try:
            node.start()
            assert node.port != taken and node.served
            assert f"port {node.port}" in node.config_file.read_text()
            assert redis.Redis(port=node.port).ping()
        finally:
            node.kill()
