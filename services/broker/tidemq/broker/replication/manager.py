"""ReplicaManager: one replica's membership of its group, through the config center.

It holds the replica's live key `/tidemq/replication/live/<broker_name>/<replica_id>` under a
lease of its own (TTL `broker_lease_ttl_s`), rewrites it every `refresh_s` with the replica's
log end and epoch (the controller elects the most complete in-sync replica from them), and
watches `/tidemq/replication/groups/<broker_name>`, the state only the controller writes. Each
state (and every tick) goes through `roles.decide`; the action is carried out by a `RoleHost`
(store, HA stream, gate, registration — `host.py`), so this module knows nothing of them.

A master that cannot renew its lease steps down *before* the config center can expire it: the
lease is counted valid until the send time of the last successful keep-alive plus the TTL,
which is never later than the server's own expiry, and the gate refuses appends past it
(`lease_valid`). A deposed master therefore stops acknowledging before another is elected.

It also renews its live key itself every `refresh_s`, with a compare-and-set on the key's last
revision, and acknowledges nothing later than `fence_s` after sending the last renewal that
succeeded (`may_serve`, on the monotonic clock). The controller may replace a master whose lease
still runs only by deleting that key at the revision it saw more than `fence_s` ago
(docs/replication.md, "Detecting a failed master"): after that no renewal can succeed, so a
frozen master that resumes finds itself fenced out before it acknowledges anything.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Protocol

from tidemq.broker.replication import metrics, roles
from tidemq.broker.replication.roles import GroupState, LocalRole
from tidemq.common import errors
from tidemq.common.kv import EventType, RevisionCompacted
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import group_key, live_key

log = get_logger(__name__)

RETRY_S = 1.0  # pause after a config-center failure before a new session
CONTACT_CHECK_S = 0.1  # how often a slave looks whether its master's end went away


class LeaseLost(Exception):
    """The live key's lease expired or could not be renewed within its TTL."""


class RoleHost(Protocol):
    """What a role change does to the broker (implemented by `host.BrokerRoleHost`)."""

    def log_end(self) -> int: ...

    def last_epoch(self) -> int: ...

    def incarnation(self) -> str: ...

    def confirmed_offset(self) -> int: ...

    def become_master(self, epoch: int, in_sync: frozenset[int]) -> None: ...

    def become_slave(self, epoch: int, master_addr: str, master_ha_addr: str) -> None: ...

    def update_in_sync(self, in_sync: frozenset[int]) -> None: ...

    def step_down(self) -> None: ...

    def master_contact(self) -> tuple[float, bool] | None: ...


class ReplicaManager:
    def __init__(self, config_center: str, broker_name: str, replica_id: int, *, addr: str,
                 ha_addr: str, host: RoleHost, lease_ttl_s: int = 10,
                 refresh_s: float = 1.0, fence_s: float = 3.0,
                 quorum_acks: bool = False) -> None:
        self.broker_name = broker_name
        self.replica_id = replica_id
        self.addr = addr
        self.ha_addr = ha_addr
        self.host = host
        self.lease_ttl_s = lease_ttl_s
        self.refresh_s = refresh_s
        self.fence_s = fence_s
        self.quorum_acks = quorum_acks  # SYNC_MASTER with min_in_sync_replicas >= 2
        self.role = LocalRole()
        self.state: GroupState | None = None
        self.lease_losses = 0
        # Short calls: a config center that does not answer must not eat the lease's TTL.
        self._client = ConfigClient(config_center, timeout=max(0.5, min(3.0, lease_ttl_s / 4)))
        self._valid_until = 0.0  # monotonic; the lease is surely alive before this instant
        self._serve_until = 0.0  # monotonic; send time of the last renewal + fence_s
        self._lease = 0
        self._revision = 0  # the live key's mod revision as this replica last wrote it
        self._renewals = 0
        self._published_gone = False  # the master's end was gone in the last published value
        self._recovery_reported = False
        self._stop = threading.Event()
        self._lock = threading.Lock()  # role changes vs. stop
        self._thread = threading.Thread(target=self._run, name="replica-manager", daemon=True)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> ReplicaManager:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Leave the group: step down, stop renewing and revoke the lease (the controller
        elects another master at once instead of after the TTL)."""
        self._stop.set()
        self._thread.join(timeout=self.lease_ttl_s + 5)
        with self._lock:
            if self.role.role == roles.MASTER:
                self.host.step_down()
                self.role = roles.stepped_down(self.role)
            lease, self._lease = self._lease, 0
            if lease:
                try:
                    self._client.lease_revoke(lease)
                except errors.TideMQError as exc:
                    log.info("lease revoke failed; it expires by itself", error=str(exc))
        self._client.close()

    # -- questions ------------------------------------------------------------------------
    def lease_valid(self) -> bool:
        """True while the live key's lease is surely alive."""
        return time.monotonic() < self._valid_until

    def may_serve(self) -> bool:
        """True while this replica may acknowledge as master: its lease is alive and its last
        renewal is recent enough that the controller cannot have fenced it out (the gate asks
        before appending and again before answering)."""
        return time.monotonic() < min(self._valid_until, self._serve_until)

    @property
    def master_addr(self) -> str:
        """The group's master's gRPC address as last seen ("" = none, or this replica)."""
        state = self.state
        if state is None or state.master in (roles.NO_MASTER, self.replica_id):
            return ""
        return state.master_addr

    # -- the loop -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except LeaseLost as exc:
                self.lease_losses += 1
                metrics.LEASE_LOSSES.inc()
                log.warning("replica lease lost; stepping down if master", error=str(exc),
                            group=self.broker_name, replica=self.replica_id)
                self._step_down()
            except (errors.TideMQError, RevisionCompacted) as exc:
                log.warning("replication session failed; retrying", error=str(exc),
                            group=self.broker_name, replica=self.replica_id)
                if not self.lease_valid():
                    self._step_down()
            self._stop.wait(RETRY_S)

    def _session(self) -> None:
        """One lease: announce this replica, follow the group state until the lease is lost."""
        key = live_key(self.broker_name, self.replica_id)
        sent = time.monotonic()
        self._lease = self._client.lease_grant(self.lease_ttl_s)
        self._valid_until = sent + self.lease_ttl_s
        # A key left by this replica's previous process: drop it first so the controller sees
        # the restart (and re-elects if this replica was master) rather than a value change.
        if self.role.role == "":
            self._client.delete(key)
        self._put_live(key, force=True, sent=sent)  # under this session's new lease
        current = self._client.range(group_key(self.broker_name))
        self._observe(next((kv.value for kv in current.kvs
                            if kv.key == group_key(self.broker_name)), None))
        with self._client.watch(group_key(self.broker_name),
                                start_revision=current.revision + 1) as watch:
            next_refresh = time.monotonic() + self.refresh_s
            while not self._stop.is_set():
                event = watch.poll(min(CONTACT_CHECK_S, max(0.0, next_refresh - time.monotonic())))
                if event is not None and event.kv.key == group_key(self.broker_name):
                    self._observe(None if event.type == EventType.DELETE else event.kv.value)
                if self._master_gone() != self._published_gone:
                    self._publish(key)  # the controller's fast path waits for this
                if time.monotonic() >= next_refresh:
                    self._renew(key)
                    self._reconcile()  # retries an action that failed on the last try
                    next_refresh = time.monotonic() + self.refresh_s

    def _renew(self, key: str) -> None:
        sent = time.monotonic()
        try:
            ttl = self._client.lease_keepalive(self._lease)
        except errors.TideMQError as exc:
            if time.monotonic() >= self._valid_until:
                raise LeaseLost(f"no keep-alive for {self.lease_ttl_s} s: {exc}") from exc
            log.info("lease keep-alive failed; retrying", error=str(exc))
            return
        if not ttl:
            self._valid_until = 0.0
            raise LeaseLost(f"lease {self._lease} expired")
        self._valid_until = sent + self.lease_ttl_s
        self._publish(key)

    def _publish(self, key: str) -> None:
        """A renewal that fails for want of the config center is tried again next tick (the
        master stops acknowledging when its fence passes); a fenced-out one ends the session."""
        try:
            self._put_live(key)
        except errors.TideMQError as exc:
            if time.monotonic() >= self._valid_until:
                raise LeaseLost(f"no renewal for {self.lease_ttl_s} s: {exc}") from exc
            log.info("live-key renewal failed; retrying", error=str(exc))

    def _master_gone(self) -> bool:
        contact = self.host.master_contact() if self.role.role == roles.SLAVE else None
        return contact is not None and contact[1]

    def _put_live(self, key: str, *, force: bool = False, sent: float | None = None) -> None:
        """Renew the live key: address, epoch, log end, and what the controller's failure
        detection reads (`fence_ms`, `quorum_acks`, a slave's contact with its master). Every
        renewal is a write (a counter moves), compare-and-set on the revision this replica
        wrote last: one that fails means the controller deleted the key to fence this replica
        out (LeaseLost). The epoch is the highest this replica knows, persisted in its store:
        the controller's next epoch goes above it even if the config store lost the write that
        granted it."""
        sent = time.monotonic() if sent is None else sent
        epoch = max(self.role.epoch, self.host.last_epoch())
        self._renewals += 1
        doc = {"addr": self.addr, "ha_addr": self.ha_addr, "epoch": epoch,
               "log_end": self.host.log_end(), "fence_ms": int(self.fence_s * 1000),
               "quorum_acks": self.quorum_acks, "renewal": self._renewals,
               "incarnation": self.host.incarnation(),
               # a master's confirmed offset: the controller never elects below it
               "confirmed": self.host.confirmed_offset() if self.role.role == roles.MASTER
               else -1}
        contact = self.host.master_contact() if self.role.role == roles.SLAVE else None
        if contact is not None:
            doc["contact"] = {"epoch": self.role.epoch, "silent_ms": int(contact[0] * 1000),
                              "gone": contact[1]}
        value = json.dumps(doc)
        try:
            result = self._client.put(key, value, lease=self._lease,
                                      expected_revision=None if force else self._revision)
        except errors.NotFound as exc:  # LEASE_NOT_FOUND: expired between keep-alive and put
            self._valid_until = 0.0
            raise LeaseLost(str(exc)) from exc
        if not result.succeeded:
            # The controller only ever deletes a live key; one still under our lease moved
            # because a write of ours whose answer was lost applied: take its revision.
            current = self._client.get(key)
            if current is not None and current.lease == self._lease:
                result = self._client.put(key, value, lease=self._lease,
                                          expected_revision=current.mod_revision)
            if not result.succeeded:
                self._valid_until = self._serve_until = 0.0
                raise LeaseLost("the controller fenced this replica out (deleted its live key): "
                                "it acknowledges nothing more under this lease")
        self._revision = result.revision
        self._serve_until = sent + self.fence_s
        self._published_gone = contact is not None and contact[1]

    def _observe(self, raw: bytes | None) -> None:
        try:
            self.state = GroupState.from_json(json.loads(raw)) if raw is not None else None
        except (KeyError, ValueError, TypeError) as exc:
            log.error("unreadable group state; ignored", group=self.broker_name, error=str(exc))
            return
        self._report_recovery()
        self._reconcile()

    def _report_recovery(self) -> None:
        """Once per start: how this replica's log compares with the group's confirmed offset
        (a wiped disk or a lost unflushed tail comes back behind it: out of the in-sync set
        until it catches up)."""
        state = self.state
        if self._recovery_reported or state is None:
            return
        self._recovery_reported = True
        end = self.host.log_end()
        fields = dict(group=self.broker_name, replica=self.replica_id,
                      incarnation=self.host.incarnation(), log_end=end,
                      confirmed_offset=state.confirmed_offset)
        if end < state.confirmed_offset:
            log.warning("replica came back behind the group's confirmed offset: out of the "
                        "in-sync set until it catches up",
                        behind_bytes=state.confirmed_offset - end, **fields)
        else:
            log.info("replica came back holding the group's confirmed offset", **fields)

    @property
    def waiting(self) -> str:
        """"" unless the group waits for an electable replica: then the sentence why."""
        state = self.state
        if state is None or not state.waiting_for:
            return ""
        return (f"broker group {self.broker_name} has no master: no live replica holds its "
                f"confirmed offset {state.confirmed_offset} under an in-sync incarnation; "
                f"waiting for replica(s) {sorted(state.waiting_for)} to return (or an "
                f"operator's unclean election)")

    def _reconcile(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            action = roles.decide(self.replica_id, self.role, self.state,
                                  self.host.incarnation(), self.host.log_end())
            if action is None:
                return
            if isinstance(action, roles.BecomeMaster) and not self.may_serve():
                return  # never take mastership on a lease that may be gone
            try:
                self._carry_out(action)
            except Exception:  # the next tick retries from the same state
                log.exception("role change failed; retrying", action=str(action))
                return
            self.role = roles.after(self.role, action)
            if not isinstance(action, roles.UpdateInSync):
                metrics.ROLE.set(1 if self.role.role == roles.MASTER else 0)
                metrics.ROLE_CHANGES.labels(self.role.role).inc()

    def _carry_out(self, action: roles.Action) -> None:
        log.info("role change", group=self.broker_name, replica=self.replica_id,
                 action=type(action).__name__, epoch=getattr(action, "epoch", self.role.epoch))
        if isinstance(action, roles.BecomeMaster):
            self.host.become_master(action.epoch, action.in_sync)
        elif isinstance(action, roles.BecomeSlave):
            self.host.become_slave(action.epoch, action.master_addr, action.master_ha_addr)
        else:
            self.host.update_in_sync(action.in_sync)

    def _step_down(self) -> None:
        with self._lock:
            if self.role.role == roles.MASTER:
                self.host.step_down()
                self.role = roles.stepped_down(self.role)
                metrics.ROLE.set(0)
                metrics.ROLE_CHANGES.labels(roles.SLAVE).inc()
            self._lease = 0
