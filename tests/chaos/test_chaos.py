"""The chaos suite: seeded fault schedules against a 3-replica SYNC_MASTER group and its
replicated control plane (a Redis master, 2 replicas and 3 Sentinels; two config centers).

CI runs one short schedule with a fixed seed (schedule.CI_SEED, which draws control-plane
faults too); `make chaos RUNS=N FAULTS=M [SEED=S]` runs N schedules of M faults each (seeds
S, S+1, ...), printing one summary line per run. A failure names its seed;
`make chaos RUNS=1 SEED=<seed> FAULTS=<m>` replays it. A run fails on a lost acknowledged
message, diverged replicas, a lost acknowledged config write, a config revision handed out
out of order, an epoch granted to two replicas, or — for each consumer group (pop, offset) —
an acknowledged message it never got after the drain, a record it was handed that the final
log does not hold at that queue offset (a phantom read), or a message the pop group left
unacked that never came back; and on a broker that died on its own while restarting
(restarted once more so the verdicts still run).
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.run import run_chaos
from tests.chaos.schedule import CI_FAULTS, CI_SEED

SEED = int(os.environ.get("CHAOS_SEED", str(CI_SEED)))
RUNS = int(os.environ.get("CHAOS_RUNS", "1"))
FAULTS = int(os.environ.get("CHAOS_FAULTS", str(CI_FAULTS)))

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
    assert not outcome.config.lost, (
        f"{len(outcome.config.lost)} acknowledged config writes lost (seed {seed}); first: "
        f"{outcome.config.lost[:3]}")
    assert not outcome.config.out_of_order, (
        f"config revisions acknowledged out of order (seed {seed}): "
        f"{outcome.config.out_of_order[:3]}")
    assert not outcome.epoch_conflicts, (
        f"epochs granted to two replicas (seed {seed}): {outcome.epoch_conflicts}")
    assert not outcome.crashes, f"brokers crashed (seed {seed}): {outcome.crashes}"
    for consumer in outcome.consumers:
        assert not consumer.losses, (
            f"{consumer.group}: {len(consumer.losses)} acknowledged messages never consumed "
            f"(seed {seed}); first: {consumer.losses[:3]}")
        assert not consumer.phantoms, (
            f"{consumer.group}: {len(consumer.phantoms)} phantom reads (seed {seed}); first: "
            f"{consumer.phantoms[:3]}")
        assert not consumer.not_returned, (
            f"{consumer.group}: {len(consumer.not_returned)} messages left unacked never "
            f"delivered again (seed {seed}); first: {consumer.not_returned[:3]}")
