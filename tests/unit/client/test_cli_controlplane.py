"""`tidemq cluster control-plane` without a cluster: tables, JSON and the error line, over a
ConfigClient stand-in whose answers are built from hand-made DescribeStoreResponse messages
(tests/integration/configcenter has the report from real processes)."""

from __future__ import annotations

import json

import pytest
from tidemq.client import cli
from tidemq.common import errors
from tidemq.configclient import client, controlplane
from tidemq.configclient.controlplane import (
    EtcdMember,
    InstanceStatus,
    StoreDescription,
    store_from_pb,
)
from tidemq.v1 import config_pb2 as pb
from typer.testing import CliRunner

TARGET = "etcd 10.0.0.5:2379,10.0.0.6:2379,10.0.0.7:2379"


def describe(**changes) -> pb.DescribeStoreResponse:
    """A DescribeStoreResponse as the config center's servicer fills it: three members, the
    leader first, the third not answering."""
    reply = pb.DescribeStoreResponse(
        advertised_addr="cc-1:7070", version="0.1.0", target=TARGET, cluster_id="ec0d1",
        revision=4242, leader="etcd-2", members=[
            pb.EtcdMember(name="etcd-2", id="8a1", endpoint="http://10.0.0.6:2379",
                          reachable=True, leader=True, raft_term=7, raft_index=9001,
                          raft_applied_index=9001, lag_entries=0, db_size_bytes=3 << 20,
                          version="3.4.23"),
            pb.EtcdMember(name="etcd-1", id="14b", endpoint="http://10.0.0.5:2379",
                          reachable=True, raft_term=7, raft_index=9001,
                          raft_applied_index=8990, lag_entries=11, db_size_bytes=3 << 20,
                          version="3.4.23"),
            pb.EtcdMember(name="etcd-3", id="1a2", endpoint="http://10.0.0.7:2379",
                          reachable=False, error="context deadline exceeded")])
    for name, value in changes.items():
        setattr(reply, name, value)
    return reply


STORE = store_from_pb(describe())


class StubConfigClient:
    instances: list[InstanceStatus] = []
    addrs: str = ""

    def __init__(self, addrs, *, timeout):
        StubConfigClient.addrs = addrs

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def control_plane(self):
        return controlplane.control_plane(self.instances)


@pytest.fixture
def run(monkeypatch):
    monkeypatch.setattr(client, "ConfigClient", StubConfigClient)  # imported per command
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=STORE),
                                  InstanceStatus("cc-2:7071", False, "service unreachable")]

    def invoke(*args: str, expect: int = 0):
        result = CliRunner().invoke(cli.app, ["--config-center", "cc-1:7070,cc-2:7071", *args])
        assert result.exit_code == expect, (args, result.output)
        return result

    return invoke


def test_the_description_is_read_from_the_servicers_reply():
    leader, follower, gone = STORE.members
    assert (STORE.leader, STORE.revision, STORE.cluster_id, STORE.quorum) == \
        ("etcd-2", 4242, "ec0d1", 2)
    assert (leader.name, leader.leader, leader.lag_entries) == ("etcd-2", True, 0)
    assert (follower.leader, follower.lag_entries, follower.raft_applied_index) == \
        (False, 11, 8990)
    assert (gone.reachable, gone.lag_entries, gone.error) == \
        (False, None, "context deadline exceeded")   # lag unset: unknown, not 0


def test_json_has_every_instance_and_member(run):
    report = json.loads(run("cluster", "control-plane", "-o", "json").stdout)
    assert StubConfigClient.addrs == "cc-1:7070,cc-2:7071"
    assert [(c["address"], c["reachable"]) for c in report["config_centers"]] == [
        ("cc-1:7070", True), ("cc-2:7071", False)]
    store = report["store"]
    assert {k: store[k] for k in ("reported_by", "leader", "revision", "quorum", "target")} == \
        {"reported_by": "cc-1:7070", "leader": "etcd-2", "revision": 4242, "quorum": 2,
         "target": TARGET}
    assert [(m["name"], m["reachable"], m["leader"], m["lag_entries"], m["raft_term"])
            for m in store["members"]] == [("etcd-2", True, True, 0, 7),
                                           ("etcd-1", True, False, 11, 7),
                                           ("etcd-3", False, False, None, 0)]


def test_tables_show_the_leader_term_index_and_lag_of_each_member(run):
    text = run("cluster", "control-plane").stdout
    assert "Config centers" in text
    assert "etcd members (as cc-1:7070 sees them; leader etcd-2, revision 4242)" in \
        " ".join(text.split())
    rows = {line.split("│")[1].strip(): line for line in text.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert "leader" in rows["etcd-2"] and "9001" in rows["etcd-2"]
    assert "follower" in rows["etcd-1"] and " 11 " in rows["etcd-1"]
    assert " no " in rows["etcd-3"] and " no " in rows["cc-2:7071"]
    assert "  etcd-3: context deadline exceeded" in text
    assert "2 of 3 members answer (quorum 2): losing one more stops writes" in text
    table_lines = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert max(len(line) for line in table_lines) <= 80, text


def test_a_cluster_without_a_leader_says_writes_wait(run):
    reply = describe(leader="")
    for member in reply.members:
        member.leader = False
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=store_from_pb(reply))]
    text = " ".join(run("cluster", "control-plane").stdout.split())
    assert "NO LEADER: no quorum, writes wait" in text


def test_one_member_says_there_is_no_fault_tolerance(run):
    single = StoreDescription("cc-1:7070", "0.1.0", "etcd 127.0.0.1:2379", "ec0d1", 3,
                              "etcd-1", [EtcdMember("etcd-1", "1", "http://127.0.0.1:2379",
                                                    True, "", True, 2, 9, 9, 0, 20480,
                                                    "3.4.23", False, [])])
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=single)]
    text = run("cluster", "control-plane").stdout
    assert "one member: the store has no fault tolerance" in text


def test_an_alarm_is_called_out(run):
    reply = describe()
    reply.members[1].alarms.append("NOSPACE")
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=store_from_pb(reply))]
    assert "etcd-1: alarm NOSPACE" in run("cluster", "control-plane").stdout


def test_no_instance_answering_is_one_line_and_status_1(run):
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", False, "down"),
                                  InstanceStatus("cc-2:7071", False, "down")]
    result = run("cluster", "control-plane", expect=1)
    assert result.stderr.strip() == ("error SERVICE_UNAVAILABLE: no config center answered "
                                     "(tried cc-1:7070, cc-2:7071)")
    assert result.stdout == ""


def test_an_instance_that_refuses_gives_its_error(run):
    denied = errors.PermissionDenied("user 'ops' may not DescribeStore")
    StubConfigClient.instances = [
        InstanceStatus("cc-1:7070", True, f"{denied.code}: {denied.message}", failure=denied),
        InstanceStatus("cc-2:7071", False, "down")]
    result = run("cluster", "control-plane", expect=1)
    assert result.stderr.strip() == "error PERMISSION_DENIED: user 'ops' may not DescribeStore"


def test_instances_that_store_in_different_clusters_are_called_out(run):
    elsewhere = store_from_pb(describe(advertised_addr="cc-2:7071",
                                       target="etcd 10.9.9.9:2379"))
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=STORE),
                                  InstanceStatus("cc-2:7071", True, store=elsewhere)]
    text = run("cluster", "control-plane").stdout
    assert f"store: {STORE.target}" in text
    assert "cc-2:7071 stores elsewhere: etcd 10.9.9.9:2379" in text
