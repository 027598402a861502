"""OffsetCopier: a slave copies its master's committed consumer offsets, and its group
coordinator's Stable groups, every ~1 s.

A group's offsets (with their commits' metadata strings) live on the broker that owns its queues, so a failover would rewind every
group to the new master's stale table without this. The slave asks the master for its whole
table (GetAllConsumerOffsets) and replaces its own; after a failover the new master starts from
the copy it last took, so a group re-reads at most ~1 s of commits (at-least-once), never skips.
A slave also answers QueryOffsets from the copy while its group has no master. The groups
(`coordinated_groups`) are what the replica's coordinator takes over when it is promoted
(coordinator/handover.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidemq.broker.coordinator.handover import GroupHandover
from tidemq.broker.group_rpc import handovers_from_pb
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.rpc import RpcClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc

log = get_logger(__name__)


class OffsetCopier:
    def __init__(self, offsets: ConsumerOffsetManager, master_addr: Callable[[], str], *,
                 interval_s: float = 1.0, timeout_s: float = 2.0) -> None:
        self.offsets = offsets
        self.master_addr = master_addr  # "" while this replica is master or there is none
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.copies = 0
        self.coordinated_groups: list[GroupHandover] = []   # as of the last copy
        self._clients: dict[str, RpcClient] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offset-copy", daemon=True)

    def start(self) -> OffsetCopier:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 1)

    def copy_once(self) -> bool:
        """One copy from the current master; False if there is none or it did not answer."""
        addr = self.master_addr()
        if not addr:
            return False
        client = self._clients.get(addr)
        if client is None:
            client = self._clients[addr] = RpcClient(addr, broker_pb2_grpc.BrokerServiceStub,
                                                     timeout=self.timeout_s, retries=0)
        try:
            reply = client.call("GetAllConsumerOffsets",
                                broker_pb2.GetAllConsumerOffsetsRequest(), idempotent=True)
        except errors.TideMQError as exc:
            log.debug("offset copy failed", master=addr, error=str(exc))
            return False
        if addr != self.master_addr():
            return False  # the master changed during the call: this copy may be stale
        self.offsets.replace_all(
            {g.consumer_group: [(o.topic, o.queue_id, o.offset) for o in g.offsets]
             for g in reply.groups},
            {g.consumer_group: {(o.topic, o.queue_id): o.metadata for o in g.offsets
                                if o.metadata}
             for g in reply.groups})
        self.coordinated_groups = handovers_from_pb(reply.coordinated_groups)
        self.copies += 1
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.copy_once()
