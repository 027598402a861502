"""A seeded schedule of faults for one chaos run: the same seed replays the same run.

Each fault (a row of tests.chaos.faults.FAULTS) is applied to a running replica group, held,
then undone (restart, SIGCONT, heal) before the next: faults against the master are what force
elections, faults against a slave or the controller what must not disturb writes. A pause or
partition of the master is held past the broker lease, so the group elects while the old
master still lives (the "gray" failure: once deposed it must not acknowledge anything).

The control plane is hit too: the 3-member etcd cluster behind the config centers (its leader
and its followers killed, frozen, frozen just past the election timeout, a follower frozen
and then the leader killed, the leader frozen while the broker master is) and one of its two
config centers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.chaos.faults import BY_NAME, FAULTS

KINDS = tuple(kind.name for kind in FAULTS)
WEIGHTS = tuple(kind.weight for kind in FAULTS)
HELD_PAST_LEASE = tuple(kind.name for kind in FAULTS if kind.held_past_lease)
CONTROL_PLANE_KINDS = tuple(kind.name for kind in FAULTS if kind.plane == "store")

# What CI runs (tests/chaos/test_chaos.py): every kind once, in this seed's order (a unit test
# keeps it so).
CI_SEED = 20265539
CI_FAULTS = len(FAULTS)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    hold_s: float    # how long the fault lasts before it is undone
    settle_s: float  # traffic runs this long after the group is healthy again

    def __str__(self) -> str:
        return f"{self.kind}({self.hold_s:.1f}s)"


def schedule(seed: int, count: int, *, lease_ttl_s: float, every_kind: bool = False,
             quick: bool = False) -> list[Fault]:
    """`count` faults drawn from `seed`, each held for a time in its kind's range.
    `every_kind`: the first len(FAULTS) faults are every kind once, in a seeded order (then
    weighted draws); what CI runs, so each kind is exercised on every CI run. `quick` (CI too):
    short holds up to faults.QUICK_SHORT_S and settles of 0.2-0.6 s, so every kind fits in
    CI's time."""
    rng = random.Random(seed)
    kinds: list[str] = []
    if every_kind:
        kinds = list(KINDS)
        rng.shuffle(kinds)
    kinds = kinds[:count]
    kinds += rng.choices(KINDS, WEIGHTS, k=count - len(kinds))
    faults = []
    for kind in kinds:
        low, high = BY_NAME[kind].hold.bounds(lease_ttl_s, quick)
        faults.append(Fault(kind, round(rng.uniform(low, high), 2),
                            round(rng.uniform(0.2, 0.6 if quick else 1.5), 2)))
    return faults
