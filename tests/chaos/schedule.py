"""A seeded schedule of faults for one chaos run: the same seed replays the same run.

Each fault is applied to a running replica group, held, then undone (restart, SIGCONT,
heal) before the next: faults against the master are what force elections, faults against
a slave or the controller what must not disturb writes. A pause or partition of the master
is held past the broker lease, so the group elects while the old master still lives (the
"gray" failure: once deposed it must not acknowledge anything).

The control plane is hit too: the config center's Redis (a master, two replicas, three
Sentinels: tests.support.redis_tier), its Sentinels and one of its two config centers. A
pause or partition of the Redis master is held past the broker lease as well, long enough
for Sentinel to fail over while the old master lives: a write it took must not survive
unless a replica confirmed it, and the store must never hand out a revision or an epoch twice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BROKER_KINDS = (
    "kill_master",        # SIGKILL, restarted after the hold: comes back as a slave
    "kill_slave",         # SIGKILL of a slave, restarted after the hold
    "kill_controller",    # SIGKILL of the name server holding the controller lease
    "pause_master",       # SIGSTOP past the lease, then SIGCONT
    "partition_master",   # cut from config center, name servers and slaves, then healed
)
CONTROL_PLANE_KINDS = (
    "kill_redis_master",       # SIGKILL of the Redis master, restarted (Sentinel demotes it)
    "pause_redis_master",      # SIGSTOP past the broker lease, then SIGCONT
    "kill_sentinel",           # SIGKILL of one Sentinel, restarted after the hold
    "kill_config_center",      # SIGKILL of one of the two config centers, restarted
    "partition_redis_master",  # its proxy cut past the broker lease (Sentinel fails over)
)
KINDS = BROKER_KINDS + CONTROL_PLANE_KINDS
WEIGHTS = (4, 2, 1, 2, 2) + (2, 1, 1, 1, 1)
HELD_PAST_LEASE = ("pause_master", "partition_master", "pause_redis_master",
                   "partition_redis_master")

# What CI runs (tests/chaos/test_chaos.py): 4 faults of this seed, among them control-plane
# faults (a unit test keeps it so).
CI_SEED = 20265539
CI_FAULTS = 4


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    hold_s: float    # how long the fault lasts before it is undone
    settle_s: float  # traffic runs this long after the group is healthy again

    def __str__(self) -> str:
        return f"{self.kind}({self.hold_s:.1f}s)"


def schedule(seed: int, count: int, *, lease_ttl_s: float) -> list[Fault]:
    """`count` faults drawn from `seed`. Holds that must outlive the lease do."""
    rng = random.Random(seed)
    faults = []
    for _ in range(count):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        if kind in HELD_PAST_LEASE:
            hold = lease_ttl_s * rng.uniform(1.5, 2.5)
        else:
            hold = rng.uniform(0.2, lease_ttl_s)
        faults.append(Fault(kind, round(hold, 2), round(rng.uniform(0.2, 1.5), 2)))
    return faults
