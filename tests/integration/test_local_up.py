"""`make up` for real: the default topology (every broker group three replicas, SYNC_MASTER,
min_in_sync_replicas 2; three etcd members; two config centers; one Redis for the gateway)
under supervisord on shifted ports and a temporary data dir (so it runs beside a developer's
`make up`). Every service is healthy and serves the dashboards' metrics (and, with Debian's
prometheus installed, the supervised Prometheus of `make up OBSERVABILITY=1` scrapes them all);
each group gets a master with two in-sync replicas; SIGKILL of a master is answered by an
election while a producer keeps sending, and supervisord restarts the victim. SIGKILL of the
etcd leader is answered by a raft election: config reads and writes go on through the config
centers, and the restarted member rejoins and catches up."""

from __future__ import annotations

import os
import signal

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from tidemq.client import Message, Producer, SendStatus
from tidemq.client.admin import Admin
from tidemq.common.errors import TideMQError
from tidemq.configclient.client import ConfigClient

from deploy.etcd_cluster import observe
from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset, local_topology
from deploy.observability import PROFILE, dashboard_files, dashboard_metric_names, scrape_targets
from tests.support.processes import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


_SAMPLE_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def _check_scrape_targets_serve_the_dashboards_metrics(deployment: LocalDeployment) -> None:
    """Every target of the rendered Prometheus config answers /metrics in the text format, and
    every metric a dashboard queries is exported by some service (labelled counters with no
    sample yet still announce their family)."""
    exported: set[str] = set()
    targets = scrape_targets(deployment.prometheus_file.read_text())
    assert {service for service, _ in targets} == {
        s.name for s in deployment.topology.services.values() if s.module
    }
    for service, target in targets:
        reply = requests.get(f"http://{target}/metrics", timeout=10)
        assert reply.status_code == 200, f"{service}: {reply.status_code}"
        for family in text_string_to_metric_families(reply.text):
            exported.add(family.name)
            exported.update(sample.name for sample in family.samples)
    assert dashboard_files()
    for dashboard in dashboard_files():
        missing = {
            name for name in dashboard_metric_names(dashboard)
            if name not in exported and name.removesuffix(
                next((x for x in _SAMPLE_SUFFIXES if name.endswith(x)), "")) not in exported
        }  # fmt: skip
        assert not missing, f"{dashboard.name} queries metrics no service exports: {missing}"


def _check_prometheus_scrapes_every_target(deployment: LocalDeployment) -> None:
    """`make up OBSERVABILITY=1`: the supervised Prometheus finds every target up."""
    prometheus = deployment.topology.services["prometheus"]
    url = f"http://127.0.0.1:{deployment.placement.port(prometheus, 'http')}/api/v1/query"
    expected = sorted(s.name for s in deployment.topology.services.values() if s.module)

    def all_up() -> bool:
        result = requests.get(url, params={"query": "up == 1"}, timeout=10).json()
        return sorted(r["metric"]["service"] for r in result["data"]["result"]) == expected

    wait_until(all_up, 60, interval=0.5, message="Prometheus scraping every service")


def _check_etcd_leader_failover(deployment: LocalDeployment, config_center: str) -> None:
    """SIGKILL of the etcd leader: the other two elect a leader, the config centers keep
    answering (nothing acknowledged lost), supervisord restarts the member and it catches up."""
    def cluster():
        return observe(deployment.topology, deployment.placement)

    def written(config: ConfigClient, value: str) -> bool:
        try:
            return config.put("/tidemq/test/etcd-failover", value).succeeded
        except TideMQError:  # UNAVAILABLE while the members elect a leader
            return False

    first = wait_until(lambda: (state := cluster()).leader and state, 30, interval=0.2,
                       message="the members to agree on a leader")
    victim = first.leader
    term = max(m.raft_term for m in first.members if m.reachable)
    with ConfigClient(config_center) as config:
        assert written(config, "before")
        first_pid = deployment.pid(victim)
        os.kill(first_pid, signal.SIGKILL)
        wait_until(lambda: (state := cluster()).leader and
                   max(m.raft_term for m in state.members if m.reachable) > term, 60,
                   interval=0.2, message="a leader elected in a later term")
        assert config.get("/tidemq/test/etcd-failover").value == b"before"
        wait_until(lambda: written(config, "after"), 60, interval=0.2,
                   message="config writes after the election")
        assert config.get("/tidemq/test/etcd-failover").value == b"after"
    wait_until(lambda: deployment.pid(victim) not in (None, first_pid), 60, interval=0.2,
               message=f"supervisord did not restart {victim}")
    wait_until(lambda: (state := cluster()).leader and
               all(m.reachable and state.lag(m) == 0 for m in state.members), 60,
               interval=0.2, message=f"{victim} to rejoin and catch up")


def test_local_topology_comes_up_and_fails_over(tmp_path):
    # with the observability profile: Prometheus too, when Debian's package is installed
    topology, skipped = local_topology(profiles=(PROFILE,))
    print(f"not started: {skipped}")
    deployment = LocalDeployment(
        data_dir=tmp_path, port_offset=free_port_offset(topology), topology=topology
    )
    placement = deployment.placement
    namesrv = ";".join(placement.addr(topology.services[n]) for n in ("namesrv-1", "namesrv-2"))
    config_center = ",".join(placement.addr(s) for s in topology.members("config-center"))
    try:
        try:
            deployment.up(timeout=180, progress=print)
        except Exception as exc:
            name = getattr(getattr(exc, "service", None), "name", None)
            tail = deployment.tail(name, 60) if name else ""
            raise AssertionError(f"{exc}\n{tail}") from exc
        for service in topology.services.values():
            assert probe(service, placement)[0], service.name
        _check_scrape_targets_serve_the_dashboards_metrics(deployment)
        if "prometheus" in topology.services:
            _check_prometheus_scrapes_every_target(deployment)

        def masters() -> dict[str, str]:
            with Admin(namesrv, config_center=config_center) as admin:
                entries = admin.cluster_info()
            return {b.broker_name: b.addr for b in entries if b.broker_id == 0
                    and sum(e.broker_name == b.broker_name and e.in_sync for e in entries) >= 2}

        wait_until(lambda: len(masters()) == 2, 60, interval=0.2,
                   message="both groups have a master with 2 in sync")
        # issue #41: every replica is the process <group>-<replica id>, ids 0..2 in each group
        # whichever replica won, and `cluster list`'s id is that replica id
        with Admin(namesrv, config_center=config_center) as admin:
            entries = admin.cluster_info()
        for group in ("broker-a", "broker-b"):
            assert [(b.id, b.addr) for b in entries if b.broker_name == group] == [
                (r, placement.addr(topology.services[f"{group}-{r}"])) for r in range(3)]
        with Admin(namesrv, config_center=config_center) as admin:
            admin.create_topic("replicated", queues=2)
        with Producer(namesrv, send_timeout=30) as producer:
            assert producer.send(Message("replicated", b"one")).status is SendStatus.SEND_OK
            victim_addr = masters()["broker-a"]
            victim = next(s.name for s in topology.members("broker-a")
                          if placement.addr(s) == victim_addr)
            first_pid = deployment.pid(victim)
            os.kill(first_pid, signal.SIGKILL)
            sent = [producer.send(Message("replicated", f"after-{i}".encode()))
                    for i in range(20)]  # rides through the election
            assert all(r.status is SendStatus.SEND_OK for r in sent)
        # broker-a has a master with two in sync again: another replica, elected, or — when
        # supervisord restarted the victim before the controller elected one (a restart takes
        # under half a second) — the victim's new process, back with the group's copy under
        # the same store id, leading again at its epoch (docs/replication.md, "Restarts")
        wait_until(lambda: deployment.pid(victim) not in (None, first_pid), 60, interval=0.2,
                   message=f"supervisord did not restart {victim}")
        wait_until(lambda: masters().get("broker-a") is not None, 60, interval=0.2,
                   message="broker-a has a master with two in sync again")
        wait_until(lambda: probe(topology.services[victim], placement)[0], 60, interval=0.2,
                   message=f"{victim} did not become healthy again")
        _check_etcd_leader_failover(deployment, config_center)
    finally:
        deployment.down()
    assert deployment.supervisord_pid() is None
