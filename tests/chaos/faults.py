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

import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.chaos.group import ChaosGroup


class Hold(Enum):
    """How long a fault lasts before it is undone (seconds, drawn uniformly)."""

    SHORT = "short"              # 0.2 s .. the broker lease
    PAST_LEASE = "past_lease"    # 1.3 .. 2 x the broker lease: the group elects meanwhile
    ELECTION = "election"        # 1.2 .. 2.5 s: just past etcd's 1 s election timeout
    DETECTION = "detection"      # 3.7 .. 4.6 s: just past a frozen master's detection

    def bounds(self, lease_ttl_s: float) -> tuple[float, float]:
        if self is Hold.SHORT:
            return 0.2, lease_ttl_s
        if self is Hold.PAST_LEASE:
            return 1.3 * lease_ttl_s, 2.0 * lease_ttl_s
        if self is Hold.ELECTION:
            return 1.2, 2.5
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
    plane: str                   # "broker" or "store": what it hits (docs, summaries)

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


FAULTS: tuple[FaultKind, ...] = (
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
    # a follower stopped, then the leader killed: no quorum for the hold
    FaultKind("etcd_follower_stopped_leader_killed", 1, Hold.SHORT,
              _follower_stopped_leader_killed, _resume_follower_restart_leader, "store"),
    # the broker master frozen just past detection while the etcd leader is frozen too
    FaultKind("master_stalled_store_elects", 1, Hold.DETECTION, _master_stalled_store_elects,
              _resume_master_and_member, "store"),
)
# Left out: a network partition of the etcd leader from the other members (see
# docs/replication.md, "Proving it": no safe way to cut only etcd's peer traffic on a shared
# loopback without iptables and per-member network identities).

BY_NAME = {kind.name: kind for kind in FAULTS}
assert len(BY_NAME) == len(FAULTS), "fault names must be unique"
