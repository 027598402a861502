"""The topology's replica-group option: `replication.replicas: 3` turns each broker group into
three brokers of one broker name, rendered for supervisord and compose alike."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from deploy.render import render_compose, render_supervisor, service_argv
from deploy.topology import TOPOLOGY_FILE, Placement, TopologyError, parse


def topology(**replication):
    data = yaml.safe_load(TOPOLOGY_FILE.read_text())
    data["replication"] = {**data.get("replication", {}), **replication}
    return parse(copy.deepcopy(data))


def flag(argv: list[str], name: str) -> str:
    return argv[len(argv) - 1 - argv[::-1].index(name) + 1]


def test_one_replica_is_todays_single_broker_per_group():
    services = topology(replicas=1).services
    assert [n for n in services if n.startswith("broker-")] == ["broker-a", "broker-b"]
    argv = service_argv(services["broker-a"], topology(replicas=1), Placement(), data_dir="/d")
    assert "--replication-enabled" not in argv and "ha" not in services["broker-a"].ports


def test_three_replicas_per_group_with_sync_master_and_two_in_sync():
    topo = topology(replicas=3)
    names = [n for n in topo.services if n.startswith("broker-")]
    assert names == ["broker-a", "broker-a-1", "broker-a-2", "broker-b", "broker-b-1",
                     "broker-b-2"]
    for replica, name in enumerate(["broker-a", "broker-a-1", "broker-a-2"]):
        argv = service_argv(topo.services[name], topo, Placement(port_offset=500),
                            data_dir="/d")
        assert flag(argv, "--broker-name") == "broker-a"
        assert flag(argv, "--broker-id") == str(replica)
        assert flag(argv, "--broker-role") == "SYNC_MASTER"
        assert flag(argv, "--min-in-sync-replicas") == "2"
        assert flag(argv, "--replication-enabled") == "true"
        assert flag(argv, "--port") == str(10911 + 500 + replica * 100)
        assert flag(argv, "--ha-port") == str(10912 + 500 + replica * 100)
    compose = yaml.safe_load(render_compose(topo))["services"]
    assert compose["broker-a-2"]["command"][compose["broker-a-2"]["command"].index(
        "--advertised-host") + 1] == "broker-a-2"
    conf = render_supervisor(topo, Placement(), run_dir=Path("/r"), data_dir=Path("/d"))
    assert "[program:broker-b-2]" in conf


def test_bad_replication_options_are_refused():
    with pytest.raises(TopologyError):
        topology(replicas=3, min_in_sync_replicas=4)
    with pytest.raises(TopologyError):
        topology(replicas=0)
