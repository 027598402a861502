"""DescribeStore and the control-plane report, against real Redis processes.

A plain Redis behind a real config center: one master node, the target without a password,
a dead second instance reported unreachable. A replicated tier (master, replica, Sentinel,
tests/support/small_redis_tier.py): roles, lag and the Sentinel's view, then a killed replica
and a killed master reported as such, read through topology.TopologyReader directly. And a
config center on the full Sentinel tier (tests/support/redis_tier.py) describing it over the
RPC, a killed replica and a killed Sentinel included.
"""

from __future__ import annotations

import json

import pytest
import redis
from tidemq.client.cli import app
from tidemq.common import errors, redisconn
from tidemq.configcenter.topology import TopologyReader
from tidemq.configclient.client import ConfigClient
from typer.testing import CliRunner

from tests.support.processes import dead_endpoint, wait_until
from tests.support.small_redis_tier import small_tier


@pytest.fixture
def tier(tmp_path):
    with small_tier(tmp_path / "tier") as started:
        yield started


def reader(url: str) -> TopologyReader:
    return TopologyReader(redisconn.parse(url))


def test_a_plain_redis_is_one_master_node(config_center, redis_server):
    with ConfigClient(config_center.addr) as client:
        store = client.describe_store()
    assert (store.target, store.replicated, store.sentinels) == (
        f"redis 127.0.0.1:{redis_server.port}/0", False, [])
    (node,) = store.nodes
    assert (node.address, node.role, node.reachable, node.lag_bytes) == (
        f"127.0.0.1:{redis_server.port}", "master", True, None)
    assert node.replication_offset >= 0 and node.connected_replicas == 0
    assert store.advertised_addr == config_center.addr and store.version


def test_a_dead_instance_is_reported_not_skipped(config_center, redis_server):
    dead = dead_endpoint()
    with ConfigClient([dead, config_center.addr], timeout=3) as client:
        plane = client.control_plane()
    assert [(i.address, i.reachable) for i in plane.instances] == [
        (dead, False), (config_center.addr, True)]
    assert "unreachable" in plane.instances[0].error
    assert plane.reported_by == config_center.addr
    report = plane.to_json()
    assert report["store"]["nodes"][0]["role"] == "master"
    assert report["config_centers"][0] == {
        "address": dead, "reachable": False, "error": plane.instances[0].error,
        "version": "", "advertised_addr": "", "target": ""}


def test_no_instance_answering_is_one_unavailable_error():
    first, second = dead_endpoint(), dead_endpoint()
    with ConfigClient(f"{first},{second}", timeout=2) as client, \
            pytest.raises(errors.ServiceUnavailable) as raised:
        client.control_plane()
    assert raised.value.message == f"no config center answered (tried {first}, {second})"


def test_the_cli_reports_each_instance_and_the_node(config_center, redis_server):
    dead = dead_endpoint()
    runner = CliRunner()
    shown = runner.invoke(app, ["--config-center", f"{config_center.addr},{dead}", "-o", "json",
                                "cluster", "control-plane"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert [(c["address"], c["reachable"]) for c in report["config_centers"]] == [
        (config_center.addr, True), (dead, False)]
    assert [(n["address"], n["role"]) for n in report["store"]["nodes"]] == [
        (f"127.0.0.1:{redis_server.port}", "master")]
    table = runner.invoke(app, ["--config-center", config_center.addr, "cluster",
                                "control-plane"])
    assert table.exit_code == 0 and "no Sentinels: the store is one Redis" in table.stdout
    nobody = runner.invoke(app, ["--config-center", dead, "cluster", "control-plane"])
    assert nobody.exit_code == 1
    assert nobody.stderr.strip() == \
        f"error SERVICE_UNAVAILABLE: no config center answered (tried {dead})"


def test_redis_down_is_an_unreachable_node_not_a_failed_call(config_center, redis_server):
    redis_server.kill()
    with ConfigClient(config_center.addr) as client:
        (node,) = client.describe_store().nodes
    assert (node.reachable, node.role) == (False, "")
    assert "Connection refused" in node.error


def test_the_rpc_over_a_replicated_master(services, tier):
    center = services("tidemq.configcenter", ["--redis-url", tier.master.url,
                                              "--shutdown-grace-s", "1"])
    with ConfigClient(center.addr) as client:
        (node,) = client.describe_store().nodes
    assert (node.role, node.connected_replicas) == ("master", 1)


def test_roles_lag_and_the_sentinels_view(tier):
    master, (replica,) = tier.master, tier.replicas
    writer = redis.Redis(port=master.port)
    writer.set("k", "v" * 1000)
    assert writer.wait(1, 5000) == 1
    url = tier.sentinel_url()

    def caught_up():
        topology = reader(url).describe()
        return topology if topology.nodes[-1].lag_bytes == 0 else None

    topology = wait_until(caught_up, 10, message="the replica's lag to read 0")
    assert (topology.replicated, topology.master_name) == (True, "tidemq-cc")
    first, second = topology.nodes
    assert (first.address, first.role, first.reachable, first.connected_replicas) == (
        f"127.0.0.1:{master.port}", "master", True, 1)
    assert (second.address, second.role, second.link_status, second.master_address) == (
        f"127.0.0.1:{replica.port}", "replica", "up", f"127.0.0.1:{master.port}")
    assert second.replication_offset == first.replication_offset > 1000
    (sentinel,) = topology.sentinels
    assert (sentinel.address, sentinel.reachable, sentinel.master_address,
            sentinel.master_down, sentinel.other_sentinels, sentinel.quorum) == (
        tier.sentinel.addr, True, f"127.0.0.1:{master.port}", False, 0, 2)


def test_a_killed_replica_then_master_are_reported(tier):
    url = tier.sentinel_url()
    tier.replicas[0].kill()
    master, replica = reader(url).describe().nodes
    assert (master.reachable, replica.reachable, replica.role) == (True, False, "")
    assert "Connection refused" in replica.error

    tier.master.kill()
    # the Sentinel flags it s_down after down-after-milliseconds (1 s); quorum 2 > 1 Sentinel,
    # so it never fails over and its view stays put
    topology = wait_until(lambda: (t := reader(url).describe()).sentinels[0].master_down and t,
                          10, message="the Sentinel to flag the master down")
    assert [n.reachable for n in topology.nodes] == [False, False]
    assert "s_down" in topology.sentinels[0].master_flags


def test_sentinels_that_are_down_or_do_not_know_the_master(tier):
    dead = dead_endpoint()
    topology = reader(f"redis+sentinel://{dead},{tier.sentinel.addr}/tidemq-cc").describe()
    assert [(s.address, s.reachable) for s in topology.sentinels] == [
        (dead, False), (tier.sentinel.addr, True)]
    assert [n.role for n in topology.nodes] == ["master", "replica"]  # one Sentinel is enough

    unknown = reader(f"redis+sentinel://{tier.sentinel.addr}/no-such-master").describe()
    (sentinel,) = unknown.sentinels
    assert sentinel.reachable and "monitors no master named 'no-such-master'" in sentinel.error
    assert unknown.nodes == ()


def test_a_config_center_on_sentinels_describes_the_tier(services, redis_tier):
    tier = redis_tier
    center = services("tidemq.configcenter", ["--redis-url", tier.url(), "--shutdown-grace-s",
                                              "1", "--redis-write-replicas", "1"])
    master = tier.master()
    with ConfigClient(center.addr) as client:
        client.put("/k", "v")
        store = wait_until(lambda: (s := client.describe_store()) and all(
            n.lag_bytes == 0 for n in s.nodes if n.role == "replica") and s, 10,
            message="both replicas to catch up")
        assert store.replicated and store.master_name == tier.master_name
        assert [(n.address, n.role) for n in store.nodes][0] == (master.addr, "master")
        assert sorted(n.address for n in store.nodes) == sorted(n.addr for n in tier.nodes)
        assert [n.link_status for n in store.nodes[1:]] == ["up", "up"]
        assert store.nodes[0].connected_replicas == 2
        assert [(s.reachable, s.master_address, s.master_down, s.other_sentinels)
                for s in store.sentinels] == [(True, master.addr, False, 2)] * 3

        replica = next(n for n in tier.nodes if n is not master)
        tier.kill(replica)
        tier.kill(tier.sentinels[0])
        store = client.describe_store()
        gone = next(n for n in store.nodes if n.address == replica.addr)
        assert not gone.reachable and gone.error
        assert [s.reachable for s in store.sentinels] == [False, True, True]
