"""In sync means this copy of the data (issue #36): the operations sequence that lost most of
a group's acknowledged messages. One slave stopped for maintenance (the in-sync set shrinks to
master + the other slave, writes go on); the other slave's disk replaced (killed, its store
deleted, restarted at once); the master's machine lost (SIGKILL, kept down). The replica back
with an empty log must not be elected: the group has no master while only it is up, and once
the old master (a complete copy) returns the group has a master again, every acknowledged
message is readable from it and the replaced replica catches up to the same log. Before
incarnations the controller elected the wiped replica at the next epoch, still "in sync", and
the returning replicas truncated to its empty log: the test watches every state the controller
writes and every role the wiped replica reports while it is the only replica up, so on that
code it fails naming the epoch the wiped replica was elected at. Once the old master is back
it leads at the epoch it returned to until the end: no election follows (once an event about
its previous process — a slave's last report of the dead master, probes refused at its
address before the new process listened — fenced the returned master out, and the caught-up
replica was elected)."""

from __future__ import annotations

import os
import shutil
import signal

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
from tests.support.processes import wait_until

LAG = ["--replica-lag-max-ms", "1500"]


def live_lease(cluster, replica: int) -> int | None:
    with ConfigClient(cluster.config_center.addr) as client:
        kv = client.get(live_key(GROUP, replica))
    return kv.lease if kv else None


def test_a_replica_back_with_a_wiped_disk_is_never_elected(cluster):
    group = start_group(cluster, extra=LAG)
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    stopped, wiped = (r for r in range(3) if r != master)
    acked = produce(cluster, 0, 200)

    group.replicas[stopped].stop()                        # maintenance
    wait_in_sync(cluster, {master, wiped})
    acked |= produce(cluster, 200, 200)                   # writes go on

    with GroupObserver(cluster, group) as observer:
        # The master's machine fails (frozen first, so the replaced replica cannot copy
        # anything from it: on loopback it would catch up in milliseconds, in production not
        # for minutes).
        os.kill(group.replicas[master].proc.pid, signal.SIGSTOP)
        observer.never_master(wiped)
        old_lease = live_lease(cluster, wiped)
        group.replicas[wiped].kill()                      # disk replaced
        shutil.rmtree(group.replicas[wiped].workdir / "data" / "store")
        group.replicas[wiped].restart()
        wait_until(lambda: live_lease(cluster, wiped) not in (None, old_lease), 30,
                   interval=0.05, message="the wiped replica's new live key")
        group.replicas[master].kill()                     # and is lost

        # Only the wiped replica is up: it is never master, the group waits and says for whom.
        # (observer.check() first: on code that elects the wiped replica this fails at once,
        # naming the epoch, instead of timing out)
        wait_until(lambda: observer.check() and (state := group_state(cluster)) is not None
                   and master in state.get("waiting_for", ()), 30, interval=0.1,
                   message="the group waiting for the lost master")
        state = group_state(cluster)
        assert state["master"] != wiped and wiped not in state["in_sync"], state
        info = group.broker_info(wiped)
        assert info is not None and info.role == "SLAVE"

        observer.check()   # never master while it was the only replica up

    # The old master (a complete copy) and the stopped slave return: the old master leads
    # again, copies the replaced replica back, and stays master. What the controller learnt of
    # the old master's previous process (its slaves' last reports of a dead master, refused
    # probes at its address) is about another incarnation and never fences the new one out.
    group.replicas[master].restart()
    group.replicas[stopped].restart()
    assert group.wait_master(timeout=60) == master
    with GroupObserver(cluster, group) as after:
        state = group_state(cluster)
        assert state["master"] == master, state
        epoch = state["epoch"]
        wait_in_sync(cluster, {0, 1, 2}, timeout=60)
        assert group.master() == master
        found = read_all(group.replicas[master].addr)
        lost = {key for key, body in acked.items() if found.get(key) != body}
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost"
        # and the replaced replica serves the same log once caught up
        wait_until(lambda: read_all(group.replicas[wiped].addr) == found, 60, interval=0.2,
                   message="the wiped replica caught up")
        assert group.master() == master
        state = group_state(cluster)
        assert state["master"] == master and state["epoch"] == epoch, state
        moved = [(revision, written) for revision, written in list(after.states)
                 if written["master"] != master or written["epoch"] != epoch]
        assert not moved, f"spurious election after the old master's return: {moved}"
