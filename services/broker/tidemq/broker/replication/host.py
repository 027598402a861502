"""BrokerRoleHost: what a role change does to one broker — store, gate, HA stream, routes.

The ReplicaManager decides; this carries it out, in an order that never acknowledges
wrongly: a new master takes its epoch in the store and sets its gate *before* it registers
as id 0 (so the first send it gets is already gated); a replica stepping down deposes its gate
first (held appends answer FLUSH_SLAVE_TIMEOUT, new ones NOT_MASTER) and only then follows
the new master. The HA server (one per mastership) and client run on the broker's event loop
(`run_on_loop`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from tidemq.broker.registration import MASTER, SLAVE, BrokerRegistrar, registered_id
from tidemq.broker.replication.controller_client import ControllerClient
from tidemq.broker.store import MessageStore
from tidemq.broker.store.config import NotMaster
from tidemq.broker.store.ha.client import HAClient
from tidemq.broker.store.ha.config import HAConfig
from tidemq.broker.store.ha.gate import ReplicationGate
from tidemq.broker.store.ha.in_sync import InSyncTracker
from tidemq.broker.store.ha.server import HAServer
from tidemq.common.logs import get_logger

log = get_logger(__name__)

RunOnLoop = Callable[[Coroutine[Any, Any, Any]], Any]


class LeasedGate(ReplicationGate):
    """A gate that also refuses appends, and answers held ones FLUSH_SLAVE_TIMEOUT, once the
    master may no longer serve (`ReplicaManager.may_serve`: its lease may have expired or the
    controller may have fenced it out): a paused master must not acknowledge after another may
    have been elected (one clock read per append batch or answered group, never per message)."""

    def __init__(self, *args, lease_valid: Callable[[], bool], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lease_valid = lease_valid

    def check_writable(self) -> None:
        if not self.lease_valid():
            raise NotMaster("this master's lease in the config center may have expired; it "
                            "acknowledges nothing more until re-elected")
        super().check_writable()

    def may_acknowledge(self) -> bool:
        return self.lease_valid() and super().may_acknowledge()


class BrokerRoleHost:
    def __init__(self, *, store: MessageStore, registrar: BrokerRegistrar,
                 controller: ControllerClient, ha_config: HAConfig, broker_name: str,
                 replica_id: int, ha_listen: tuple[str, int], run_on_loop: RunOnLoop) -> None:
        self.store = store
        self.registrar = registrar
        self.controller = controller
        self.ha_config = ha_config
        self.broker_name = broker_name
        self.replica_id = replica_id
        self.ha_listen = ha_listen              # (host, port) the HA server binds as master
        self.run_on_loop = run_on_loop
        self.lease_valid: Callable[[], bool] = lambda: True  # the manager's, set by the app
        # the incarnations the group state recorded for its in-sync members (the manager's)
        self.recorded_incarnations: Callable[[], Mapping[int, str]] = lambda: {}
        # the confirmed offset the group state recorded (the manager's): a new mastership's
        # tracker holds members and joining slaves to at least that much
        self.recorded_confirmed: Callable[[], int] = lambda: 0
        self.role = ""
        self.epoch = 0
        self.gate: LeasedGate | None = None
        self.tracker: InSyncTracker | None = None
        self._ha_server: HAServer | None = None
        self._ha_client: HAClient | None = None
        self._rebuilds = 0   # rebuilds of the HA clients already stopped
        # told the master's HA server (or None): the lag-bytes / in-sync gauges read it
        self.on_server: Callable[[HAServer | None], None] = lambda server: None
        # this replica became master / stopped being master (the group coordinator follows)
        self.on_promoted: Callable[[], None] = lambda: None
        self.on_demoted: Callable[[], None] = lambda: None

    # -- RoleHost ---------------------------------------------------------------------------
    def log_end(self) -> int:
        return self.store.commitlog_max_offset()

    def last_epoch(self) -> int:
        return self.store.epochs.last_epoch

    def incarnation(self) -> str:
        return self.store.incarnation

    def become_master(self, epoch: int, in_sync: frozenset[int]) -> None:
        self._stop_following()
        config = self.ha_config
        tracker = InSyncTracker(self.replica_id, set(in_sync), config.replica_lag_max_ms,
                                config.min_in_sync_replicas,
                                confirmed_floor=min(self.recorded_confirmed(), self.log_end()))
        tracker.incarnations.update(self.recorded_incarnations())
        tracker.incarnations[self.replica_id] = self.incarnation()
        gate = LeasedGate(tracker, self.store.commitlog_max_offset, sync=config.sync,
                          timeout_ms=config.sync_replication_timeout_ms,
                          lease_valid=self.lease_valid)
        # The gate first, then the store's role: no append is ever taken ungated.
        self.store.set_replication_gate(gate)
        self.store.become_master(epoch)
        self.gate, self.tracker, self.role, self.epoch = gate, tracker, MASTER, epoch
        server = HAServer(self.store, gate, config, propose=self._proposer(epoch))
        self.run_on_loop(server.start(*self.ha_listen))
        self._ha_server = server
        self.on_server(server)
        self.on_promoted()
        self.registrar.announce(MASTER, epoch, wait=False)

    def become_slave(self, epoch: int, master_addr: str, master_ha_addr: str) -> None:
        self._depose()
        self._stop_following()
        self.role, self.epoch = SLAVE, epoch
        if master_ha_addr:
            client = HAClient(self.store, self.replica_id, master_ha_addr, self.ha_config,
                              follow_epoch=epoch)
            self.run_on_loop(_started(client))
            self._ha_client = client
        self.registrar.announce(SLAVE, epoch, wait=False)

    def update_in_sync(self, in_sync: frozenset[int]) -> None:
        """The controller recorded a set (this master's proposal, normally already applied)."""
        tracker, gate = self.tracker, self.gate
        if tracker is None or gate is None:
            return

        recorded = self.recorded_incarnations()

        async def apply() -> None:
            tracker.apply(set(in_sync), time.monotonic() * 1000)
            for replica in in_sync:   # what a handshake told us is newer than the record
                if replica in recorded:
                    tracker.incarnations.setdefault(replica, recorded[replica])
            gate.on_progress()

        self.run_on_loop(apply())

    def master_contact(self) -> tuple[float, bool] | None:
        """A slave: (seconds since its master's HA stream was last heard, whether the
        master's end closed or refused it); None when it follows nobody."""
        client = self._ha_client
        return client.contact() if client is not None else None

    def step_down(self) -> None:
        """Lease lost: acknowledge nothing more, at once; routes follow."""
        self._depose()
        self.role = SLAVE
        self.registrar.announce(SLAVE, self.epoch)  # before any unregister at stop

    def close(self) -> None:
        """Broker shutdown: no HA server or client left on the loop."""
        self._depose()
        self._stop_following()

    # -- questions --------------------------------------------------------------------------
    def progress(self) -> list[tuple[int, int, int, int, bool]]:
        """Master: (replica, log end, lag bytes, lag ms, in sync) of every known slave."""
        tracker = self.tracker
        if self.role != MASTER or tracker is None:
            return []
        end = self.log_end()
        now_ms = time.monotonic() * 1000
        return [(replica, acked, max(0, end - acked), tracker.lag_ms(replica, end, now_ms),
                 replica in tracker.in_sync)
                for replica, acked in sorted(tracker.acked.items())]

    def rebuilding(self) -> set[int]:
        """Master: the slaves told to rebuild that have not reached its log end of then."""
        server = self._ha_server
        return set(server.rebuilding) if self.role == MASTER and server is not None else set()

    def rebuild_progress(self) -> tuple[int, int | None]:
        """Slave: (rebuilds started, bytes the current one still copies, None when not
        rebuilding)."""
        client = self._ha_client
        if client is None:
            return self._rebuilds, None
        target = client.rebuild_target
        remaining = None if target is None else max(0, target - self.log_end())
        return self._rebuilds + client.rebuilds, remaining

    def in_sync_slave_ids(self) -> list[int]:
        """Master: the registered broker ids of its in-sync slaves (how routes know them),
        sorted."""
        tracker = self.tracker
        if self.role != MASTER or tracker is None:
            return []
        return sorted(registered_id(replica, SLAVE) for replica in tracker.in_sync
                      if replica != self.replica_id)

    def confirmed_offset(self) -> int:
        """Master: the smallest log end every in-sync member has. Slave: the confirmed offset
        its master last told it, where its reads stop (a slave holding more serves less).
        -1: none known, or reads are not fenced."""
        if self.role == MASTER:
            gate = self.gate
            return gate.confirmed_offset() if gate is not None else -1
        known = self.store.confirmed_offset()
        return -1 if known is None else known

    # -- internals --------------------------------------------------------------------------
    def _proposer(self, epoch: int):
        """The HA server's in-sync changes go to the controller first; the blocking call runs
        on a thread so the loop keeps shipping bytes meanwhile."""
        async def propose(new_set) -> bool:
            tracker = self.tracker
            known = tracker.incarnations if tracker is not None else {}
            incarnations = {r: known[r] for r in new_set if known.get(r)}
            return await asyncio.to_thread(self.controller.alter_in_sync, self.broker_name,
                                           epoch, self.replica_id, frozenset(new_set),
                                           incarnations)
        return propose

    def _depose(self) -> None:
        """Stop acknowledging: the gate refuses and answers what it holds, the store refuses
        local appends, and only then is the gate removed (an append between the two would
        otherwise find a master store with no gate)."""
        gate, self.gate, self.tracker = self.gate, None, None
        server, self._ha_server = self._ha_server, None
        if gate is not None:
            gate.depose()
            self.on_demoted()
        self.store.become_slave()
        if gate is not None:
            self.store.set_replication_gate(None)
        if server is not None:
            self.on_server(None)
            self.run_on_loop(server.stop())

    def _stop_following(self) -> None:
        client, self._ha_client = self._ha_client, None
        if client is not None:
            self.run_on_loop(client.stop())
            self._rebuilds += client.rebuilds


async def _started(client: HAClient) -> None:
    client.start()  # schedules its task on the running loop
