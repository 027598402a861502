"""A seeded schedule of faults for one chaos run: the same seed replays the same run.

Each fault is applied to a running replica group, held, then undone (restart, SIGCONT,
heal) before the next: faults against the master are what force elections, faults against
a slave or the controller what must not disturb writes. A pause or partition of the master
is held past the broker lease, so the group elects while the old master still lives (the
"gray" failure: once deposed it must not acknowledge anything).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = (
    "kill_master",        # SIGKILL, restarted after the hold: comes back as a slave
    "kill_slave",         # SIGKILL of a slave, restarted after the hold
    "kill_controller",    # SIGKILL of the name server holding the controller lease
    "pause_master",       # SIGSTOP past the lease, then SIGCONT
    "partition_master",   # cut from config center, name servers and slaves, then healed
)
WEIGHTS = (4, 2, 1, 2, 2)


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
        if kind in ("pause_master", "partition_master"):
            hold = lease_ttl_s * rng.uniform(1.5, 2.5)
        else:
            hold = rng.uniform(0.2, lease_ttl_s)
        faults.append(Fault(kind, round(hold, 2), round(rng.uniform(0.2, 1.5), 2)))
    return faults
