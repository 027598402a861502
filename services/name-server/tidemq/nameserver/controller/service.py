"""The replication controller embedded in a name server (docs/replication.md, "Controller").

One thread per name server: as a standby it watches the leader key and tries to take it when
it goes; as the active controller it reads every replication key at one revision, reconciles
every group (initialise a new group, elect where the master is not live), then follows the
changes from the next revision on — the config center's watch resumes from a revision, so no
change is missed across reconnects, and a compacted start means re-read and reconcile again.
Brokers learn the outcome by watching their group key; nothing is pushed.

The RPC entry points (`alter_in_sync`, `elect_master`, `describe`) share one lock with the
thread, so every decision is made on the view the last write left and written with CAS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter, Gauge
from tidemq.common import errors
from tidemq.common.kv import EventType, RevisionCompacted
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import live_key
from tidemq.nameserver.controller import detection
from tidemq.nameserver.controller import state as rules
from tidemq.nameserver.controller.detection import DetectionSettings, Evidence
from tidemq.nameserver.controller.lease import LEADER_KEY, Leadership, NotController
from tidemq.nameserver.controller.probe import MasterProber
from tidemq.nameserver.controller.state import Election, GroupState
from tidemq.nameserver.controller.store import (
    REPLICATION_ROOT,
    LiveReplica,
    ReplicationStore,
    ReplicationView,
    StoredGroup,
)

log = get_logger(__name__)

ELECTIONS = Counter("tidemq_nameserver_elections_total",
                    "Masters elected by this name server's controller", ["election"])
for _kind in ("clean", "unclean"):
    ELECTIONS.labels(_kind)  # zero-valued series: the dashboard shows 0 before any election
DETECTIONS = Counter("tidemq_nameserver_master_failures_detected_total",
                     "Masters fenced out before their lease expired", ["verdict"])
for _verdict in ("fenced", "gone"):
    DETECTIONS.labels(_verdict)
ACTIVE = Gauge("tidemq_nameserver_controller_active",
               "1 while this name server is the active replication controller")

POLL_S = 0.5        # how often the active loop re-checks its lease while nothing changes
RETRY_S = 1.0       # pause after a config-center failure before trying again


@dataclass(frozen=True)
class Description:
    """DescribeReplication's answer: every group's state and every live replica."""

    groups: dict[str, GroupState]
    live: dict[str, dict[int, LiveReplica]]
    controller_addr: str


class Controller:
    """Acquires the controller lease when it can and, while it holds it, keeps every replica
    group's state right."""

    def __init__(self, client: ConfigClient, addr: str = "", *, lease_ttl_s: int = 10,
                 unclean_election: bool = False,
                 detection: DetectionSettings | None = None,
                 on_election: Callable[[str, Election], None] = lambda name, election: None
                 ) -> None:
        self.client = client
        self.addr = addr
        self.store = ReplicationStore(client)
        self.leadership = Leadership(client, addr, lease_ttl_s, on_lost=self._lease_lost)
        self.unclean_default = unclean_election
        self.elections = 0
        self._on_election = on_election
        self._view = ReplicationView()
        # group -> the view's revision when it was first seen without a serving master
        self._lost_at: dict[str, int] = {}
        self.detection = detection or DetectionSettings()
        # the masters' incarnations (address, identity) to probe (replaced, not mutated)
        self._probe_targets: set[tuple[str, str]] = set()
        self.prober = MasterProber(lambda: self._probe_targets,
                                   interval_s=self.detection.probe_interval_s,
                                   timeout_s=self.detection.probe_timeout_s)
        self._lock = threading.RLock()
        self._active = False
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="controller")

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, addr: str = "") -> Controller:
        """Start contending for the lease; `addr` = this name server's advertised address (what
        the leader key and NOT_CONTROLLER answers tell others)."""
        if addr:
            self.addr = self.leadership.addr = addr
        self._thread.start()
        if self.detection.enabled:
            self.prober.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=self.client.timeout * 2 + 2)
        self.prober.stop()
        with self._lock:
            self._active = False
        self.leadership.release()

    @property
    def active(self) -> bool:
        return self._active and self.leadership.held()

    def set_unclean_default(self, enabled: bool) -> None:
        """The name-server-wide `unclean_election` changed (dynamic setting): groups that wait
        for an in-sync replica may now be elected uncleanly."""
        self.unclean_default = bool(enabled)
        self._wake.set()

    # -- RPC entry points -------------------------------------------------------------------
    def alter_in_sync(self, broker_name: str, epoch: int, master: int,
                      in_sync: list[int], incarnations: dict[int, str] | None = None
                      ) -> GroupState:
        with self._lock:
            known = self._group(broker_name)

            def decide(current: StoredGroup | None) -> GroupState:
                if current is None:
                    raise errors.NotFound(f"replica group {broker_name!r} is unknown")
                # a shrink that leaves a quorum master alone keeps the removed members as
                # eligible leaders (its live key says whether it acknowledges with a quorum)
                key = self._view.live.get(broker_name, {}).get(master)
                return rules.alter_in_sync(current.state, epoch, master, in_sync, incarnations,
                                           self._view.incarnations(broker_name),
                                           quorum=key is not None and key.quorum_acks)

            stored = self._write(broker_name, known, decide)
            if stored.mod_revision != known.mod_revision:
                log.info("in-sync set recorded", group=broker_name, epoch=epoch, master=master,
                         old=sorted(known.state.in_sync), new=sorted(stored.state.in_sync))
            return stored.state

    def elect_master(self, broker_name: str, preferred: int | None,
                     unclean: bool = False) -> GroupState:
        """An operator's election. `unclean`: the group's live replica with the largest log
        end (or `preferred`) becomes master whether or not it holds the confirmed offset —
        logged at ERROR with how many acknowledged bytes may be lost, and counted."""
        with self._lock:
            known = self._group(broker_name)
            election: list[Election] = []

            def decide(current: StoredGroup | None) -> GroupState:
                if current is None:
                    raise errors.NotFound(f"replica group {broker_name!r} is unknown")
                live, floor = (self._view.log_ends(broker_name),
                               self._view.max_epoch(broker_name))
                incarnations = self._view.incarnations(broker_name)
                if unclean:
                    outcome = rules.elect_unclean(current.state, live, floor, incarnations,
                                                  preferred)
                else:
                    outcome = rules.elect_preferred(current.state, live, preferred, floor,
                                                    incarnations)
                election[:] = [outcome]
                return self._addressed(broker_name, outcome.state)

            stored = self._write(broker_name, known, decide)
            if election and stored.state.epoch > known.state.epoch:
                self._announce(broker_name, election[0],
                               reason="forced unclean by an operator" if unclean else "requested")
            return stored.state

    def describe(self) -> Description:
        """Any name server answers: the active one from its view, a standby by reading."""
        with self._lock:
            if self.active:
                view = self._view
                return Description({n: g.state for n, g in view.groups.items()},
                                   {n: dict(r) for n, r in view.live.items()}, self.addr)
        view = self.store.snapshot()
        return Description({n: g.state for n, g in view.groups.items()}, view.live,
                           self.leadership.leader_addr())

    def _group(self, broker_name: str) -> StoredGroup:
        if not self.active:
            raise NotController(self.leadership.leader_addr())
        known = self._view.groups.get(broker_name)
        if known is None:
            raise errors.NotFound(f"replica group {broker_name!r} is unknown (no replica of it "
                                  "has been live since this controller took over)")
        return known

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.leadership.try_acquire():
                    self._act()
                else:
                    self._wait_for_vacancy()
            except errors.TideMQError as exc:
                log.warning("controller cannot reach the config center; retrying",
                            error=str(exc))
                self._stopping.wait(RETRY_S)

    def _wait_for_vacancy(self) -> None:
        revision = self.leadership.leader_revision()
        if not revision:
            return  # vanished between our attempt and now: try again at once
        with self.client.watch(LEADER_KEY, start_revision=revision + 1) as watch:
            while not self._stopping.is_set():
                event = watch.poll(POLL_S)
                if event is not None and event.kv.key == LEADER_KEY \
                        and event.type == EventType.DELETE:
                    log.info("controller key vanished; trying to take over", addr=self.addr)
                    return

    def _act(self) -> None:
        ACTIVE.set(1)
        self.prober.reset()   # what an earlier term probed says nothing now
        log.info("acting as the replication controller", addr=self.addr)
        try:
            while not self._stopping.is_set() and self.leadership.held():
                try:
                    self._follow()
                except RevisionCompacted as exc:
                    log.warning("replication watch compacted; re-reading", error=str(exc))
                except errors.TideMQError as exc:
                    if isinstance(exc, NotController):
                        break
                    log.warning("controller step failed; re-reading", error=str(exc))
                    self._stopping.wait(RETRY_S)
        finally:
            with self._lock:
                self._active = False
                self._probe_targets = set()
            ACTIVE.set(0)
            if not self._stopping.is_set():
                self.leadership.release()  # no-op if lost; frees the key if we gave up
            log.info("stopped acting as the replication controller", addr=self.addr)

    def _follow(self) -> None:
        """Reconcile from a fresh snapshot, then apply changes as they come."""
        view = self.store.snapshot()
        with self._lock:
            self._view = view
            self._lost_at = {}   # what this view cannot vouch for: proofs start over
            self._active = True  # RPCs are answered from here on: the view is loaded
            for name in sorted(view.names()):
                self._reconsider(name)
        with self.client.watch(REPLICATION_ROOT, start_revision=view.revision + 1) as watch:
            while not self._stopping.is_set() and self.leadership.held():
                event = watch.poll(POLL_S)
                with self._lock:
                    if event is not None:
                        name = self._view.apply(event.kv, event.type == EventType.DELETE)
                        if name is not None:
                            self._reconsider(name)
                    if self._wake.is_set():
                        self._wake.clear()
                        for name in sorted(self._view.names()):
                            self._reconsider(name)
                    self._detect()

    def _lease_lost(self) -> None:
        with self._lock:
            self._active = False
        self._wake.set()

    # -- failure detection ------------------------------------------------------------------
    def _detect(self) -> None:
        """Weigh every master whose lease still runs (detection.py); fence out and replace
        the ones found failed. Also tells the prober which masters to check."""
        targets, now = set(), time.monotonic()
        for name, stored in list(self._view.groups.items()):
            live = self._view.live.get(name, {})
            evidence = detection.gather(stored.state, live,
                                        lambda key: self.prober.probe(key.addr, key.identity),
                                        now)
            if evidence is None:
                continue
            master = live[stored.state.master]
            targets.add((master.addr, master.identity))
            found = detection.verdict(evidence, self.detection)
            if found is not None:
                self._fence_out(name, master, found, evidence)
        self._probe_targets = targets

    def _fence_out(self, broker_name: str, master: LiveReplica, reason: str,
                   evidence: Evidence) -> None:
        """Delete the master's live key at the revision judged (a renewal since cancels it:
        the master then still serves), then elect as for a master that is not live."""
        key = live_key(broker_name, master.replica_id)
        fence = self.leadership.fence()  # like every controller write: only while ours
        result = self.client.txn([(key, "mod", master.mod_revision), fence], {}, [key])
        if not result.succeeded:
            held = result.compared.get(fence[0])
            if held is None or held.create_revision != fence[2]:
                log.info("not fencing out: this controller's claim is gone",
                         group=broker_name, master=master.replica_id)
                return
            log.info("master renewed while judged failed; kept", group=broker_name,
                     master=master.replica_id, reason=reason)
            return
        DETECTIONS.labels("gone" if reason == detection.GONE else "fenced").inc()
        log.warning("master fenced out before its lease expired", group=broker_name,
                    master=master.replica_id, epoch=evidence.epoch, reason=reason,
                    revision=result.revision, lease=self.leadership.lease,
                    renewed_ago_s=round(evidence.renewed_ago_s, 2),
                    probe_failing_s=round(evidence.probe.failing_s, 2) if evidence.probe else None,
                    slaves={r: (c.silent_s, c.gone) if c else None
                            for r, c in evidence.slaves.items()})
        self._view.remove(broker_name, master.replica_id, result.revision)
        self._lost_at[broker_name] = max(result.revision,
                                         self._lost_at.get(broker_name, 0))
        self._reconsider(broker_name, reason=reason)

    # -- decisions --------------------------------------------------------------------------
    def _reconsider(self, broker_name: str, reason: str = "master not live") -> None:
        """Bring one group's stored state in line with who is live (the core rule:
        `rules.reconcile`). The first time the group is seen without a serving master, the
        view's revision is remembered: only replicas whose live key was written after it may
        be elected (a key outlives a killed process by up to its lease TTL)."""
        known = self._view.groups.get(broker_name)
        if known is None and not self._view.live.get(broker_name):
            return
        lost_at = self._lost_at.get(broker_name, self._view.revision)
        decisions: list[rules.Decision] = []

        def decide(current: StoredGroup | None) -> GroupState | None:
            decision = rules.reconcile(current.state if current else None,
                                       self._view.live.get(broker_name, {}), lost_at=lost_at,
                                       unclean=self._unclean(broker_name))
            decisions[:] = [decision]
            return None if decision.state is None else self._addressed(broker_name,
                                                                       decision.state)

        stored = self._write(broker_name, known, decide)
        decision = decisions[0] if decisions else None
        if decision is not None and decision.needs_master:
            self._lost_at.setdefault(broker_name, lost_at)
        else:
            self._lost_at.pop(broker_name, None)
        if decision is not None and decision.pending:
            log.info("master lost; electing once an in-sync replica proves it is alive (its "
                     "live key rewritten since)", group=broker_name, lost_at=lost_at,
                     pending=sorted(decision.pending))
        if decision is not None and decision.waiting and stored is not None:
            log.warning("group has no eligible replica; waiting", group=broker_name,
                        reason=rules.waiting_message(broker_name, stored.state,
                                                     self._view.log_ends(broker_name))
                        + f" ({decision.waiting})")
        if known is None and stored is not None:
            log.info("replica group initialised", group=broker_name,
                     master=stored.state.master, epoch=stored.state.epoch)
        if decision is not None and decision.election is not None:
            self._announce(broker_name, decision.election, reason=reason)

    def _write(self, broker_name: str, known: StoredGroup | None,
               decide: Callable[[StoredGroup | None], GroupState | None]) -> StoredGroup | None:
        stored = self.store.write_group(broker_name, known, decide, self.leadership.fence,
                                        on_written=self._written)
        if stored is not None:
            self._view.groups[broker_name] = stored
        return stored

    def _written(self, broker_name: str, stored: StoredGroup) -> None:
        """One line per group write this controller made, with its store revision and the
        term (controller lease) it wrote under: the chaos suite checks against the store's
        history that no two controllers' writes interleave."""
        log.info("controller wrote group state", group=broker_name,
                 revision=stored.mod_revision, lease=self.leadership.lease,
                 master=stored.state.master, epoch=stored.state.epoch)

    def _addressed(self, broker_name: str, state: GroupState) -> GroupState:
        replica = self._view.live.get(broker_name, {}).get(state.master)
        if replica is None:
            return state
        return state.with_addrs(replica.addr, replica.ha_addr)

    def _unclean(self, broker_name: str) -> bool:
        return self._view.unclean.get(broker_name, self.unclean_default)

    def _announce(self, broker_name: str, election: Election, *, reason: str) -> None:
        self.elections += 1
        ELECTIONS.labels("clean" if election.clean else "unclean").inc()
        fields = dict(group=broker_name, old_master=election.old_master,
                      new_master=election.state.master, epoch=election.state.epoch,
                      in_sync=sorted(election.state.in_sync),
                      election="clean" if election.clean else "unclean", reason=reason)
        if election.clean:
            log.info("master elected", **fields)
        else:
            log.error("master elected uncleanly: acknowledged messages may be lost",
                      candidates=election.candidates, lost_bytes=election.lost_bytes,
                      **fields)
        self._on_election(broker_name, election)
