"""`tidemq cluster control-plane` without a cluster: tables, JSON and the error line, over a
ConfigClient stand-in with fixed answers (tests/integration/configcenter/test_describe_store.py
has the same report from real processes)."""

from __future__ import annotations

import json

import pytest
from tidemq.client import cli
from tidemq.common import errors
from tidemq.configclient import client, controlplane
from tidemq.configclient.controlplane import (
    InstanceStatus,
    RedisNode,
    SentinelView,
    StoreDescription,
)
from typer.testing import CliRunner

MASTER, REPLICA, GONE = "10.0.0.5:6379", "10.0.0.6:6379", "10.0.0.7:6379"
STORE = StoreDescription(
    "cc-1:7070", "0.1.0", "redis master 'tidemq' (db 0) via sentinels s1:26379,s2:26379", True,
    "tidemq",
    [RedisNode(MASTER, "master", True, "", 5120, None, "", "", 2),
     RedisNode(REPLICA, "replica", True, "", 5000, 120, "up", MASTER, 0),
     RedisNode(GONE, "", False, "ConnectionError: Connection refused", 0, None, "", "", 0)],
    [SentinelView("s1:26379", True, "", MASTER, False, "master", 1, 2),
     SentinelView("s2:26379", False, "TimeoutError: Timeout connecting to server", "", False,
                  "", 0, 0)])


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


def test_json_has_every_instance_node_and_sentinel(run):
    report = json.loads(run("cluster", "control-plane", "-o", "json").stdout)
    assert StubConfigClient.addrs == "cc-1:7070,cc-2:7071"
    assert [(c["address"], c["reachable"]) for c in report["config_centers"]] == [
        ("cc-1:7070", True), ("cc-2:7071", False)]
    store = report["store"]
    assert store["reported_by"] == "cc-1:7070" and store["master_name"] == "tidemq"
    assert [(n["address"], n["role"], n["reachable"], n["lag_bytes"]) for n in store["nodes"]] \
        == [(MASTER, "master", True, None), (REPLICA, "replica", True, 120),
            (GONE, "", False, None)]
    assert [(s["address"], s["reachable"], s["master_address"]) for s in store["sentinels"]] \
        == [("s1:26379", True, MASTER), ("s2:26379", False, "")]


def test_tables_show_roles_lag_and_the_sentinels_view(run):
    text = run("cluster", "control-plane").stdout
    assert "Config centers" in text and "Redis nodes (as cc-1:7070 sees them)" in text
    assert "Sentinels (master 'tidemq')" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert "master" in rows[MASTER] and "replica" in rows[REPLICA] and "120" in rows[REPLICA]
    assert " no " in rows[GONE] and " no " in rows["cc-2:7071"] and " no " in rows["s2:26379"]
    assert "  10.0.0.7:6379: ConnectionError: Connection refused" in text
    table_lines = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert max(len(line) for line in table_lines) <= 80, text
    assert "left out repl offset, follows" in text and "left out flags, quorum" in text


def test_a_single_redis_says_there_are_no_sentinels(run):
    plain = StoreDescription("cc-1:7070", "0.1.0", "redis 127.0.0.1:6379/0", False, "",
                             [RedisNode("127.0.0.1:6379", "master", True, "", 7, None, "", "",
                                        0)], [])
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=plain)]
    text = run("cluster", "control-plane").stdout
    assert "no Sentinels: the store is one Redis (redis 127.0.0.1:6379/0)" in text


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


def test_instances_that_store_in_different_redis_are_called_out(run):
    elsewhere = StoreDescription("cc-2:7071", "0.1.0", "redis 10.9.9.9:6379/0", False, "", [], [])
    StubConfigClient.instances = [InstanceStatus("cc-1:7070", True, store=STORE),
                                  InstanceStatus("cc-2:7071", True, store=elsewhere)]
    text = run("cluster", "control-plane").stdout
    assert f"store: {STORE.target}" in text
    assert "cc-2:7071 stores elsewhere: redis 10.9.9.9:6379/0" in text
