"""RouteRegistry: the name server's four tables (RocketMQ RouteInfoManager), no transport.

Brokers register with every name server; the registry keeps who is alive, which broker names
form which cluster, and which broker names serve which topic. Routes are rebuilt only from a
master's registration whose data version changed (or its first one), so the 30 s heartbeat of
an unchanged broker costs a dictionary lookup. Every removal cascades: an empty BrokerData,
cluster or topic disappears with its last member, so a route never names a dead broker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common.errors import InvalidArgument, PreconditionFailed, TopicNotExist

MASTER_ID = 0
PERM_READ = 2
PERM_WRITE = 4


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version: changes whenever its topic table changes."""

    timestamp: int = 0
    counter: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    wire_ports: dict[str, tuple[int, bool]] = field(default_factory=dict)  # addr -> (port, tls)


@dataclass(slots=True)
class BrokerLiveInfo:
    cluster: str
    broker_name: str
    broker_id: int
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    replica_id: int = 0
    role: str = ""  # MASTER | SLAVE; "" = a broker without replication
    epoch: int = 0
    wire_port: int = 0  # 0 = not offered
    wire_tls: bool = False


@dataclass(frozen=True, slots=True)
class Registration:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""
    data_version: DataVersion = DataVersion()
    topics: tuple[TopicConfig, ...] = ()
    replica_id: int = 0
    role: str = ""
    epoch: int = 0
    wire_port: int = 0
    wire_tls: bool = False


@dataclass(frozen=True, slots=True)
class RegisterResult:
    master_addr: str
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class TopicRoute:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, set[str]]
    live_brokers: dict[str, BrokerLiveInfo]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _validate(reg: Registration) -> None:
    for name, value in (("cluster_name", reg.cluster_name), ("broker_name", reg.broker_name),
                        ("broker_addr", reg.broker_addr)):
        if not value:
            raise InvalidArgument(f"registration is missing {name}")
    if reg.broker_id < 0:
        raise InvalidArgument(f"broker_id must be >= 0, got {reg.broker_id}")
    if reg.epoch < 0 or reg.replica_id < 0:
        raise InvalidArgument(f"epoch and replica_id must be >= 0, got {reg.epoch}, "
                              f"{reg.replica_id}")


class RouteRegistry:
    """The routing tables behind one lock; `clock` returns milliseconds (injectable for tests)."""

    def __init__(self, clock: Callable[[], int] = wall_clock_ms) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self._order_conf: dict[str, dict[str, int]] = {}  # topic -> broker_name -> write queues

    # -- registration -------------------------------------------------------------------------

    def register(self, reg: Registration) -> RegisterResult:
        _validate(reg)
        with self._lock:
            self._refuse_deposed_master(reg)
            previous = self.broker_live_table.get(reg.broker_addr)
            if previous is not None and (previous.cluster, previous.broker_name,
                                         previous.broker_id) != (reg.cluster_name, reg.broker_name,
                                                                 reg.broker_id):
                self._remove_locked(reg.broker_addr)  # the address changed identity
                previous = None
            self._place_broker(reg)
            if reg.broker_id == MASTER_ID and (
                previous is None or previous.data_version != reg.data_version
            ):
                self._rebuild_routes(reg.broker_name, reg.topics)
            self.broker_live_table[reg.broker_addr] = BrokerLiveInfo(
                reg.cluster_name, reg.broker_name, reg.broker_id, self._clock(),
                reg.data_version, reg.ha_server_addr, reg.replica_id, reg.role, reg.epoch,
                reg.wire_port, reg.wire_tls,
            )
            if reg.broker_id == MASTER_ID:
                return RegisterResult("", "")
            master_addr = self.broker_addr_table[reg.broker_name].broker_addrs.get(MASTER_ID, "")
            master_live = self.broker_live_table.get(master_addr)
            return RegisterResult(master_addr, master_live.ha_server_addr if master_live else "")

    def _refuse_deposed_master(self, reg: Registration) -> None:
        """A master of an older epoch than the registered one was deposed: it must not take
        the route back (a paused old master's heartbeat may arrive after the new master's)."""
        if reg.broker_id != MASTER_ID or not reg.epoch:
            return
        broker_data = self.broker_addr_table.get(reg.broker_name)
        current = broker_data.broker_addrs.get(MASTER_ID) if broker_data else None
        live = self.broker_live_table.get(current) if current else None
        if live is not None and current != reg.broker_addr and live.epoch > reg.epoch:
            raise PreconditionFailed(
                f"{reg.broker_addr} registers as master of {reg.broker_name!r} in epoch "
                f"{reg.epoch}, but {current} is its master in epoch {live.epoch}",
                code="STALE_EPOCH")

    def _place_broker(self, reg: Registration) -> None:
        broker_data = self.broker_addr_table.get(reg.broker_name)
        if broker_data is None:
            broker_data = BrokerData(reg.cluster_name, reg.broker_name)
            self.broker_addr_table[reg.broker_name] = broker_data
        elif broker_data.cluster != reg.cluster_name:
            self._drop_from_cluster(broker_data.cluster, reg.broker_name)
            broker_data.cluster = reg.cluster_name
            for addr in broker_data.broker_addrs.values():  # the replica group moved clusters
                if (live := self.broker_live_table.get(addr)) is not None:
                    live.cluster = reg.cluster_name
        self.cluster_addr_table.setdefault(reg.cluster_name, set()).add(reg.broker_name)
        # One address holds one broker id (a slave promoted to master re-registers as id 0).
        for broker_id, addr in list(broker_data.broker_addrs.items()):
            if addr == reg.broker_addr and broker_id != reg.broker_id:
                del broker_data.broker_addrs[broker_id]
        replaced = broker_data.broker_addrs.get(reg.broker_id)
        broker_data.broker_addrs[reg.broker_id] = reg.broker_addr
        if replaced is not None and replaced != reg.broker_addr:
            self.broker_live_table.pop(replaced, None)  # a new process took over this id

    def _rebuild_routes(self, broker_name: str, topics: tuple[TopicConfig, ...]) -> None:
        """Make `broker_name`'s queue data exactly what its master just reported."""
        wanted = {t.topic_name: t for t in topics}
        for topic in list(self.topic_queue_table):
            if topic not in wanted:
                self._drop_queue_data(topic, broker_name)
        for topic in wanted.values():
            self.topic_queue_table.setdefault(topic.topic_name, {})[broker_name] = QueueData(
                broker_name, topic.read_queue_nums, topic.write_queue_nums, topic.perm,
                topic.topic_sys_flag,
            )
            order = self._order_conf.setdefault(topic.topic_name, {})
            if topic.order:
                order[broker_name] = topic.write_queue_nums
            else:
                order.pop(broker_name, None)

    # -- removal ------------------------------------------------------------------------------

    def unregister(self, cluster_name: str, broker_name: str, broker_id: int,
                   broker_addr: str) -> bool:
        """Remove a cleanly stopping broker; False if that broker was not registered."""
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            if live is None or (live.broker_name, live.broker_id) != (broker_name, broker_id):
                return False
            self._remove_locked(broker_addr)
            return True

    def expire_silent(self, expiry_ms: int) -> list[str]:
        """Remove every broker silent for longer than `expiry_ms`; returns their addresses."""
        with self._lock:
            now = self._clock()
            dead = [addr for addr, live in self.broker_live_table.items()
                    if now - live.last_update_ms > expiry_ms]
            for addr in dead:
                self._remove_locked(addr)
            return dead

    def _remove_locked(self, broker_addr: str) -> None:
        live = self.broker_live_table.pop(broker_addr, None)
        if live is None:
            return
        broker_data = self.broker_addr_table.get(live.broker_name)
        if broker_data is None:
            return
        if broker_data.broker_addrs.get(live.broker_id) == broker_addr:
            del broker_data.broker_addrs[live.broker_id]
        if broker_data.broker_addrs:
            return
        del self.broker_addr_table[live.broker_name]
        self._drop_from_cluster(broker_data.cluster, live.broker_name)
        for topic in list(self.topic_queue_table):
            self._drop_queue_data(topic, live.broker_name)

    def _drop_from_cluster(self, cluster: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is None or queues.pop(broker_name, None) is None:
            return
        order = self._order_conf.get(topic)
        if order is not None:
            order.pop(broker_name, None)
        if not queues:
            del self.topic_queue_table[topic]
            self._order_conf.pop(topic, None)

    # -- queries ------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRoute:
        with self._lock:
            queues = self.topic_queue_table.get(topic)
            if not queues:
                raise TopicNotExist(f"no route for topic {topic!r}: no live broker serves it")
            names = sorted(queues)
            broker_datas = [
                self._published(bd)
                for name in names if (bd := self.broker_addr_table.get(name)) is not None
            ]
            order = self._order_conf.get(topic) or {}
            return TopicRoute(
                [queues[name] for name in names], broker_datas,
                ";".join(f"{name}:{count}" for name, count in sorted(order.items())),
            )

    def cluster_info(self) -> ClusterSnapshot:
        with self._lock:
            return ClusterSnapshot(
                {name: self._published(bd) for name, bd in self.broker_addr_table.items()},
                {cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
                {addr: BrokerLiveInfo(live.cluster, live.broker_name, live.broker_id,
                                      live.last_update_ms, live.data_version, live.ha_server_addr,
                                      live.replica_id, live.role, live.epoch,
                                      live.wire_port, live.wire_tls)
                 for addr, live in self.broker_live_table.items()},
            )

    def _published(self, data: BrokerData) -> BrokerData:
        """A copy of `data` for a reply, with the wire port of each of its brokers that
        offers one (clients connect to it without asking the broker first)."""
        wire_ports = {addr: (live.wire_port, live.wire_tls)
                      for addr in data.broker_addrs.values()
                      if (live := self.broker_live_table.get(addr)) is not None
                      and live.wire_port}
        return BrokerData(data.cluster, data.broker_name, dict(data.broker_addrs), wire_ports)

    def topics(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue_table)
