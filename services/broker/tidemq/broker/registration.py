"""BrokerRegistrar: announce this broker and its topics to every name server.

Registers at start, every `interval_s` (ref 30 s) and at once when the topic table changes;
unregisters on clean shutdown. With replication the role layer calls `announce` on every role
change: the registered broker id is 0 while master and replica_id + 1 while slave (RocketMQ's
convention, so routes name the master under id 0). Each name server is called in parallel with its own deadline
and circuit breaker, so one dead name server never delays the others.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from tidemq.broker.topic_table import TopicTable
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from tidemq.common.rpc import RpcClient
from tidemq.v1 import common_pb2, nameserver_pb2, nameserver_pb2_grpc

log = get_logger(__name__)


@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int  # the configured id; with replication, the fixed replica id
    broker_addr: str
    ha_server_addr: str = ""


MASTER = "MASTER"
SLAVE = "SLAVE"
PERM_WRITE = 4   # TopicConfig.perm: 2 read, 4 write
_ROLE_PB = {"": nameserver_pb2.REPLICA_ROLE_UNSPECIFIED, MASTER: nameserver_pb2.REPLICA_MASTER,
            SLAVE: nameserver_pb2.REPLICA_SLAVE}


def registered_id(replica_id: int, role: str) -> int:
    """The id routes know a replica by: 0 while master, replica_id + 1 while slave."""
    return 0 if role == MASTER else replica_id + 1


class BrokerRegistrar:
    def __init__(self, identity: BrokerIdentity, name_servers: list[str], topics: TopicTable,
                 interval_s: float, call_timeout_s: float = 3.0) -> None:
        self.identity = identity
        self.topics = topics
        self.interval_s = interval_s
        self.call_timeout_s = call_timeout_s
        self._clients = {addr: RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub,
                                         timeout=call_timeout_s) for addr in name_servers}
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(name_servers)),
                                        thread_name_prefix="register")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="registrar", daemon=True)
        self.master_addr = ""
        # Role as last announced ("" = replication off: register under the configured id).
        self.role = ""
        self.epoch = 0
        self.registered_id = identity.broker_id
        self.wire_port = 0  # the wire protocol's port once it listens, published in routes
        # False while the store's disk is FULL: every topic is registered without the write
        # permission, so routes steer producers to other groups (docs/storage.md).
        self.writable = True
        self.wire_tls = False  # whether it serves TLS

    def start(self) -> None:
        self.register_all()
        self._thread.start()

    def announce(self, role: str, epoch: int, *, wait: bool = True) -> int:
        """Take a new role and register it with every name server now; returns acceptances
        (with `wait=False` the registrar's thread registers and this returns -1 at once, so
        a role change is never held up by a slow name server).

        A name server still holding a newer epoch's master refuses a deposed master (STALE_EPOCH)."""
        previous = (self.registered_id, self.role)
        self.role, self.epoch = role, epoch
        self.registered_id = registered_id(self.identity.broker_id, role)
        log.info("registering role", role=role, epoch=epoch, registered_id=self.registered_id,
                 previous=previous)
        if not wait:
            self.trigger()
            return -1
        return self.register_all()

    def set_writable(self, writable: bool) -> None:
        """Register the topics with (True) or without (False) the write permission, at once:
        a new data version makes the name servers rebuild this group's routes."""
        if writable == self.writable:
            return
        self.writable = writable
        self.topics.touch()
        log.warning("registering topics " + ("writable again" if writable else
                                             "read-only: the disk is full"))
        self.trigger()

    def trigger(self) -> None:
        """Re-register now (topic table changed)."""
        self._wake.set()

    def stop(self, unregister: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.call_timeout_s + 2)
        if unregister:
            self.unregister_all()
        self._pool.shutdown(wait=False)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.register_all()

    def _request(self) -> nameserver_pb2.RegisterBrokerRequest:
        version, topics = self.topics.snapshot()
        perm_mask = ~0 if self.writable else ~PERM_WRITE
        ident = self.identity
        return nameserver_pb2.RegisterBrokerRequest(
            cluster_name=ident.cluster_name, broker_name=ident.broker_name,
            broker_id=self.registered_id, broker_addr=ident.broker_addr,
            ha_server_addr=ident.ha_server_addr,
            replica_id=ident.broker_id if self.role else 0, role=_ROLE_PB[self.role],
            epoch=self.epoch, wire_port=self.wire_port, wire_tls=self.wire_tls,
            data_version=common_pb2.DataVersion(timestamp=version.timestamp,
                                                counter=version.counter),
            topics=[common_pb2.TopicConfig(topic_name=t.name, read_queue_nums=t.queues,
                                           write_queue_nums=t.queues, perm=t.perm & perm_mask,
                                           order=t.order)
                    for t in topics],
        )

    def register_all(self) -> int:
        """Register with every name server in parallel; returns how many accepted."""
        request = self._request()
        futures = {self._pool.submit(self._call, addr, "RegisterBroker", request): addr
                   for addr in self._clients}
        wait(futures, timeout=self.call_timeout_s + 1)
        accepted = 0
        for future in futures:
            if future.done() and future.exception() is None:
                accepted += 1
                if future.result().master_addr:
                    self.master_addr = future.result().master_addr
        log.debug("registered", accepted=accepted, name_servers=len(self._clients),
                  data_version=request.data_version.counter)
        return accepted

    def unregister_all(self) -> None:
        ident = self.identity
        request = nameserver_pb2.UnregisterBrokerRequest(
            cluster_name=ident.cluster_name, broker_name=ident.broker_name,
            broker_id=self.registered_id, broker_addr=ident.broker_addr,
        )
        futures = [self._pool.submit(self._call, addr, "UnregisterBroker", request)
                   for addr in self._clients]
        wait(futures, timeout=self.call_timeout_s + 1)

    def _call(self, addr: str, method: str, request):
        try:
            return self._clients[addr].call(method, request)
        except TideMQError as exc:
            log.warning("name server call failed", name_server=addr, method=method,
                        error=str(exc))
            raise
