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
    assert [n for n in services if n.startswith("broker-")] == ["broker-a-0", "broker-b-0"]
    argv = service_argv(services["broker-a-0"], topology(replicas=1), Placement(),
                        data_dir="/d")
    assert "--replication-enabled" not in argv and "ha" not in services["broker-a-0"].ports
    assert flag(argv, "--broker-name") == "broker-a" and flag(argv, "--broker-id") == "0"
    assert services["broker-a-0"].ports["grpc"] == 10911  # unshifted: replica 0


def test_three_replicas_per_group_with_sync_master_and_two_in_sync():
    topo = topology(replicas=3)
    names = [n for n in topo.services if n.startswith("broker-")]
    assert names == ["broker-a-0", "broker-a-1", "broker-a-2", "broker-b-0", "broker-b-1",
                     "broker-b-2"]
    for replica, name in enumerate(["broker-a-0", "broker-a-1", "broker-a-2"]):
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


def _rendered_replicas(topo) -> dict[str, dict[str, str]]:
    """Per broker group (--broker-name), each rendered replica's service name -> --broker-id,
    read back from docker-compose.yml's commands and supervisord's programs (which must
    agree)."""
    import configparser
    import shlex

    compose = yaml.safe_load(render_compose(topo))["services"]
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(topo, Placement(), run_dir=Path("/r"),
                                         data_dir=Path("/d")))
    groups: dict[str, dict[str, str]] = {}
    for name, entry in compose.items():
        command = entry.get("command") or []
        if "tidemq.broker" not in command:
            continue
        program = shlex.split(config[f"program:{name}"]["command"])
        for argv in (command, program):
            assert flag(argv, "--advertised-host") in (name, "127.0.0.1")
        assert flag(program, "--broker-id") == flag(command, "--broker-id"), name
        assert flag(program, "--broker-name") == flag(command, "--broker-name"), name
        assert entry.get("volumes", [""])[0].startswith(f"{name}-data:"), name
        groups.setdefault(flag(command, "--broker-name"), {})[name] = flag(command, "--broker-id")
    return groups


@pytest.mark.parametrize("replicas", [1, 2, 3, 5])
def test_every_group_names_and_numbers_its_replicas_the_same_way(replicas):
    """Issue #41: a replica is `<group>-<replica id>` (never a role: any replica may be master,
    and the bare group name is no process), its --broker-id is that replica id, and the ids are
    0..n-1 in every group, in supervisord's programs and compose's services and volumes."""
    groups = _rendered_replicas(topology(replicas=replicas))
    assert sorted(groups) == ["broker-a", "broker-b"]
    for group, replicas_of in groups.items():
        assert replicas_of == {f"{group}-{r}": str(r) for r in range(replicas)}, group
    assert len({tuple(sorted(v.values())) for v in groups.values()}) == 1


def test_a_dependency_on_a_group_waits_for_every_replica():
    topo = topology(replicas=3)
    assert [d for d in topo.services["gateway-http"].depends_on if d.startswith("broker")] == [
        "broker-a-0", "broker-a-1", "broker-a-2", "broker-b-0", "broker-b-1", "broker-b-2"]
    assert [s.name for s in topo.members("broker-b")] == ["broker-b-0", "broker-b-1",
                                                          "broker-b-2"]


def test_make_logs_takes_a_replica_or_its_group():
    from deploy.local import log_names

    topo = topology(replicas=3)
    assert log_names(topo, "broker-a-1") == ["broker-a-1"]
    assert log_names(topo, "broker-a") == ["broker-a-0", "broker-a-1", "broker-a-2"]
    assert log_names(topo, "broker-c") is None
    assert log_names(topo, None) == list(topo.services)


def test_up_moves_replica_zeros_store_from_its_old_name(tmp_path):
    """Before issue #41 replica 0 ran as the group's name: its data directory follows it."""
    from deploy.local import LocalDeployment

    (tmp_path / "broker-a" / "store").mkdir(parents=True)
    (tmp_path / "broker-b-0").mkdir()
    (tmp_path / "broker-b").mkdir()   # both there: neither is touched
    LocalDeployment(data_dir=tmp_path, topology=topology(replicas=3)).adopt_legacy_data_dirs(
        progress=lambda _: None)
    assert (tmp_path / "broker-a-0" / "store").is_dir() and not (tmp_path / "broker-a").exists()
    assert (tmp_path / "broker-b").is_dir() and (tmp_path / "broker-b-0").is_dir()
