"""Every fault the chaos suite can inflict, as one table: a row per kind.

A row names the kind, its weight in a random schedule, how long it is held (`Hold`), how it
is applied and how it is undone. `apply(group, rng)` inflicts it on a running ChaosGroup and
returns whatever `undo(group, target)` needs to take it back (the process it killed or
stopped, ...); `undo` must leave every process running again (restart, SIGCONT, heal). The
run holds the fault for the drawn time between the two and then polls, with a deadline,
until the group and the control plane are whole again.

Adding a fault = adding a row to FAULTS (a new `Hold` only if none of the ranges fits); the
schedule, the CI coverage rule (every kind at least once), the summary line and the unit
tests pick it up from here. This module imports no process machinery, so schedules stay
pure and unit-testable.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from tests.support.netns import PeerNetwork

if TYPE_CHECKING:
    from tests.chaos.group import ChaosGroup


QUICK_SHORT_S = 1.5


class Hold(Enum):
    """How long a fault lasts before it is undone (seconds, drawn uniformly)."""

    SHORT = "short"              # 0.2 s .. the broker lease
    PAST_LEASE = "past_lease"    # 1.3 .. 2 x the broker lease: the group elects meanwhile
    ELECTION = "election"        # 1.2 .. 2.5 s: just past etcd's 1 s election timeout
    DETECTION = "detection"      # 3.7 .. 4.6 s: just past a frozen master's detection
    WAIT = "wait"                # 2 .. 4 s: a killed master detected, the group seen waiting

    def bounds(self, lease_ttl_s: float, quick: bool = False) -> tuple[float, float]:
        """`quick` (the CI schedule): short holds up to QUICK_SHORT_S only; the others keep
        their range, which is what they test (past the lease, the election, detection)."""
        if self is Hold.SHORT:
            return 0.2, min(lease_ttl_s, QUICK_SHORT_S) if quick else lease_ttl_s
        if self is Hold.PAST_LEASE:
            return 1.3 * lease_ttl_s, 2.0 * lease_ttl_s
        if self is Hold.ELECTION:
            return 1.2, 2.5
        if self is Hold.WAIT:
            # A killed master is detected within about 1 s (the controller's probe every
            # 0.5 s, its slaves' report); past that the controller finds no eligible replica
            # and records whom the group waits for.
            return 2.0, 4.0
        # The controller fences a frozen master out once its last renewal is older than its
        # 3 s fence + 0.5 s margin, its probes have failed 1 s and its slaves heard nothing
        # for 2 s: about 3.6-4.1 s after the freeze (docs/replication.md, "Detecting a
        # failed master"). Held around that, some stalls are fenced out and some not.
        return 3.7, 4.6


@dataclass(frozen=True)
class FaultKind:
    name: str
    weight: int                  # relative frequency in a random schedule
    hold: Hold
    apply: Callable[[ChaosGroup, random.Random], Any]
    undo: Callable[[ChaosGroup, Any], None]
    plane: str                   # "broker", "disk" (a broker's store) or "store" (the config
                                 # center's): what it hits (docs, summaries)

    @property
    def held_past_lease(self) -> bool:
        return self.hold is Hold.PAST_LEASE


# -- brokers and name servers -----------------------------------------------------------------
def _kill_master(group: ChaosGroup, rng: random.Random):
    master = group.master()
    if master is not None:
        group.kill(master)
    return master


def _restart(group: ChaosGroup, replica) -> None:
    if replica is not None:
        group.restart(replica)


def _kill_slave(group: ChaosGroup, rng: random.Random):
    master = group.master()
    slaves = [r for r in group.replicas if r is not master and r.running]
    target = rng.choice(slaves) if slaves else master
    if target is not None:
        group.kill(target)
    return target


def _kill_controller(group: ChaosGroup, rng: random.Random):
    controller = group.controller() or group.namesrvs[0]
    controller.kill()
    return controller


def _start(group: ChaosGroup, process) -> None:
    process.start(timeout=60)   # same port: clients keep their address


def _pause_master(group: ChaosGroup, rng: random.Random):
    master = group.master()
    if master is not None:
        group.pause(master)
    return master


def _resume(group: ChaosGroup, replica) -> None:
    if replica is not None:
        group.resume(replica)


def _partition_master(group: ChaosGroup, rng: random.Random):
    master = group.master()
    if master is not None:
        group.partition(master)
    return master


def _heal(group: ChaosGroup, replica) -> None:
    if replica is not None:
        group.heal(replica)


def _kill_config_center(group: ChaosGroup, rng: random.Random):
    center = rng.choice(group.config_centers)
    center.kill()
    return center


def _kill_gateway_kafka(group: ChaosGroup, rng: random.Random):
    """One gateway-kafka instance SIGKILLed (no deregistration): Kafka clients move to the
    other; restarted on its port after the hold (tests.chaos.kafka_clients)."""
    running = [g for g in group.kafka_gateways if g.proc is not None and g.proc.poll() is None]
    target = rng.choice(running) if running else None
    if target is not None:
        target.kill()
    return target


def _start_gateway(group: ChaosGroup, gateway) -> None:
    if gateway is not None:
        gateway.start(timeout=60)


# -- the etcd cluster ---------------------------------------------------------------------------
def _kill_etcd_leader(group: ChaosGroup, rng: random.Random):
    leader = group.wait_etcd_leader()
    group.kill_member(leader)
    return leader


def _kill_etcd_follower(group: ChaosGroup, rng: random.Random):
    follower = group.etcd_follower(rng)
    group.kill_member(follower)
    return follower


def _restart_member(group: ChaosGroup, member) -> None:
    group.restart_member(member)


def _stop_etcd_leader(group: ChaosGroup, rng: random.Random):
    leader = group.wait_etcd_leader()
    group.stop_member(leader)
    return leader


def _stop_etcd_follower(group: ChaosGroup, rng: random.Random):
    follower = group.etcd_follower(rng)
    group.stop_member(follower)
    return follower


def _resume_member(group: ChaosGroup, member) -> None:
    group.resume_member(member)


def _partition_etcd_leader(group: ChaosGroup, rng: random.Random):
    """The leader cut from both other members (network namespaces, nftables): it lives and
    its clients reach it, the others elect, it must step down and commit nothing."""
    leader = group.wait_etcd_leader()
    group.partition_member(leader)
    return leader


def _heal_member(group: ChaosGroup, member) -> None:
    group.heal_member(member)


def _follower_stopped_leader_killed(group: ChaosGroup, rng: random.Random):
    """A follower frozen, then the leader killed: one member of three left, no quorum (no
    write, no lease renewal, no linearizable read) until the fault is undone."""
    leader = group.wait_etcd_leader()
    follower = group.etcd_follower(rng, leader)
    group.stop_member(follower)
    group.kill_member(leader)
    return follower, leader


def _resume_follower_restart_leader(group: ChaosGroup, members) -> None:
    follower, leader = members
    group.resume_member(follower)
    group.restart_member(leader)


def _master_stalled_store_elects(group: ChaosGroup, rng: random.Random):
    """The broker master frozen while the etcd leader is frozen too: the controller must judge
    the master while its own store elects a new leader."""
    master = group.master()
    leader = group.wait_etcd_leader()
    if master is not None:
        group.pause(master)
    group.stop_member(leader)
    return master, leader


def _resume_master_and_member(group: ChaosGroup, targets) -> None:
    master, leader = targets
    group.resume_member(leader)
    if master is not None:
        group.resume(master)


# -- brokers' disks (issue #36) -----------------------------------------------------------------
# The chaos brokers run SYNC_FLUSH: a master fsyncs every append before acknowledging it, so a
# power loss cannot take an acknowledged tail from a master. A slave flushes what it copies
# periodically in both flush modes (every 500 ms once 4 pages are dirty, whatever is dirty
# every 10 s), so its tail — acknowledged on its behalf — is what a power loss takes: the tail
# faults hit slaves. Up to TAIL_LOST_MAX bytes: below 16 KiB a slave's tail may wait the whole
# 10 s, above it about 500 ms of this run's writes.
TAIL_LOST_MIN, TAIL_LOST_MAX = 256, 32 * 1024


def _slave(group: ChaosGroup, rng: random.Random, master=None):
    """A running replica other than the recorded master (drawn), else None."""
    slaves = [r for r in group.replicas if r is not master and r.running]
    return rng.choice(slaves) if slaves else None


def _wipe_slave(group: ChaosGroup, rng: random.Random):
    """A slave's disk replaced: SIGKILL, its store deleted; restarted (empty, a new store id)
    after the hold."""
    target = _slave(group, rng, group.master())
    if target is not None:
        group.kill(target)
        group.wipe(target)
    return target


def _wipe_master_after_kill(group: ChaosGroup, rng: random.Random):
    """The master's machine lost with its disk: SIGKILL, its store deleted; the slaves elect;
    it comes back empty after the hold and copies the new master's log."""
    master = group.master()
    if master is not None:
        group.kill(master)
        group.wipe(master)
    return master


def _drop_unflushed_tail(group: ChaosGroup, rng: random.Random):
    """A slave's power lost: SIGKILL, then the unflushed tail of its active CommitLog segment
    zeroed; restarted after the hold, behind the confirmed offset under the same store id."""
    target = _slave(group, rng, group.master())
    if target is not None:
        group.kill(target)
        group.drop_tail(target, rng.randint(TAIL_LOST_MIN, TAIL_LOST_MAX))
    return target


def _damage_restart(group: ChaosGroup, replica, damage) -> None:
    """Kill `replica`, `damage` its disk, start it again and wait until its new live key is
    up (the controller has seen it come back: an operator's restart, then the next step)."""
    old = group.incarnation(replica)
    group.kill(replica)
    damage(replica)
    group.restart(replica)
    group.wait_new_incarnation(replica, old)


def _stop_damage_kill_master(group: ChaosGroup, rng: random.Random, damage):
    """Issue #36's operations sequence: one slave stopped for maintenance (the in-sync set
    shrinks to the master and the other slave, writes go on), the other slave's disk damaged
    and restarted, then the master's machine lost. The master's slaves are cut from its HA
    stream before the damage, so the damaged slave cannot copy back in milliseconds what a
    real one copies in minutes: only the damaged replica is up, and the group must wait for a
    complete one — the master: the stopped slave left the set — which the undo brings back
    with the stopped slave."""
    master = group.master()
    if master is None:
        return None, None
    stopped = _slave(group, rng, master)
    damaged = next((r for r in group.replicas if r not in (master, stopped) and r.running),
                   None)
    if stopped is not None:
        group.stop(stopped)
        group.wait_out_of_sync(stopped)
    group.cut_ha(master)
    if damaged is not None:
        _damage_restart(group, damaged, damage)
    group.kill(master)
    return master, stopped


def _slave_stopped_slave_wiped_master_killed(group: ChaosGroup, rng: random.Random):
    return _stop_damage_kill_master(group, rng, group.wipe)


def _slave_stopped_tail_dropped_master_killed(group: ChaosGroup, rng: random.Random):
    return _stop_damage_kill_master(
        group, rng, lambda r: group.drop_tail(r, rng.randint(TAIL_LOST_MIN, TAIL_LOST_MAX)))


def _heal_restart_both(group: ChaosGroup, targets) -> None:
    """The master (healed) and the stopped slave started together (Python start-up is most
    of a restart)."""
    master, stopped = targets
    if master is not None:
        group.heal(master)
    group.restart_all([r for r in (master, stopped) if r is not None])


def _slave_wiped_master_killed(group: ChaosGroup, rng: random.Random):
    """A slave's disk replaced and restarted, then the master killed: the other slave (a
    complete copy) is elected, never the wiped one (unless it caught up first)."""
    master = group.master()
    wiped = _slave(group, rng, master)
    if wiped is not None:
        _damage_restart(group, wiped, group.wipe)
    if master is not None:
        group.kill(master)
    return master


ALL_FAULTS: tuple[FaultKind, ...] = (
    # SIGKILL, restarted after the hold: comes back as a slave
    FaultKind("kill_master", 4, Hold.SHORT, _kill_master, _restart, "broker"),
    # SIGKILL of a slave: the in-sync set shrinks and grows back
    FaultKind("kill_slave", 2, Hold.SHORT, _kill_slave, _restart, "broker"),
    # SIGKILL of the name server holding the controller lease
    FaultKind("kill_controller", 1, Hold.SHORT, _kill_controller, _start, "broker"),
    # SIGSTOP past the lease (a gray failure), then SIGCONT
    FaultKind("pause_master", 2, Hold.PAST_LEASE, _pause_master, _resume, "broker"),
    # SIGSTOP just past failure detection: fenced out or not, never two masters acknowledging
    FaultKind("stall_master", 2, Hold.DETECTION, _pause_master, _resume, "broker"),
    # cut from config centers, name servers and slaves past the lease, then healed
    FaultKind("partition_master", 2, Hold.PAST_LEASE, _partition_master, _heal, "broker"),
    # SIGKILL of one of the two config centers: clients move to the other
    FaultKind("kill_config_center", 1, Hold.SHORT, _kill_config_center, _start, "store"),
    # SIGKILL of one of the two gateway-kafka instances, restarted on its port after the hold
    FaultKind("kill_gateway_kafka", 1, Hold.SHORT, _kill_gateway_kafka, _start_gateway,
              "broker"),
    # SIGKILL of the etcd leader, restarted after the hold (it rejoins as a follower)
    FaultKind("kill_etcd_leader", 2, Hold.SHORT, _kill_etcd_leader, _restart_member, "store"),
    # SIGKILL of an etcd follower: nothing may notice
    FaultKind("kill_etcd_follower", 1, Hold.SHORT, _kill_etcd_follower, _restart_member,
              "store"),
    # SIGSTOP of the etcd leader past the broker lease: the others elect while it lives
    FaultKind("stop_etcd_leader", 2, Hold.PAST_LEASE, _stop_etcd_leader, _resume_member,
              "store"),
    # SIGSTOP of an etcd follower
    FaultKind("stop_etcd_follower", 1, Hold.SHORT, _stop_etcd_follower, _resume_member,
              "store"),
    # SIGSTOP of the etcd leader just past the election timeout: it returns mid-election
    FaultKind("stall_etcd_leader", 2, Hold.ELECTION, _stop_etcd_leader, _resume_member,
              "store"),
    # the etcd leader cut from the other members past the broker lease (alive, reachable by
    # its clients): the others elect, it steps down; only where members can be partitioned
    FaultKind("partition_etcd_leader", 2, Hold.PAST_LEASE, _partition_etcd_leader,
              _heal_member, "store"),
    # a follower stopped, then the leader killed: no quorum for the hold
    FaultKind("etcd_follower_stopped_leader_killed", 1, Hold.SHORT,
              _follower_stopped_leader_killed, _resume_follower_restart_leader, "store"),
    # the broker master frozen just past detection while the etcd leader is frozen too
    FaultKind("master_stalled_store_elects", 1, Hold.DETECTION, _master_stalled_store_elects,
              _resume_master_and_member, "store"),
    # a slave's disk replaced: SIGKILL, store deleted, restarted empty after the hold (a new
    # store id): out of the in-sync set until it has copied back to the confirmed offset
    FaultKind("wipe_slave", 2, Hold.SHORT, _wipe_slave, _restart, "disk"),
    # the master's machine and disk lost: SIGKILL, store deleted; the slaves elect; it
    # returns empty after the hold and copies from the new master
    FaultKind("wipe_master_after_kill", 2, Hold.SHORT, _wipe_master_after_kill, _restart,
              "disk"),
    # a slave's power lost: SIGKILL, the unflushed tail of its active segment zeroed;
    # restarted behind the confirmed offset (same store id, a new start)
    FaultKind("drop_unflushed_tail", 2, Hold.SHORT, _drop_unflushed_tail, _restart, "disk"),
    # issue #36's sequence: a slave stopped, the other wiped and restarted, the master killed:
    # only the wiped replica is up, the group waits (never elects it) until the undo brings
    # the master and the stopped slave back
    FaultKind("slave_stopped_slave_wiped_master_killed", 1, Hold.WAIT,
              _slave_stopped_slave_wiped_master_killed, _heal_restart_both, "disk"),
    # the same with a lost unflushed tail instead of a wiped disk: behind the confirmed
    # offset under the same store id, still never elected
    FaultKind("slave_stopped_tail_dropped_master_killed", 1, Hold.WAIT,
              _slave_stopped_tail_dropped_master_killed, _heal_restart_both, "disk"),
    # a slave wiped and restarted, then the master killed: the other slave is elected
    FaultKind("slave_wiped_master_killed", 1, Hold.SHORT, _slave_wiped_master_killed,
              _restart, "disk"),
)
# partition_etcd_leader needs each etcd member in a network namespace of its own (root, `ip`,
# `nft`: .ci/run installs them). Without them the group runs its members on 127.0.0.1 and the
# row is left out of FAULTS (ChaosGroup's etcd and this table ask the same question).
PARTITION_UNAVAILABLE = PeerNetwork.unavailable()

# The disk rows run everywhere, CI's short run included: the broker bugs they found (an
# acknowledged message lost, acknowledged pops handed out again, around a master back at its
# old epoch: docs/replication.md, "Found with the disk faults") are fixed. CHAOS_DISK=0 leaves
# them out (a run of the other rows only).
FAULTS = tuple(kind for kind in ALL_FAULTS
               if (kind.plane != "disk" or os.environ.get("CHAOS_DISK") != "0")
               and not (kind.name == "partition_etcd_leader" and PARTITION_UNAVAILABLE))
BY_NAME = {kind.name: kind for kind in ALL_FAULTS}
assert len(BY_NAME) == len(ALL_FAULTS), "fault names must be unique"
