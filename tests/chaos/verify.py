"""What a chaos run must prove, as pure functions over what the producers were told and what
the replicas hold (no process, no network here, so the checks themselves are unit-tested).

- every acknowledged message is readable at the queue offset its acknowledgement gave;
- no queue offset holds two different messages across replicas (replicas never diverge
  below the confirmed offset: their CommitLogs are byte-identical up to it);
- a message stored twice (a retried send whose first attempt was stored but not
  acknowledged) is a duplicate, counted and reported, never a failure: delivery is
  at-least-once and the unique id makes it detectable;
- every acknowledged config write is present afterwards (`check_key_writes`: several writers
  creating distinct keys) and the revisions acknowledged to one writer strictly increase;
- a compare-and-set register's history is one unbroken chain holding every acknowledged
  write (`check_register`);
- watchers never skip a revision (`check_watch`, against the store's history re-read);
- no epoch is granted twice (`check_epochs`: the group key's history in the store and the
  brokers' "role change" log lines);
- never two controllers writing (`check_controllers`: every write a controller logged falls
  in its own term of the leader key's history);
- never a master elected below the confirmed offset (`check_elections`: the group key's
  history with the live keys', each election's master against the confirmed offset recorded
  before it); a group that waits for a complete replica is fine, and counted;
- the longest write outage (messages, config writes) per fault kind (`outages_by_kind`), and
  how long the group stayed without a master per fault kind (`masterless_spans`,
  `spans_by_kind`).

Every verdict fails when it found nothing to judge (no acknowledged write, no event, no
grant, no term): a run that exercised nothing, or a log format that no longer parses, must
not pass silently.
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


# -- config writes --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyAck:
    """One create of a distinct key the config center acknowledged (writer `writer`)."""

    writer: int
    key: str
    value: bytes
    revision: int


@dataclass
class KeyVerdict:
    acks: int = 0
    lost: list[KeyAck] = field(default_factory=list)   # absent afterwards, or changed
    out_of_order: list[tuple[KeyAck, KeyAck]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.acks > 0 and not self.lost and not self.out_of_order


def check_key_writes(acks: Sequence[KeyAck],
                     final: Mapping[str, tuple[bytes, int]]) -> KeyVerdict:
    """Every acknowledged write present afterwards: `final` = key -> (value, mod revision) of
    every key under the writers' prefix, read after the run. Each key is written once, so
    an acknowledged one must hold its value at the revision its acknowledgement gave. The
    revisions acknowledged to one writer must strictly increase (a store that forgot writes
    would hand one out again). Fails with nothing acknowledged (nothing judged)."""
    verdict = KeyVerdict(acks=len(acks))
    verdict.lost = [ack for ack in acks if final.get(ack.key) != (ack.value, ack.revision)]
    by_writer: dict[int, list[KeyAck]] = defaultdict(list)
    for ack in acks:
        by_writer[ack.writer].append(ack)
    for writer_acks in by_writer.values():
        verdict.out_of_order += [(a, b) for a, b in pairwise(writer_acks)
                                 if b.revision <= a.revision]
    return verdict


def register_value(writer: int, sequence: int, based_on: int) -> str:
    """What a register writer puts: who, its count, and the mod revision it compared against
    (so the store's history itself says which write each one followed)."""
    return f"{writer}:{sequence}:{based_on}"


def based_on(value: str) -> int:
    return int(value.rsplit(":", 1)[1])


@dataclass(frozen=True, slots=True)
class CasAck:
    """One compare-and-set of the register the config center acknowledged: `value` written
    at `revision` on the condition that the key was at `based_on` (0 = absent)."""

    writer: int
    based_on: int
    revision: int
    value: str


@dataclass
class RegisterVerdict:
    acks: int = 0
    writes: int = 0                                      # PUTs in the store's history
    breaks: list[tuple[int, str]] = field(default_factory=list)   # (revision, value) off-chain
    missing: list[CasAck] = field(default_factory=list)  # acknowledged, not in the chain
    forks: list[tuple[CasAck, CasAck]] = field(default_factory=list)  # two on one base
    stale_reads: int = 0   # reads below an acknowledged revision: reported

    @property
    def ok(self) -> bool:
        return self.acks > 0 and not self.breaks and not self.missing and not self.forks


def check_register(acks: Sequence[CasAck], history: Sequence[tuple[int, str]],
                   stale_reads: int = 0) -> RegisterVerdict:
    """The register's acknowledged history forms one unbroken chain. `history`: every PUT of
    the key as (revision, value), oldest first, read from the store after the run.

    Each write names the revision it compared against, so in the store's history every write
    must follow the one before it (the first: based on 0, the key absent) — a write applied on
    a stale compare, or a lost write the next one was based on, breaks the chain; every
    acknowledged write must be in it, at its revision with its value; and no two
    acknowledged writes may be based on the same revision (both "won" one compare). Fails with
    nothing acknowledged."""
    verdict = RegisterVerdict(acks=len(acks), writes=len(history), stale_reads=stale_reads)
    previous = 0
    for revision, value in history:
        if based_on(value) != previous:
            verdict.breaks.append((revision, value))
        previous = revision
    chain = dict(history)
    verdict.missing = [ack for ack in acks if chain.get(ack.revision) != ack.value]
    first_on: dict[int, CasAck] = {}
    for ack in acks:
        if ack.based_on in first_on:
            verdict.forks.append((first_on[ack.based_on], ack))
        else:
            first_on[ack.based_on] = ack
    return verdict


@dataclass
class WatchVerdict:
    watcher: str
    events: int = 0
    out_of_order: list[tuple[int, int]] = field(default_factory=list)   # revision pairs
    skipped: list[tuple[int, str]] = field(default_factory=list)        # (revision, key)

    @property
    def ok(self) -> bool:
        return self.events > 0 and not self.out_of_order and not self.skipped


def check_watch(watcher: str, seen: Sequence[tuple[int, str]],
                reference: Sequence[tuple[int, str]]) -> WatchVerdict:
    """A watcher never skips a revision: `seen` = the (revision, key) of every event it was
    handed, in order; `reference` = every change under the same prefix, read again from the
    store after the run (a fresh watch from the watcher's start). Revisions must not go back
    or repeat, and every change of the reference up to the last revision the watcher saw
    must be among what it saw. Fails when it saw nothing."""
    verdict = WatchVerdict(watcher, events=len(seen))
    verdict.out_of_order = [(a[0], b[0]) for a, b in pairwise(seen) if b <= a]
    last = seen[-1][0] if seen else 0
    handed = set(seen)
    verdict.skipped = [change for change in reference
                       if change[0] <= last and change not in handed]
    return verdict


# -- epochs and controllers --------------------------------------------------------------------
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


@dataclass
class EpochVerdict:
    store_grants: int = 0          # distinct (epoch, master) in the group key's history
    broker_grants: int = 0         # BecomeMaster lines in the brokers' logs
    conflicts: dict[int, set[int]] = field(default_factory=dict)   # epoch -> masters
    unrecorded: list[tuple[int, int]] = field(default_factory=list)  # (replica, epoch)

    @property
    def ok(self) -> bool:
        return (self.store_grants > 0 and self.broker_grants > 0 and not self.conflicts
                and not self.unrecorded)


def check_epochs(store_states: Iterable[tuple[int, int]],
                 broker_grants: Sequence[tuple[int, int]]) -> EpochVerdict:
    """Epochs are never granted twice. `store_states`: (epoch, master) of every write of the
    group key (its whole history; master -1 = none); `broker_grants`: (replica, epoch) of
    every BecomeMaster in the brokers' logs. An epoch may name one master only, in the store
    and in the logs, and every master a broker became must be one the store granted. Fails
    when either source shows no grant (nothing judged: a changed log format reads as none)."""
    granted: dict[int, set[int]] = defaultdict(set)
    for epoch, master in store_states:
        if master >= 0:
            granted[epoch].add(master)
    conflicts = {epoch: set(masters) for epoch, masters in granted.items() if len(masters) > 1}
    for epoch, replicas in epoch_conflicts(broker_grants).items():
        conflicts[epoch] = conflicts.get(epoch, set()) | replicas
    return EpochVerdict(
        store_grants=sum(len(masters) for masters in granted.values()),
        broker_grants=len(broker_grants), conflicts=conflicts,
        unrecorded=sorted({(replica, epoch) for replica, epoch in broker_grants
                           if replica not in granted.get(epoch, ())}))


_CONTROLLER_WRITE = re.compile(
    r"\b(controller wrote group state|master fenced out before its lease expired)\b"
    r"(?P<fields>.*)$")


def controller_writes(log_text: str) -> list[tuple[int, int]]:
    """(store revision, controller lease) of every write a name server's log records: its
    group-key writes and its fence-out deletes."""
    writes = []
    for line in log_text.splitlines():
        found = _CONTROLLER_WRITE.search(line)
        if found:
            fields = dict(_FIELD.findall(found["fields"]))
            if "revision" in fields and "lease" in fields:
                writes.append((int(fields["revision"]), int(fields["lease"])))
    return writes


@dataclass
class ControllerVerdict:
    terms: int = 0                 # leader-key creations in the store's history
    writes: int = 0                # writes the controllers' logs attribute to a term
    outside_term: list[tuple[int, int]] = field(default_factory=list)  # (revision, lease)
    unattributed: int = 0          # group-key writes no controller log names: reported

    @property
    def ok(self) -> bool:
        return self.terms > 0 and self.writes > 0 and not self.outside_term


def check_controllers(leader_events: Sequence[tuple[int, int]],
                      writes: Iterable[tuple[int, int]],
                      group_writes: Iterable[int] = ()) -> ControllerVerdict:
    """Never two controllers writing. `leader_events`: the controller leader key's history as
    (revision, lease) oldest first — a creation under the new controller's lease, or lease 0
    for a deletion (its lease ended or was revoked); `writes`: (revision, lease) of every write
    the controllers logged; `group_writes`: revisions of every write of the group keys in the
    store's history. A write belongs to the term in force at its revision — the last leader
    key event before it — and must carry that term's lease: a write under any other lease (or
    while the key was absent) is a controller writing while another held, or nobody held,
    the key. Group-key writes no log names (a write whose reply was lost) are counted.
    Fails with no term or no write to judge."""
    events = sorted(leader_events)
    revisions = [revision for revision, _ in events]
    verdict = ControllerVerdict(terms=sum(1 for _, lease in events if lease))
    logged = set()
    for revision, lease in writes:
        verdict.writes += 1
        logged.add(revision)
        index = bisect_right(revisions, revision - 1) - 1
        term = events[index][1] if index >= 0 else 0
        if term != lease:
            verdict.outside_term.append((revision, lease))
    verdict.unattributed = sum(1 for revision in group_writes if revision not in logged)
    return verdict


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
            failed_sends: int, *, keys: KeyVerdict | None = None,
            register: RegisterVerdict | None = None,
            watches: Sequence[WatchVerdict] = (), epochs: EpochVerdict | None = None,
            controllers: ControllerVerdict | None = None,
            outages: Mapping[str, tuple[float, float]] | None = None,
            elections: ElectionVerdict | None = None,
            masterless: Mapping[str, float] | None = None) -> str:
    """One line; `outages`: kind -> (longest message outage, longest config-write outage);
    `masterless`: kind -> longest time the group had no master."""
    line = (f"chaos seed={seed} faults={faults} acks={verdict.acks} "
            f"losses={len(verdict.losses)} duplicates={verdict.duplicates} "
            f"diverged={len(verdict.diverged)} unacknowledged_sends={failed_sends} "
            f"longest_write_outage={longest_outage_s:.2f}s")
    if keys is not None:
        line += (f" config_acks={keys.acks} config_lost={len(keys.lost)} "
                 f"revisions_out_of_order={len(keys.out_of_order)}")
    if register is not None:
        line += (f" register_acks={register.acks} register_writes={register.writes} "
                 f"chain_breaks={len(register.breaks)} register_missing="
                 f"{len(register.missing)} register_forks={len(register.forks)} "
                 f"stale_register_reads={register.stale_reads}")
    for watch in watches:
        line += (f" {watch.watcher}:events={watch.events} skipped={len(watch.skipped)} "
                 f"out_of_order={len(watch.out_of_order)}")
    if epochs is not None:
        line += (f" epoch_grants={epochs.store_grants}/{epochs.broker_grants} "
                 f"epoch_conflicts={len(epochs.conflicts)} "
                 f"epochs_unrecorded={len(epochs.unrecorded)}")
    if controllers is not None:
        line += (f" controller_terms={controllers.terms} controller_writes="
                 f"{controllers.writes} writes_outside_term={len(controllers.outside_term)} "
                 f"unattributed_group_writes={controllers.unattributed}")
    if elections is not None:
        line += (f" elections={elections.elections} below_confirmed={len(elections.below)} "
                 f"judged_by_store={elections.by_store} "
                 f"judged_by_incarnation={elections.by_incarnation} waits={elections.waits} "
                 f"deposed={elections.deposed} elected_gone={len(elections.gone)} "
                 f"ended_with_master={elections.ended_with_master}")
    if masterless is not None:
        line += " masterless=" + ",".join(
            f"{kind}:{seconds:.2f}s" for kind, seconds in sorted(masterless.items()))
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
    # pop: (when its ack succeeded, the delivery after it) of every body
    redelivered_after_ack: list[tuple[float, Delivery]] = field(default_factory=list)
    # of those, the ones of a body the final log holds once (not a copy the producer stored
    # twice): a pop acknowledged and handed out again. A failure: an ack is appended to the
    # revive log and answered only once the in-sync replicas hold it (SYNC_MASTER), so a
    # promoted replica knows it.
    acked_handed_again: list[tuple[float, Delivery]] = field(default_factory=list)
    acked: int = 0                  # pop: bodies whose ack succeeded (judged for re-handing)
    unacked: int = 0                # pop: deliveries left unacked on purpose
    not_returned: list[bytes] = field(default_factory=list)  # of those, never delivered again
    returned_across_promotion: int = 0  # of those, back after a master change they straddled

    @property
    def ok(self) -> bool:
        return (not self.losses and not self.phantoms and not self.not_returned
                and not self.acked_handed_again)


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
    verdict.acked = len(first_ack)
    for delivery in deliveries:
        seen[delivery.body].append(delivery.at)
        if delivery.at > first_ack.get(delivery.body, delivery.at):
            verdict.redelivered_after_ack.append((first_ack[delivery.body], delivery))
        if stored.get(delivery.topic, {}).get(
                (delivery.queue_id, delivery.queue_offset)) != delivery.body:
            verdict.phantoms.append(delivery)
    copies = Counter(body for topic, held in stored.items() if not topic.startswith("%")
                     for body in held.values())
    verdict.acked_handed_again = [(at, delivery) for at, delivery in verdict.redelivered_after_ack
                                  if copies.get(delivery.body, 0) <= 1]
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
        f"redelivered_after_ack={len(v.redelivered_after_ack)} "
        f"acked_handed_again={len(v.acked_handed_again)} unacked={v.unacked} "
        f"unacked_not_returned={len(v.not_returned)} "
        f"returned_across_promotion={v.returned_across_promotion}" for v in verdicts)


# -- elections and masterless time (issue #36) ---------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReplicationEvent:
    """One change of the group key or of a live key, in store order: `value` the JSON written
    (None: deleted); `at` when the run's watch was handed it (monotonic; 0 when replayed)."""

    revision: int
    key: str
    value: Mapping | None
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Election:
    """A master granted at `revision`: `held` the log end it was judged by (its store's when
    it took the grant, else its live key's; -1: none known), `floor` the confirmed offset
    recorded before."""

    revision: int
    epoch: int
    master: int
    held: int
    floor: int
    incarnation: str = ""


@dataclass
class ElectionVerdict:
    elections: int = 0                # grants after the first (new master or new epoch)
    by_store: int = 0                 # judged by the log end the master's store took it at
    by_incarnation: int = 0           # judged by the in-sync incarnation (never acted on)
    below: list[Election] = field(default_factory=list)   # elected below the floor: failing
    waits: int = 0                    # times the group started waiting (waiting_for set)
    deposed: int = 0                  # times a master was deposed with nobody elected
    gone: list[Election] = field(default_factory=list)   # elected from a dead process's key
    ended_with_master: bool = False   # the last state names a master whose live key is up

    @property
    def ok(self) -> bool:
        return self.elections > 0 and not self.below and self.ended_with_master


_STORE_MASTER = re.compile(r"\bstore is master\b(?P<fields>.*)$")


def store_master_ends(log_text: str) -> dict[int, int]:
    """epoch -> the log end a broker's store had when it became master of that epoch (its
    "store is master epoch=E log_end=N" lines; the first of an epoch: a restart that takes the
    same epoch again logs a later end)."""
    ends: dict[int, int] = {}
    for line in log_text.splitlines():
        found = _STORE_MASTER.search(line)
        if found:
            fields = dict(_FIELD.findall(found["fields"]))
            if "epoch" in fields and "log_end" in fields:
                ends.setdefault(int(fields["epoch"]), int(fields["log_end"]))
    return ends


def _live_replica(key: str, live_prefix: str) -> int | None:
    tail = key[len(live_prefix):] if key.startswith(live_prefix) else ""
    return int(tail) if tail.isdigit() else None


def check_elections(events: Sequence[ReplicationEvent], group_key: str, live_prefix: str,
                    store_ends: Mapping[tuple[int, int], int] | None = None) -> ElectionVerdict:
    """Never a master elected below the confirmed offset. `events`: the group key's and its
    live keys' whole history (`live_prefix` + replica id), in store order; `store_ends`:
    (replica, epoch) -> the log end its store had when it became master of that epoch (the
    brokers' logs, `store_master_ends`).

    Every write of the group key that grants a master — another replica, or a new epoch — after
    the first is an election. Its floor is the `confirmed_offset` of the state before it, and
    the master must have held at least that:
    - a master that took the grant is judged by its store's log end at that moment (the
      truth: nothing the controller saw or believed);
    - a grant nobody acted on (the process was gone, or refused to serve a copy it no longer
      holds) is judged by what the controller saw: its live key's log end at the election (its
      last one, if the key was deleted just before) — and, as that end is published once per
      renewal and may lag the log, a master live under the very incarnation the set before the
      election counted it with (the same process, a member that acknowledged every confirmed
      byte) qualifies by that (`by_incarnation`).
    Anything else — a wiped replica (another store id), one back from a lost tail below the
    floor — is an election below the confirmed offset. A group that waits (`waiting_for` set,
    or a master deposed to -1) elected nobody: counted, never a failure.

    Also reported (not judged): `gone`, masters whose process had already died when elected,
    known afterwards because the replica's next live key came under another incarnation with
    no renewal under the elected one in between (the controller trusted a dead process's key).
    Fails with no election to judge, or when the history ends without a live master."""
    store_ends = store_ends or {}
    verdict = ElectionVerdict()
    live: dict[int, Mapping] = {}       # last value each replica published (kept on delete)
    up: set[int] = set()
    state: Mapping | None = None
    pending: list[Election] = []        # elections whose master has not renewed since
    for event in events:
        replica = _live_replica(event.key, live_prefix)
        if replica is not None:
            if event.value is None:
                up.discard(replica)
                continue
            up.add(replica)
            live[replica] = event.value
            for election in [e for e in pending if e.master == replica]:
                pending.remove(election)
                if event.value.get("incarnation", "") != election.incarnation:
                    verdict.gone.append(election)
            continue
        if event.key != group_key or event.value is None:
            continue
        new, old = event.value, state
        state = new
        if old is None:
            continue
        if new.get("waiting_for") and not old.get("waiting_for"):
            verdict.waits += 1
        master = int(new.get("master", -1))
        if master < 0:
            if int(old.get("master", -1)) >= 0:
                verdict.deposed += 1
            continue
        epoch = int(new.get("epoch", 0))
        if (master, epoch) == (int(old.get("master", -1)), int(old.get("epoch", 0))):
            continue
        shown = live.get(master, {})
        incarnation = str(shown.get("incarnation", ""))
        floor = int(old.get("confirmed_offset", 0))
        verdict.elections += 1
        if incarnation:
            pending.append(Election(event.revision, epoch, master, -1, floor, incarnation))
        if (master, epoch) in store_ends:
            verdict.by_store += 1
            held = store_ends[(master, epoch)]
            if held < floor:
                verdict.below.append(Election(event.revision, epoch, master, held, floor,
                                              incarnation))
            continue
        held = int(shown.get("log_end", -1))
        if held >= floor:
            continue
        counted = dict(old.get("incarnations", {})).get(str(master), "")
        if master in old.get("in_sync", ()) and incarnation and counted == incarnation:
            verdict.by_incarnation += 1
        else:
            verdict.below.append(Election(event.revision, epoch, master, held, floor,
                                          incarnation))
    if state is not None:
        verdict.ended_with_master = int(state.get("master", -1)) in up \
            and not state.get("waiting_for")
    return verdict


def masterless_spans(events: Sequence[ReplicationEvent], group_key: str, live_prefix: str,
                     end: float, downs: Sequence[tuple[float, int]] = ()
                     ) -> list[tuple[float, float]]:
    """(from, until) of every time the group had no master, by the watch's clock: the group
    key names none (-1), names one that is not up, or waits (`waiting_for` set). A replica is
    up from a live key written by a running process: `downs` = (when, replica) of every kill
    or stop the run made, so a killed master counts as gone from its kill, not from when the
    controller noticed — its old key (and a renewal the watch hands over late) no longer
    counts; its next process's key (another incarnation) does. A frozen or cut-off master
    counts as gone once the controller fences it out (its key deleted). A span still open at
    `end` closes there; nothing after `end` is read."""
    spans: list[tuple[float, float]] = []
    up: set[int] = set()
    shown: dict[int, str] = {}      # the incarnation of each replica's last key
    dead: dict[int, str] = {}       # the incarnation a kill or stop ended
    state: Mapping | None = None
    since: float | None = None
    timeline = sorted([(event.at, 0, event) for event in events if event.at <= end]
                      + [(at, 1, replica) for at, replica in downs if at <= end],
                      key=lambda item: item[:2])
    for at, is_down, item in timeline:
        if is_down:
            up.discard(item)
            dead[item] = shown.get(item, "")
        elif (replica := _live_replica(item.key, live_prefix)) is not None:
            if item.value is None:
                up.discard(replica)
            else:
                shown[replica] = str(item.value.get("incarnation", ""))
                if dead.get(replica) != shown[replica]:
                    up.add(replica)
                    dead.pop(replica, None)
        elif item.key == group_key and item.value is not None:
            state = item.value
        else:
            continue
        if state is None:
            continue
        has_master = int(state.get("master", -1)) in up and not state.get("waiting_for")
        if not has_master and since is None:
            since = at
        elif has_master and since is not None:
            spans.append((since, at))
            since = None
    if since is not None:
        spans.append((since, end))
    return spans


def spans_by_kind(spans: Sequence[tuple[float, float]], faults: Sequence[tuple[str, float]]
                  ) -> dict[str, float]:
    """The longest span per fault kind, each counted for the fault in whose window it began
    (from the fault's start to the next one's); spans before the first fault are not
    counted. A kind whose faults left the group a master throughout has 0."""
    worst = {kind: 0.0 for kind, _ in faults}
    starts = [start for _, start in faults]
    for began, ended in spans:
        index = bisect_right(starts, began) - 1
        if index >= 0:
            kind = faults[index][0]
            worst[kind] = max(worst[kind], ended - began)
    return worst
