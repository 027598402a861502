"""The topology file: structure, dependency order, addresses under both placements."""

from __future__ import annotations

import pytest

from deploy.topology import Placement, TopologyError, expand, load, parse


def _minimal(**services) -> dict:
    return {"images": {"x": {"dockerfile_dir": "x", "package": "p"}}, "services": services}


def _svc(ports, **extra) -> dict:
    return {"image": "x", "module": "m", "ports": ports, "health": {"kind": "grpc"}, **extra}


def test_committed_topology_loads_and_orders_dependencies_first():
    topology = load()
    seen: set[str] = set()
    for tier in topology.start_order():
        for service in tier:
            assert set(service.depends_on) <= seen, service.name
        seen |= {s.name for s in tier}
    assert seen == set(topology.services)


def test_walking_skeleton_services_and_ports():
    services = load(replicas=1, etcd="single").services
    assert {n: s.ports[s.main_port] for n, s in services.items()} == {
        "etcd-1": 2379, "redis": 6379, "trace-collector": 4317, "config-center-1": 7070,
        "config-center-2": 7071, "namesrv-1": 9876, "namesrv-2": 9877, "broker-a-0": 10911,
        "broker-b-0": 10921, "gateway-http": 8080, "gateway-grpc": 8081, "gateway-kafka": 9092,
        "gateway-kafka-2": 9093,
    }  # fmt: skip
    assert services["trace-collector"].ports["http"] == 16686


def test_by_default_the_control_plane_runs_three_etcd_members_and_two_config_centers():
    services = load().services
    assert {n: s.ports for n, s in services.items()
            if n.startswith(("etcd", "redis", "sentinel", "config-center"))} == {
        "etcd-1": {"client": 2379, "peer": 2380}, "etcd-2": {"client": 2381, "peer": 2382},
        "etcd-3": {"client": 2383, "peer": 2384}, "redis": {"redis": 6379},
        "config-center-1": {"grpc": 7070, "metrics": 17070},
        "config-center-2": {"grpc": 7071, "metrics": 17071},
    }  # fmt: skip


def test_by_default_each_broker_group_runs_three_replicas():
    services = load().services
    assert {n: s.ports[s.main_port] for n, s in services.items() if n.startswith("broker")} == {
        "broker-a-0": 10911, "broker-a-1": 11011, "broker-a-2": 11111,
        "broker-b-0": 10921, "broker-b-1": 11021, "broker-b-2": 11121,
    }  # fmt: skip


def test_local_placement_shifts_every_port_and_overrides_win():
    broker = load().services["broker-a-0"]
    placement = Placement(port_offset=1000, port_overrides={"broker-a-0.metrics": 5})
    assert placement.addr(broker) == "127.0.0.1:11911"
    assert placement.port(broker, "metrics") == 5


def test_compose_placement_uses_service_names_and_unshifted_ports():
    broker = load().services["broker-a-0"]
    assert Placement(compose=True, port_offset=1000).addr(broker) == "broker-a-0:10911"


def test_expand_resolves_addresses_of_other_services():
    topology = load()
    broker = topology.services["broker-a-0"]
    text = "{addr:namesrv-1};{addr:namesrv-2} {port:metrics} {port:trace-collector:http}"
    assert expand(text, broker, topology, Placement(port_offset=1)) == (
        "127.0.0.1:9877;127.0.0.1:9878 20912 16687"
    )
    with pytest.raises(TopologyError, match="names no service"):
        expand("{addr:nobody}", broker, topology, Placement())


def test_unknown_dependency_cycle_and_duplicate_port_are_rejected():
    with pytest.raises(TopologyError, match="unknown"):
        parse(_minimal(a=_svc({"grpc": 1, "metrics": 2}, depends_on=["b"])))
    with pytest.raises(TopologyError, match="cycle"):
        parse(_minimal(
            a=_svc({"grpc": 1, "metrics": 2}, depends_on=["b"]),
            b=_svc({"grpc": 3, "metrics": 4}, depends_on=["a"]),
        ))  # fmt: skip
    with pytest.raises(TopologyError, match="port 1 used by both"):
        parse(_minimal(a=_svc({"grpc": 1, "metrics": 2}), b=_svc({"grpc": 1, "metrics": 4})))


def test_a_tidemq_service_needs_a_metrics_port_and_a_health_probe():
    with pytest.raises(TopologyError, match="metrics"):
        parse(_minimal(a=_svc({"grpc": 1})))
    with pytest.raises(TopologyError, match="health"):
        parse(_minimal(a={**_svc({"grpc": 1, "metrics": 2}), "health": {"kind": "icmp"}}))


def test_published_port_environment_names():
    services = load().services
    assert services["gateway-http"].env_name("http") == "TIDEMQ_GATEWAY_HTTP_PORT"
    assert services["trace-collector"].env_name("http") == "TIDEMQ_TRACE_COLLECTOR_HTTP_PORT"
