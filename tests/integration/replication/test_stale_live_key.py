"""A live key outlives its process (issue #36, found under load by test_wiped_replica): the
master is frozen, then the only other in-sync replica is killed and its disk wiped while its
old live key — still valid for its lease TTL, still showing the incarnation that held the
copy — is left behind. Made deterministic here: the killed replica's lease is much longer than
the master's, and it is restarted (with its empty store) only after the controller has
handled the master's loss.

Before proof of life the controller elected the killed replica from its old key; its new,
empty process then left the in-sync set, which the election had already emptied of the old
master: the group waited "for replica(s) []" and only an unclean election could end it, even
with the complete old master back. Now the old key elects nobody (it is never rewritten after
the loss), the group waits for the old master, and when that master returns it leads again
with every acknowledged message."""

from __future__ import annotations

import shutil

from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import live_key

from tests.integration.replication.replica_group import (
    GROUP,
    GroupObserver,
    group_state,
    produce,
    read_all,
    start_group,
    wait_in_sync,
)
from tests.support.processes import freeze, wait_until

LAG = ["--replica-lag-max-ms", "1500"]
KILLED_LEASE_S = "15"   # the killed replica's old key outlives the master's (2 s) by far
PENDING = "electing once an in-sync replica proves it is alive"


def live_lease(cluster, replica: int) -> int | None:
    with ConfigClient(cluster.config_center.addr) as client:
        kv = client.get(live_key(GROUP, replica))
    return kv.lease if kv else None


def controller_saw_the_loss(cluster) -> bool:
    return any(PENDING in server.log.read_text(errors="replace")
               for server in cluster.namesrvs)


def test_a_killed_replicas_old_live_key_never_elects_it(cluster):
    group = start_group(cluster, extra=LAG)
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    killed, stopped = (r for r in (2, 1, 0) if r != master)
    # The slave to be killed runs with a long lease: its old key will outlive the master's.
    group.replicas[killed].stop()
    group.replicas[killed].args += ["--broker-lease-ttl-s", KILLED_LEASE_S]
    group.replicas[killed].restart()
    wait_in_sync(cluster, {0, 1, 2})
    assert group.master() == master
    acked = produce(cluster, 0, 200)

    group.replicas[stopped].stop()                         # maintenance: the set is {M, K}
    wait_in_sync(cluster, {master, killed})
    acked |= produce(cluster, 200, 200)

    with GroupObserver(cluster, group) as observer:
        observer.never_master(killed)
        freeze(group.replicas[master].proc.pid)            # the master freezes ...
        old_lease = live_lease(cluster, killed)
        group.replicas[killed].kill()                      # ... a slave dies, disk lost
        shutil.rmtree(group.replicas[killed].workdir / "data" / "store")

        # The master's key expires (2 s lease) while the killed replica's stays (15 s). On
        # code without proof of life the controller elects the killed replica here and
        # observer.check() fails at once, naming the epoch.
        wait_until(lambda: observer.check() and live_lease(cluster, master) is None, 30,
                   interval=0.05, message="the frozen master's live key to expire")
        wait_until(lambda: observer.check() and controller_saw_the_loss(cluster), 30,
                   interval=0.05, message="the controller to handle the master's loss")
        assert live_lease(cluster, killed) == old_lease, "the window was not exercised"
        state = group_state(cluster)
        assert state["master"] == master and set(state["in_sync"]) == {master, killed}, state

        # The replaced disk's replica starts (its old key dropped, a new store id): it leaves
        # the set, and the group waits for the old master — not for nobody.
        group.replicas[killed].restart()
        wait_until(lambda: observer.check() and (s := group_state(cluster)) is not None
                   and s["waiting_for"] == [master], 30, interval=0.1,
                   message="the group waiting for the frozen master")
        state = group_state(cluster)
        assert killed not in state["in_sync"] and state["master"] != killed, state
        info = group.broker_info(killed)
        assert info is not None and info.role == "SLAVE"

        # The old master's machine comes back (a restart over its complete store; resumed
        # instead, it would feed the replaced replica, which could then be elected rightly):
        # it leads again.
        group.replicas[master].kill()
        group.replicas[master].restart()
        group.replicas[stopped].restart()
        wait_until(lambda: observer.check() and group.master() == master, 60, interval=0.2,
                   message="the old master leading again")
        wait_in_sync(cluster, {0, 1, 2}, timeout=60)
        found = read_all(group.replicas[master].addr)
        lost = {key for key, body in acked.items() if found.get(key) != body}
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost"
        wait_until(lambda: read_all(group.replicas[killed].addr) == found, 60, interval=0.2,
                   message="the replaced replica caught up")
        observer.check()
