"""Epoch fencing when the config store loses the controller's state (a restore from an old
backup, a single Redis that crashed before its last fsync): the replicas still know the epoch
they served under, and the controller starts the group again above it — never granting an
epoch twice — with the most complete replica, and the group takes writes again.
"""

from __future__ import annotations

import pytest
from tidemq.client import Message, Producer, SendStatus
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    group_state,
    start_group,
    wait_in_sync,
)
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_a_group_whose_state_the_store_lost_restarts_above_every_replica_epoch(cluster):
    group = start_group(cluster)
    wait_in_sync(cluster, {0, 1, 2})
    old = group.wait_master()
    group.replicas[old].kill()
    group.wait_master(tuple(r for r in range(3) if r != old), timeout=30)
    group.replicas[old].restart()
    wait_in_sync(cluster, {0, 1, 2}, timeout=60)
    granted = group_state(cluster)["epoch"]
    assert granted >= 2

    with ConfigClient(cluster.config_center.addr) as client:
        client.delete(group_key(GROUP))   # the store forgets every election

    wait_until(lambda: (state := group_state(cluster)) is not None
               and state["epoch"] > granted, 30, interval=0.1,
               message=f"the group started again above epoch {granted}")
    epoch = group_state(cluster)["epoch"]
    master = group.wait_master(timeout=30)
    assert group.broker_info(master).epoch == epoch
    with Producer(cluster.namesrv_addrs, route_refresh_s=1.0) as producer:
        result = wait_until(lambda: _send(producer), 30, interval=0.2,
                            message="an acknowledged send on the restarted group")
    assert result.status is SendStatus.SEND_OK


def _send(producer):
    from tidemq.common.errors import TideMQError

    try:
        result = producer.send(Message(TOPIC, b"after the store forgot"))
    except TideMQError:
        return None
    return result if result.status is SendStatus.SEND_OK else None
