"""When the controller may replace a master whose lease has not expired yet — pure rules.

A broker lease (10 s) is what lets a master ride out a config-store failover, but waiting for
it to expire makes a frozen master (SIGSTOP, a stalled VM, a partition) hold its group for the
whole TTL. The controller therefore weighs three independent signals (docs/replication.md,
"Detecting a failed master"):

- the master's own renewals: a master renews its live key every refresh with a compare-and-set
  and acknowledges nothing `fence_s` after sending the last renewal that succeeded;
- the controller's probe of the master (a gRPC health check): answered, timing out, or refused;
- the slaves' HA streams: every live in-sync slave reports how long it has not heard its
  master at the group's epoch, and whether the master's end closed or refused the stream.

Two verdicts, each followed by deleting the master's live key at the revision the controller
saw (compare-and-set: a renewal in between cancels it) and a clean election:

- FENCED: the last renewal was seen more than `fence_s` + `margin_s` ago, so the master
  can no longer acknowledge even if it lives; and the probe and every in-sync slave agree it is
  silent. The renewal alone would suffice for safety; the other two keep a master that is
  alive but slow to reach the config center (a loaded machine) from being replaced.
- GONE: the master's process is gone — the probe of this incarnation, answered before, is now
  refused and every in-sync slave saw the stream closed or refused — and the group
  acknowledges only what a second in-sync replica confirmed (SYNC_MASTER,
  min_in_sync_replicas >= 2), so even a master wrongly judged gone could confirm nothing once
  its slaves follow the new epoch. No wait.

Without a live in-sync slave there is nothing to elect cleanly: no verdict (the lease decides).

Evidence is about one incarnation of the master (`gather`): a restarted master registers a new
one at the same address, maybe at the same epoch, and what the prober or a slave found about
the previous process never counts against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tidemq.configclient.replication import GroupState

FENCED = "master silent past its fence"
GONE = "master process gone"


@dataclass(frozen=True)
class DetectionSettings:
    """The controller's side of failure detection (name-server settings `failover_*`)."""

    enabled: bool = True
    probe_interval_s: float = 0.5   # a health check of every master this often
    probe_timeout_s: float = 1.0    # a check not answered within this failed
    probe_failing_s: float = 1.0    # FENCED: probes failing (not answered) at least this long
    silence_s: float = 2.0          # FENCED: every in-sync slave heard nothing this long
    margin_s: float = 0.5           # FENCED: beyond the master's fence (scheduling, drift)


@dataclass(frozen=True)
class Contact:
    """A slave's report of its master (from its live key, as of its last renewal)."""

    epoch: int
    silent_s: float
    gone: bool


@dataclass(frozen=True)
class Probe:
    """The controller's probes of one master incarnation: how long they have failed (0 = the
    last one was answered), whether the last failure was a refused connection, and whether
    this incarnation ever answered one (a process that served and now refuses is gone; one
    that never answered may still be starting: its key is written before its gRPC server
    listens)."""

    failing_s: float
    refused: bool
    answered: bool
@dataclass(frozen=True)
class Evidence:
    epoch: int                       # the group's epoch (the master's)
    renewed_ago_s: float             # since the controller saw the master's live key change
    fence_s: float                   # the master's fence as it publishes it (0 = unknown)
    quorum_acks: bool                # SYNC_MASTER with min_in_sync_replicas >= 2
    probe: Probe | None              # None = not probed yet (e.g. just took over)
    slaves: Mapping[int, Contact | None]   # every live in-sync slave -> its report


def verdict(evidence: Evidence, settings: DetectionSettings) -> str | None:
    """FENCED, GONE or None (leave the master to its lease)."""
    if not settings.enabled or not evidence.slaves or evidence.probe is None:
        return None
    contacts = list(evidence.slaves.values())
    if any(c is None or c.epoch != evidence.epoch for c in contacts):
        return None   # a slave that follows nobody yet, or another epoch, cannot vouch
    probe = evidence.probe
    if probe.refused and probe.answered and evidence.quorum_acks and all(c.gone for c in contacts):
        return GONE
    if evidence.fence_s <= 0 or evidence.renewed_ago_s < evidence.fence_s + settings.margin_s:
        return None
    if probe.failing_s < settings.probe_failing_s:
        return None
    if all(c.gone or c.silent_s >= settings.silence_s for c in contacts):
        return FENCED
    return None


class LiveKey(Protocol):
    """What detection reads of a replica's live key (`store.LiveReplica`)."""

    addr: str
    fence_ms: int
    quorum_acks: bool
    contact: Contact | None
    seen_at: float       # monotonic: when the controller saw the key last change
    mod_revision: int    # the revision of its last write
    registered: int      # the revision from which the key has shown its current incarnation


def gather(state: GroupState, live: Mapping[int, LiveKey],
           probe: Callable[[LiveKey], Probe | None], now: float) -> Evidence | None:
    """The evidence on a group's master as the controller's view holds it (None = no live
    master to judge): its own key, the prober's checks of this incarnation (`probe`) and the
    live in-sync slaves' reports.

    Only evidence about the master's current incarnation counts. A slave's report written
    before that incarnation registered (its key's last write is not after the master key's
    `registered` revision) is about a previous process of the master — at the same address
    and, when the group kept its master across the restart, at the same epoch — so it
    vouches for nothing (None: no verdict)."""
    master = live.get(state.master)
    if master is None or not master.addr:
        return None
    return Evidence(
        epoch=state.epoch, renewed_ago_s=now - master.seen_at,
        fence_s=master.fence_ms / 1000, quorum_acks=master.quorum_acks,
        probe=probe(master),
        slaves={r: live[r].contact if live[r].mod_revision > master.registered else None
                for r in state.in_sync if r != state.master and r in live})
