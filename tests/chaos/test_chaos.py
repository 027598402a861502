"""The chaos suite: seeded fault schedules against a 3-replica SYNC_MASTER group.

CI runs one short schedule with a fixed seed; `make chaos RUNS=N FAULTS=M [SEED=S]` runs N
schedules of M faults each (seeds S, S+1, ...), printing one summary line per run. A failure
names its seed; `make chaos RUNS=1 SEED=<seed> FAULTS=<m>` replays it.
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.run import run_chaos

SEED = int(os.environ.get("CHAOS_SEED", "20261123"))
RUNS = int(os.environ.get("CHAOS_RUNS", "1"))
FAULTS = int(os.environ.get("CHAOS_FAULTS", "4"))

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600 + 120 * FAULTS)
@pytest.mark.parametrize("seed", [SEED + run for run in range(RUNS)])
def test_no_acknowledged_message_is_lost(tmp_path, seed, capsys):
    outcome = run_chaos(tmp_path, seed, FAULTS)
    with capsys.disabled():
        print(f"\n{outcome.line}")
    assert not outcome.verdict.losses, (
        f"{len(outcome.verdict.losses)} acknowledged messages lost (seed {seed}); first: "
        f"{outcome.verdict.losses[:3]}")
    assert not outcome.verdict.diverged, (
        f"replicas {outcome.verdict.diverged} differ below the confirmed offset (seed {seed})")
