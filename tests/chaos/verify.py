"""What a chaos run must prove, as pure functions over what the producers were told and what
the replicas hold (no process, no network here, so the checks themselves are unit-tested).

- every acknowledged message is readable at the queue offset its acknowledgement gave;
- no queue offset holds two different messages across replicas (replicas never diverge
  below the confirmed offset: their CommitLogs are byte-identical up to it);
- a message stored twice (a retried send whose first attempt was stored but not
  acknowledged) is a duplicate, counted and reported, never a failure: delivery is
  at-least-once and the unique id makes it detectable;
- no acknowledged config write is lost (`check_config_writes`) and the revisions the config
  center acknowledges to one writer strictly increase (`check_revisions`): what a Redis
  failover must not take back;
- no epoch is granted to two replicas (`epoch_conflicts`, over the brokers' "role change"
  log lines): what a controller that re-used an epoch after a lost write would do;
- the longest write outage (messages, config writes) per fault kind (`outages_by_kind`).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Ack:
    queue_id: int
    queue_offset: int
    body: bytes


@dataclass
class Verdict:
    acks: int = 0
    losses: list[Ack] = field(default_factory=list)       # missing, or another body there
    duplicates: int = 0                                    # extra stored copies of a body
    diverged: list[str] = field(default_factory=list)      # replicas that differ

    @property
    def ok(self) -> bool:
        return not self.losses and not self.diverged


def check_acks(acks: Iterable[Ack], stored: Mapping[tuple[int, int], bytes]) -> Verdict:
    """`stored`: (queue id, queue offset) -> body, read back from the master after the run."""
    verdict = Verdict()
    for ack in acks:
        verdict.acks += 1
        if stored.get((ack.queue_id, ack.queue_offset)) != ack.body:
            verdict.losses.append(ack)
    copies = Counter(stored.values())
    verdict.duplicates = sum(count - 1 for count in copies.values() if count > 1)
    return verdict


def _segments(commitlog_dir: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.name), p) for p in commitlog_dir.iterdir() if p.name.isdigit())


def commitlog_bytes(commitlog_dir: Path, start: int, upto: int) -> bytes:
    """The log's bytes [start, upto); segments are files named by their base offset."""
    parts = []
    for base, path in _segments(commitlog_dir):
        with open(path, "rb") as segment:
            size = segment.seek(0, 2)
            lo, hi = max(start, base), min(upto, base + size)
            if lo < hi:
                segment.seek(lo - base)
                parts.append(segment.read(hi - lo))
    return b"".join(parts)


def check_replicas(logs: Mapping[str, Path], upto: int) -> list[str]:
    """Names of replicas whose CommitLog differs from the first one's below `upto` (from the
    highest first segment among them: retention may have removed older files unevenly)."""
    start = max((_segments(path)[0][0] for path in logs.values() if _segments(path)),
                default=0)
    digests = {name: hashlib.sha256(commitlog_bytes(path, start, upto)).hexdigest()
               for name, path in logs.items()}
    reference = next(iter(digests.values()), None)
    return [name for name, digest in digests.items() if digest != reference]


@dataclass(frozen=True, slots=True)
class ConfigAck:
    """One compare-and-set put of the counter key the config center acknowledged."""

    value: int
    revision: int


@dataclass
class ConfigVerdict:
    acks: int = 0
    lost: list[ConfigAck] = field(default_factory=list)
    out_of_order: list[tuple[ConfigAck, ConfigAck]] = field(default_factory=list)
    stale_reads: int = 0   # reads below an acknowledged value: reported, not a failure

    @property
    def ok(self) -> bool:
        return not self.lost and not self.out_of_order


def check_config_writes(acks: Sequence[ConfigAck], final_value: int,
                        history: Sequence[tuple[int, int]]) -> list[ConfigAck]:
    """The acknowledged puts the store lost. `final_value`: the key's value after the run;
    `history`: its retained PUT events as (revision, value), oldest first.

    One writer increments the key by compare-and-set, so every acknowledged put (v, r) must
    leave the final value >= v, and — unless the history no longer reaches back to r (it keeps
    the key's last N changes: older puts are superseded, and only the final value speaks for
    them) — the history must hold exactly value v at revision r. A put lost in a failover and
    written again later shows up at another revision, or not at all; and since the writer
    increments what it reads, a lost put makes it acknowledge the same value again: values
    acknowledged twice prove the first one lost, however old (the history need not reach it)."""
    retained = dict(history)
    oldest = min(retained, default=None)
    acknowledged_later = {ack.value: ack.revision for ack in acks}   # the last ack of a value
    lost = []
    for ack in acks:
        superseded = oldest is not None and ack.revision < oldest
        if final_value < ack.value or acknowledged_later[ack.value] != ack.revision or (
                not superseded and retained.get(ack.revision) != ack.value):
            lost.append(ack)
    return lost


def check_revisions(acks: Sequence[ConfigAck]) -> list[tuple[ConfigAck, ConfigAck]]:
    """Consecutive acknowledgements (in the order the writer got them) whose revision did not
    increase: a revision handed out twice, as after a store that forgot its last writes."""
    return [(before, after) for before, after in pairwise(acks)
            if after.revision <= before.revision]


def check_config(acks: Sequence[ConfigAck], final_value: int,
                 history: Sequence[tuple[int, int]], stale_reads: int = 0) -> ConfigVerdict:
    return ConfigVerdict(len(acks), check_config_writes(acks, final_value, history),
                         check_revisions(acks), stale_reads)


_ROLE_CHANGE = re.compile(r"\brole change\b(?P<fields>.*)$")
_FIELD = re.compile(r"(\w+)=(\S+)")


def master_grants(log_text: str) -> list[tuple[int, int]]:
    """(replica id, epoch) of every BecomeMaster a broker's log records (its "role change"
    lines: `action=BecomeMaster epoch=E ... replica=R`), in log order."""
    grants = []
    for line in log_text.splitlines():
        found = _ROLE_CHANGE.search(line)
        if not found:
            continue
        fields = dict(_FIELD.findall(found["fields"]))
        if fields.get("action") == "BecomeMaster" and "epoch" in fields and "replica" in fields:
            grants.append((int(fields["replica"]), int(fields["epoch"])))
    return grants


def epoch_conflicts(grants: Iterable[tuple[int, int]]) -> dict[int, set[int]]:
    """Epochs granted to more than one replica -> those replicas. A replica taking the same
    epoch again (a retried role change, a lease renewed) is no conflict."""
    holders: dict[int, set[int]] = defaultdict(set)
    for replica, epoch in grants:
        holders[epoch].add(replica)
    return {epoch: replicas for epoch, replicas in holders.items() if len(replicas) > 1}


def outages_by_kind(ack_times: Sequence[float], faults: Sequence[tuple[str, float]],
                    end: float) -> dict[str, float]:
    """Each fault's outage — the longest gap between consecutive acknowledgements that *ends*
    in its window (from its start to the next fault's start, the last one's to `end`) — and
    the worst per kind.

    `ack_times` ascending; `faults`: (kind, start) in start order. The run waits for an
    acknowledgement after each fault before the next, so the gap a fault caused ends in its own
    window: it is measured whole, from the last acknowledgement before the fault (or before the
    outage, if that came later) to the first after. A fault whose window saw no gap longer
    than the writer's own pace has an outage of about that pace."""
    worst = {kind: 0.0 for kind, _ in faults}
    starts = [start for _, start in faults]
    for before, after in pairwise(ack_times):
        index = bisect_right(starts, after) - 1   # the window `after` falls in
        if index < 0 or after >= end:
            continue
        kind = faults[index][0]
        worst[kind] = max(worst[kind], after - before)
    return worst


def summary(seed: int, faults: int, verdict: Verdict, longest_outage_s: float,
            failed_sends: int, config: ConfigVerdict | None = None,
            conflicts: Mapping[int, set[int]] | None = None,
            outages: Mapping[str, tuple[float, float]] | None = None) -> str:
    """One line; `outages`: kind -> (longest message outage, longest config-write outage)."""
    line = (f"chaos seed={seed} faults={faults} acks={verdict.acks} "
            f"losses={len(verdict.losses)} duplicates={verdict.duplicates} "
            f"diverged={len(verdict.diverged)} unacknowledged_sends={failed_sends} "
            f"longest_write_outage={longest_outage_s:.2f}s")
    if config is not None:
        line += (f" config_acks={config.acks} config_lost={len(config.lost)} "
                 f"revisions_out_of_order={len(config.out_of_order)} "
                 f"stale_config_reads={config.stale_reads}")
    if conflicts is not None:
        line += f" epoch_conflicts={len(conflicts)}"
    if outages:
        line += " outages(msg/config)=" + ",".join(
            f"{kind}:{message:.2f}/{config_write:.2f}s"
            for kind, (message, config_write) in sorted(outages.items()))
    return line


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message a consumer was handed, as the log placed it (`topic`: the chaos topic, or
    the pop group's retry topic for a redelivery), and when (monotonic)."""

    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    broker: str
    at: float


@dataclass
class ConsumerVerdict:
    group: str
    deliveries: int = 0
    losses: list[bytes] = field(default_factory=list)        # acknowledged, never handed over
    phantoms: list[Delivery] = field(default_factory=list)   # not in the final log as handed
    redelivered: int = 0            # deliveries past a body's first: at-least-once, reported
    # pop: (when its ack succeeded, the delivery after it): reported, not a failure
    redelivered_after_ack: list[tuple[float, Delivery]] = field(default_factory=list)
    unacked: int = 0                # pop: deliveries left unacked on purpose
    not_returned: list[bytes] = field(default_factory=list)  # of those, never delivered again
    returned_across_promotion: int = 0  # of those, back after a master change they straddled

    @property
    def ok(self) -> bool:
        return not self.losses and not self.phantoms and not self.not_returned


def check_consumption(group: str, acks: Iterable[Ack], deliveries: Sequence[Delivery],
                      stored: Mapping[str, Mapping[tuple[int, int], bytes]], *,
                      acked: Iterable[tuple[bytes, float]] = (),
                      unacked: Iterable[tuple[bytes, float]] = (),
                      promotions: Sequence[tuple[float, float]] = ()) -> ConsumerVerdict:
    """What one consumer group was handed, against what the producer was told and the final
    log (`stored`: topic -> (queue id, queue offset) -> body, read from the master after the
    run). `acked`: (body, when its ack succeeded); `unacked`: (body, when it was handed over)
    of deliveries left unacked on purpose, each must be handed over again later;
    `promotions`: (fault start, recovered) of the faults that changed the master."""
    verdict = ConsumerVerdict(group, deliveries=len(deliveries))
    seen: dict[bytes, list[float]] = defaultdict(list)
    first_ack: dict[bytes, float] = {}
    for body, at in acked:
        first_ack[body] = min(at, first_ack.get(body, at))
    for delivery in deliveries:
        seen[delivery.body].append(delivery.at)
        if delivery.at > first_ack.get(delivery.body, delivery.at):
            verdict.redelivered_after_ack.append((first_ack[delivery.body], delivery))
        if stored.get(delivery.topic, {}).get(
                (delivery.queue_id, delivery.queue_offset)) != delivery.body:
            verdict.phantoms.append(delivery)
    verdict.losses = [ack.body for ack in acks if ack.body not in seen]
    verdict.redelivered = sum(len(times) - 1 for times in seen.values())
    for body, at in unacked:
        verdict.unacked += 1
        later = [handed for handed in seen.get(body, ()) if handed > at]
        if not later:
            verdict.not_returned.append(body)
        elif any(at < start and min(later) > recovered for start, recovered in promotions):
            verdict.returned_across_promotion += 1
    return verdict


def consumption_summary(verdicts: Iterable[ConsumerVerdict]) -> str:
    """The consumer groups' part of the summary line."""
    return " ".join(
        f"{v.group}:deliveries={v.deliveries} losses={len(v.losses)} "
        f"phantom_reads={len(v.phantoms)} redelivered={v.redelivered} "
        f"redelivered_after_ack={len(v.redelivered_after_ack)} unacked={v.unacked} "
        f"unacked_not_returned={len(v.not_returned)} "
        f"returned_across_promotion={v.returned_across_promotion}" for v in verdicts)
