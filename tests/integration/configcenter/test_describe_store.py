"""DescribeStore and the control-plane report, against real etcd members and config centers.

One member behind a config center; a dead second config center reported unreachable, not
skipped; the CLI's report. Three members: the leader first, every member's raft term and
lag, a killed follower and then a killed leader reported as such (no leader: no quorum)
while the config center still answers the description; a member of another cluster (a wrong
--initial-cluster-token) named with both cluster ids.
"""

from __future__ import annotations

import json
import shutil
import signal

import pytest
from tidemq.client.cli import app
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient
from typer.testing import CliRunner

from tests.support.etcd import start_etcd
from tests.support.processes import dead_endpoint, free_port, wait_until


def test_one_member_is_described_with_the_leader(config_center, etcd_server):
    with ConfigClient(config_center.addr) as client:
        client.put("/d/k", "v")
        store = client.describe_store()
    (member,) = store.members
    assert (member.name, member.endpoint, member.reachable, member.leader, member.lag_entries) == (
        "m1", etcd_server.members[0].addr, True, True, 0)
    assert member.raft_term >= 1 and member.raft_index >= member.raft_applied_index > 0
    assert store.leader == "m1" and store.revision >= 2 and store.cluster_id
    assert store.target == f"etcd {etcd_server.endpoints}"
    assert store.advertised_addr == config_center.addr and store.version


def test_a_dead_instance_is_reported_not_skipped(config_center):
    dead = dead_endpoint()
    with ConfigClient([dead, config_center.addr], timeout=3) as client:
        plane = client.control_plane()
    assert [(i.address, i.reachable) for i in plane.instances] == [
        (dead, False), (config_center.addr, True)]
    assert "unreachable" in plane.instances[0].error
    assert plane.reported_by == config_center.addr
    report = plane.to_json()
    assert report["store"]["members"][0]["leader"] is True
    assert report["config_centers"][0]["reachable"] is False


def test_no_instance_answering_is_one_unavailable_error():
    first, second = dead_endpoint(), dead_endpoint()
    with ConfigClient(f"{first},{second}", timeout=2) as client, \
            pytest.raises(errors.ServiceUnavailable) as raised:
        client.control_plane()
    assert raised.value.message == f"no config center answered (tried {first}, {second})"


def test_the_cli_reports_each_instance_and_the_members(config_center, etcd_server):
    dead = dead_endpoint()
    runner = CliRunner()
    shown = runner.invoke(app, ["--config-center", f"{config_center.addr},{dead}", "-o", "json",
                                "cluster", "control-plane"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert [(c["address"], c["reachable"]) for c in report["config_centers"]] == [
        (config_center.addr, True), (dead, False)]
    assert [(m["endpoint"], m["leader"]) for m in report["store"]["members"]] == [
        (etcd_server.members[0].addr, True)]
    nobody = runner.invoke(app, ["--config-center", dead, "cluster", "control-plane"])
    assert nobody.exit_code == 1
    assert nobody.stderr.strip() == \
        f"error SERVICE_UNAVAILABLE: no config center answered (tried {dead})"


def test_three_members_then_a_lost_follower_then_a_lost_quorum(services, tmp_path):
    cluster = start_etcd(tmp_path, size=3)
    try:
        center = services("tidemq.configcenter", ["--etcd-endpoints", cluster.endpoints])
        with ConfigClient(center.addr, timeout=5) as client:
            client.put("/d/k", "v")
            store = client.describe_store()
            leader = cluster.wait_leader()
            assert [m.leader for m in store.members] == [True, False, False]
            assert store.leader == store.members[0].name == leader.name
            assert {m.endpoint for m in store.members} == {m.addr for m in cluster.members}
            assert len({m.raft_term for m in store.members}) == 1
            assert all(m.reachable and m.lag_entries is not None for m in store.members)

            follower = cluster.followers()[0]
            follower.kill()
            store = wait_until(lambda: _with_unreachable(client, 1), timeout=15,
                               message="the killed follower reported unreachable")
            (down,) = [m for m in store.members if not m.reachable]
            assert down.endpoint == follower.addr and down.error
            assert store.leader  # two of three: still a quorum

            cluster.wait_leader().signal(signal.SIGSTOP)  # the leader lost too: no quorum
            store = wait_until(lambda: _with_unreachable(client, 2), timeout=15,
                               message="the frozen leader reported unreachable")
            assert [m.reachable for m in store.members].count(True) == 1
            with pytest.raises(errors.ServiceUnavailable, match="no etcd member served"):
                client.put("/d/k", "lost quorum")
    finally:
        for member in cluster.members:
            member.signal(signal.SIGCONT)
        cluster.kill()


def _with_unreachable(client: ConfigClient, count: int):
    store = client.describe_store()
    return store if sum(not m.reachable for m in store.members) == count else None


def _other_cluster_row(client: ConfigClient, endpoint: str):
    store = client.describe_store()
    row = next(m for m in store.members if m.endpoint == endpoint)
    # (a leader too: m3 may have led, and the other two elect once it is gone)
    return (store, row) if "another etcd cluster" in row.error and store.leader else None


def test_a_member_started_with_another_cluster_token_is_named_with_the_mismatch(
        services, tmp_path):
    """m3's disk replaced and the member started again with a wrong --initial-cluster-token:
    etcd's members refuse its peer traffic ("request cluster ID mismatch") and it waits
    forever to join, its client port answering nothing. The control plane names it and the
    two cluster ids (read from its peer URL), `make status` shows the same sentence, the
    CLI prints it, and the two others keep serving writes. Then m3 as a one-member cluster
    of its own (it answers Status, for another cluster): named the same way, never counted
    as a member."""
    cluster = start_etcd(tmp_path, size=3)
    try:
        center = services("tidemq.configcenter", ["--etcd-endpoints", cluster.endpoints])
        stray = cluster.members[2]
        with ConfigClient(center.addr, timeout=5) as client:
            ours = client.describe_store().cluster_id
            stray.kill()
            shutil.rmtree(stray.data_dir)
            stray.launch(cluster.initial_cluster, "another-token")
            store, row = wait_until(lambda: _other_cluster_row(client, stray.addr), timeout=30,
                                    message="the member of another cluster reported as such")
            assert (row.name, row.reachable, row.leader) == ("m3", False, False)
            assert f"this cluster's is {ours}" in row.error, row.error
            assert "another --initial-cluster-token" in row.error
            theirs = row.error.split("(cluster id ", 1)[1].split(",", 1)[0]
            assert theirs != ours and store.cluster_id == ours
            assert store.leader and sum(m.reachable for m in store.members) == 2
            client.put("/d/k", "two of three still serve")   # a quorum without m3
            assert "request cluster ID mismatch" in cluster.members[0].log.read_text()

            shown = CliRunner().invoke(app, ["--config-center", center.addr, "cluster",
                                             "control-plane"], terminal_width=400)
            assert shown.exit_code == 0, shown.output
            text = " ".join(shown.stdout.split())
            assert f"m3: the member at {stray.addr}" in text, text
            assert f"belongs to another etcd cluster (cluster id {theirs}" in text
            assert "2 of 3 members answer (quorum 2): losing one more stops writes" in text
            status = "\n".join(_status_lines(center.addr))
            assert f"etcd member m3 {stray.addr} not serving" in status, status
            assert f"belongs to another etcd cluster (cluster id {theirs}" in status, status

            stray.kill()   # now a cluster of its own, which answers clients
            shutil.rmtree(stray.data_dir)
            stray.launch(f"m3={stray.peer_url}", "a-cluster-of-its-own")
            wait_until(lambda: stray.status(), timeout=30, message="the lone member serving")
            store, row = wait_until(lambda: _other_cluster_row(client, stray.addr), timeout=30,
                                    message="the lone member reported as another cluster's")
            assert store.cluster_id == ours and not row.reachable, row
            assert f"this cluster's is {ours}" in row.error
            assert store.leader == cluster.wait_leader().name != "m3"
            _calls_never_reach(stray, cluster, ours)
            members = _etcd_status_lines(cluster)   # make status's own probe of each member
            assert members[0].startswith("etcd members (2/3 answering, leader"), members
            stray_line = " ".join(members[3].split())
            assert stray_line.startswith(f"etcd-3 {stray.addr} DOWN answers for another etcd "
                                         "cluster (cluster id "), members
            assert f"the others' {ours})" in stray_line, members
    finally:
        cluster.kill()


def _calls_never_reach(stray, cluster, ours: str) -> None:
    """A connection given the stray member first learns the cluster most endpoints answer for
    and never writes to, reads from or watches on the stray: its writes land in the cluster."""
    from tidemq.configcenter.etcd import EtcdTarget
    from tidemq.configcenter.store import ConfigStore

    others = [m.addr for m in cluster.members if m is not stray]
    store = ConfigStore(EtcdTarget.parse(",".join([stray.addr, *others])))
    try:
        wait_until(lambda: store.etcd.cluster_id, timeout=15, message="the cluster id learnt")
        assert f"{store.etcd.cluster_id:x}" == ours
        assert stray.addr not in [m.endpoint for m in store.etcd.order()]
        written = store.put("/d/not-on-the-stray", b"v")
        assert written.succeeded
        assert _raw_get(cluster.members[0].addr, b"/d/not-on-the-stray") == b"v"
        assert _raw_get(stray.addr, b"/d/not-on-the-stray") is None
        events = [e.kv.key for batch in store.watch("/d/", written.revision,
                                                     until=written.revision)
                  for e in batch.events]
        assert events == ["/d/not-on-the-stray"]
    finally:
        store.close()


def _raw_get(addr: str, key: bytes) -> bytes | None:
    import grpc
    from tidemq.etcd import rpc_pb2, rpc_pb2_grpc

    with grpc.insecure_channel(addr) as channel:
        reply = rpc_pb2_grpc.KVStub(channel).Range(rpc_pb2.RangeRequest(key=key), timeout=5)
    return reply.kvs[0].value if reply.kvs else None


def _etcd_status_lines(cluster) -> list[str]:
    """`make status`'s etcd section, with the default topology's etcd-1..3 at `cluster`'s
    members."""
    import yaml

    from deploy.etcd_cluster import status_lines
    from deploy.topology import TOPOLOGY_FILE, Placement, parse

    topology = parse(yaml.safe_load(TOPOLOGY_FILE.read_text()))
    placement = Placement(port_overrides={
        f"{service.name}.client": member.client_port
        for service, member in zip(topology.etcd_members(), cluster.members, strict=True)})
    return status_lines(topology, placement)


def _status_lines(addr: str) -> list[str]:
    """`make status`'s config-center lines, with config-center-1 at `addr` (and -2 down)."""
    import yaml

    from deploy.local import config_center_lines
    from deploy.topology import TOPOLOGY_FILE, Placement, parse

    topology = parse(yaml.safe_load(TOPOLOGY_FILE.read_text()))
    first, second = topology.members("config-center")[:2]
    port = int(addr.rpartition(":")[2])
    placement = Placement(port_overrides={f"{first.name}.grpc": port,
                                          f"{second.name}.grpc": free_port()})
    return config_center_lines(topology, placement, timeout=5)
