"""The chaos suite: seeded fault schedules against a 3-replica SYNC_MASTER group and its
control plane (a 3-member etcd cluster and two config centers over it).

CI runs one short schedule with a fixed seed that draws every fault kind once, with quick holds
(schedule.CI_SEED, `every_kind`, `quick`; CHAOS_QUICK=0 for the full holds); `make chaos RUNS=N FAULTS=M [SEED=S]` runs N weighted random
schedules of M faults each (seeds S, S+1, ...), printing one summary line per run. A failure
names its seed; `make chaos RUNS=1 SEED=<seed> FAULTS=<m>` replays it (CHAOS_EVERY_KIND=1 for
the CI kind of schedule). A run fails on a lost acknowledged message, diverged replicas, a lost
acknowledged config write (or revisions acknowledged out of order to one writer), a
compare-and-set register whose history is not one chain holding every acknowledged write, a
watcher that skipped a revision, an epoch granted twice, a controller writing outside its own
term, a master elected below the confirmed offset recorded before it (a group that waits for
a complete replica instead is fine), a run ending without a live master, or — for each
consumer group (pop, offset) — an acknowledged message it never got after
the drain, a record it was handed that the final log does not hold at that queue offset (a
phantom read), a message the pop group left unacked that never came back, or an acknowledged
pop handed out again; on a compacted topic written under the faults whose replicas, once
compaction caught up, do not each serve every key's last acknowledged value at its acknowledged
offset and nothing of deleted keys, unless an unacknowledged send explains it, or differ
(tests/chaos/compacted.py); and on a broker that died on its own while restarting (restarted
once more so the verdicts still run). Beside them a Kafka producer (confluent-kafka,
idempotent, acks=all) and a two-member consumer group through two gateway-kafka instances
(tests.chaos.kafka_clients): the run fails on an acknowledged record lost or stored elsewhere
than acknowledged, a record stored twice, an acknowledged record the group never got, a
phantom read, or the group's commits short of the ends. Every verdict also fails when it found
nothing to judge.
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.consumers import POP_GROUP
from tests.chaos.run import run_chaos
from tests.chaos.schedule import CI_FAULTS, CI_SEED

SEED = int(os.environ.get("CHAOS_SEED", str(CI_SEED)))
RUNS = int(os.environ.get("CHAOS_RUNS", "1"))
FAULTS = int(os.environ.get("CHAOS_FAULTS", str(CI_FAULTS)))
# Without CHAOS_FAULTS (CI): the first faults are every kind once.
EVERY_KIND = os.environ.get("CHAOS_EVERY_KIND", "" if "CHAOS_FAULTS" in os.environ else "1") == "1"
# ...with short holds and settles (schedule.schedule's `quick`), so every kind fits in CI's time.
QUICK = os.environ.get("CHAOS_QUICK", "") == "1"

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600 + 120 * FAULTS)
@pytest.mark.parametrize("seed", [SEED + run for run in range(RUNS)])
def test_no_acknowledged_message_is_lost(tmp_path, seed, capsys):
    outcome = run_chaos(tmp_path, seed, FAULTS, every_kind=EVERY_KIND, quick=QUICK)
    with capsys.disabled():
        print(f"\n{outcome.line}")
    assert not outcome.verdict.losses, (
        f"{len(outcome.verdict.losses)} acknowledged messages lost (seed {seed}); first: "
        f"{outcome.verdict.losses[:3]}")
    assert not outcome.verdict.diverged, (
        f"replicas {outcome.verdict.diverged} differ below the confirmed offset (seed {seed})")
    keys = outcome.keys
    assert keys.acks, f"no config write was acknowledged: nothing judged (seed {seed})"
    assert not keys.lost, (
        f"{len(keys.lost)} acknowledged config writes lost (seed {seed}); first: "
        f"{keys.lost[:3]}")
    assert not keys.out_of_order, (
        f"config revisions acknowledged out of order (seed {seed}): {keys.out_of_order[:3]}")
    chain = outcome.register
    assert chain.acks, f"no register write was acknowledged: nothing judged (seed {seed})"
    assert not chain.breaks, (
        f"the register's history is not one chain (seed {seed}); writes off it: "
        f"{chain.breaks[:3]}")
    assert not chain.missing, (
        f"{len(chain.missing)} acknowledged register writes not in its history (seed {seed}); "
        f"first: {chain.missing[:3]}")
    assert not chain.forks, (
        f"two acknowledged register writes on one base revision (seed {seed}): "
        f"{chain.forks[:3]}")
    for watch in outcome.watches:
        assert watch.events, f"{watch.watcher} saw no event: nothing judged (seed {seed})"
        assert not watch.skipped, (
            f"{watch.watcher} skipped {len(watch.skipped)} changes (seed {seed}); first: "
            f"{watch.skipped[:3]}")
        assert not watch.out_of_order, (
            f"{watch.watcher} got revisions out of order (seed {seed}): "
            f"{watch.out_of_order[:3]}")
    epochs = outcome.epochs
    assert epochs.store_grants and epochs.broker_grants, (
        f"no epoch grant found (store {epochs.store_grants}, brokers' logs "
        f"{epochs.broker_grants}): nothing judged (seed {seed})")
    assert not epochs.conflicts, f"epochs granted twice (seed {seed}): {epochs.conflicts}"
    assert not epochs.unrecorded, (
        f"brokers became master at epochs the store never granted them (seed {seed}): "
        f"{epochs.unrecorded[:5]}")
    controllers = outcome.controllers
    assert controllers.terms and controllers.writes, (
        f"no controller term ({controllers.terms}) or logged write ({controllers.writes}): "
        f"nothing judged (seed {seed})")
    assert not controllers.outside_term, (
        f"controllers wrote outside their own term (seed {seed}; revision, lease): "
        f"{controllers.outside_term[:5]}")
    elections = outcome.elections
    assert elections.elections, f"no election in the group key's history: nothing judged " \
        f"(seed {seed})"
    assert not elections.below, (
        f"masters elected below the confirmed offset (seed {seed}; revision, epoch, replica, "
        f"log end, confirmed offset): "
        f"{[(e.revision, e.epoch, e.master, e.held, e.floor) for e in elections.below[:5]]}")
    assert elections.ended_with_master, f"the run ended without a live master (seed {seed})"
    assert outcome.masterless, (
        f"the replication watch saw no change: no masterless time measured (seed {seed})")
    assert not outcome.crashes, f"brokers crashed (seed {seed}): {outcome.crashes}"
    compaction = outcome.compacted   # tests/chaos/compacted.py: every replica, after the faults
    assert compaction.ok, (
        f"the compacted topic (seed {seed}; {compaction.line()}): {compaction.problems[:5]}")
    for consumer in outcome.consumers:
        assert consumer.deliveries, (
            f"{consumer.group} was handed nothing: nothing judged (seed {seed})")
        if consumer.group == POP_GROUP:   # acked pops and ones left unacked, each judged
            assert consumer.acked and consumer.unacked, (
                f"{consumer.group}: {consumer.acked} pops acknowledged, {consumer.unacked} "
                f"left unacked: nothing judged (seed {seed})")
        assert not consumer.losses, (
            f"{consumer.group}: {len(consumer.losses)} acknowledged messages never consumed "
            f"(seed {seed}); first: {consumer.losses[:3]}")
        assert not consumer.phantoms, (
            f"{consumer.group}: {len(consumer.phantoms)} phantom reads (seed {seed}); first: "
            f"{consumer.phantoms[:3]}")
        assert not consumer.not_returned, (
            f"{consumer.group}: {len(consumer.not_returned)} messages left unacked never "
            f"delivered again (seed {seed}); first: {consumer.not_returned[:3]}")
        assert not consumer.acked_handed_again, (
            f"{consumer.group}: {len(consumer.acked_handed_again)} acknowledged pops handed out "
            f"again (seed {seed}); first: {consumer.acked_handed_again[:3]}")
    kafka = outcome.kafka   # the Kafka producer and group (tests.chaos.kafka_clients)
    assert kafka.acknowledged and kafka.deliveries, (
        f"Kafka: {kafka.acknowledged} records acknowledged, {kafka.deliveries} handed to the "
        f"group: nothing judged (seed {seed})")
    assert not kafka.lost, (
        f"Kafka: {len(kafka.lost)} acknowledged records not in the log (seed {seed}); "
        f"first: {kafka.lost[:3]}")
    assert not kafka.misplaced, (
        f"Kafka: {len(kafka.misplaced)} acknowledged records stored at another offset than "
        f"acknowledged (seed {seed}); first: {kafka.misplaced[:3]}")
    assert not kafka.duplicated, (
        f"Kafka: {len(kafka.duplicated)} records stored twice by the idempotent producer "
        f"(seed {seed}); first: {kafka.duplicated[:3]}")
    assert not kafka.not_consumed, (
        f"Kafka: {len(kafka.not_consumed)} acknowledged records the group never got "
        f"(seed {seed}); first: {kafka.not_consumed[:3]}")
    assert not kafka.phantoms, (
        f"Kafka: {len(kafka.phantoms)} phantom reads by the group (seed {seed}); first: "
        f"{kafka.phantoms[:3]}")
    assert not kafka.uncommitted, (
        f"Kafka: the group's committed offsets short of the ends (seed {seed}; partition: "
        f"(committed, end)): {kafka.uncommitted}")
