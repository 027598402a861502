"""What a chaos run must prove, as pure functions over what the producers were told and what
the replicas hold (no process, no network here, so the checks themselves are unit-tested).

- every acknowledged message is readable at the queue offset its acknowledgement gave;
- no queue offset holds two different messages across replicas (replicas never diverge
  below the confirmed offset: their CommitLogs are byte-identical up to it);
- a message stored twice (a retried send whose first attempt was stored but not
  acknowledged) is a duplicate, counted and reported, never a failure: delivery is
  at-least-once and the unique id makes it detectable.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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


def summary(seed: int, faults: int, verdict: Verdict, longest_outage_s: float,
            failed_sends: int) -> str:
    return (f"chaos seed={seed} faults={faults} acks={verdict.acks} "
            f"losses={len(verdict.losses)} duplicates={verdict.duplicates} "
            f"diverged={len(verdict.diverged)} unacknowledged_sends={failed_sends} "
            f"longest_write_outage={longest_outage_s:.2f}s")
