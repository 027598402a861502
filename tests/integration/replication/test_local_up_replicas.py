"""`make up REPLICAS=3` for real: the topology with every broker group as three replicas
(SYNC_MASTER, min_in_sync_replicas 2) under supervisord; each group gets a master, sends are
acknowledged by the in-sync replicas, and SIGKILL of a master is answered by an election
while a producer keeps sending (and supervisord restarts the victim as a slave)."""

from __future__ import annotations

import os
import signal

import pytest
from tidemq.client import Message, Producer, SendStatus
from tidemq.client.admin import Admin

from deploy.health import probe
from deploy.local import LocalDeployment, free_port_offset
from deploy.topology import load
from tests.support.processes import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def test_replica_groups_come_up_and_fail_over(tmp_path):
    topology = load(replicas=3)
    deployment = LocalDeployment(data_dir=tmp_path, port_offset=free_port_offset(topology),
                                 topology=topology)
    placement = deployment.placement
    namesrv = ";".join(placement.addr(topology.services[n]) for n in ("namesrv-1", "namesrv-2"))
    config_center = placement.addr(topology.services["config-center"])
    try:
        try:
            deployment.up(timeout=180, progress=print)
        except Exception as exc:
            name = getattr(getattr(exc, "service", None), "name", None)
            raise AssertionError(f"{exc}\n{deployment.tail(name, 60) if name else ''}") from exc
        for service in topology.services.values():
            assert probe(service, placement)[0], service.name

        def masters() -> dict[str, str]:
            with Admin(namesrv, config_center=config_center) as admin:
                entries = admin.cluster_info()
            return {b.broker_name: b.addr for b in entries if b.broker_id == 0
                    and sum(e.broker_name == b.broker_name and e.in_sync for e in entries) >= 2}

        wait_until(lambda: len(masters()) == 2, 60, interval=0.2,
                   message="both groups have a master with 2 in sync")
        with Admin(namesrv, config_center=config_center) as admin:
            admin.create_topic("replicated", queues=2)
        with Producer(namesrv, send_timeout=30) as producer:
            assert producer.send(Message("replicated", b"one")).status is SendStatus.SEND_OK
            victim_addr = masters()["broker-a"]
            victim = next(s.name for s in topology.services.values()
                          if s.module and placement.addr(s) == victim_addr)
            os.kill(deployment.pid(victim), signal.SIGKILL)
            sent = [producer.send(Message("replicated", f"after-{i}".encode()))
                    for i in range(20)]  # rides through the election
            assert all(r.status is SendStatus.SEND_OK for r in sent)
        wait_until(lambda: masters().get("broker-a") not in (None, victim_addr), 60, interval=0.2,
                   message="broker-a has a new master")
        wait_until(lambda: probe(topology.services[victim], placement)[0], 60, interval=0.2,
                   message=f"{victim} restarted by supervisord")
    finally:
        deployment.down()
    assert deployment.supervisord_pid() is None
